"""Chaos: 2,000 requests on 4 worker processes, one SIGKILLed after every 400 results (and
started again by the fleet's parent), so that each kill lands while the workers hold
requests. Every request ends with exactly one terminal result, and no caller is told of a
result twice. (Kills follow progress rather than the clock: on a clock, the work would have
to take time, and tests do not sleep.)"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from agentensemble.network import NetworkClient, ResponseStatus, Transport
from tests.network.conftest import Fleet, RedisServer

REQUESTS = 2_000
KILL_EVERY = 400
DEADLINE = 300.0
"""Seconds the whole test may take before it fails (it ends as soon as all are answered)."""


def children_of(pid: int) -> list[int]:
    """The live processes whose parent is `pid` (from /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # it ended while we looked
            continue
        if int(fields[1]) == pid and fields[0] != "Z":
            found.append(int(entry.name))
    return found


async def count_announcements(
    url: str,
    counts: Counter[str],
    listening: asyncio.Event,
    heard: Callable[[int], None],
) -> None:
    """Count every result announcement by request id, calling `heard` with the total after
    each, until cancelled."""
    connection = aioredis.Redis.from_url(url, decode_responses=True)
    try:
        async with connection.pubsub() as pubsub:
            await pubsub.psubscribe("agentensemble:notify:*")
            listening.set()
            async for message in pubsub.listen():
                if message["type"] == "pmessage":
                    counts[message["channel"].rsplit(":", 1)[1]] += 1
                    heard(counts.total())
    finally:
        await connection.aclose()


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="finds worker processes in /proc")
async def test_every_request_gets_one_result_while_workers_are_killed(
    fleet: Fleet, redis_server: RedisServer
) -> None:
    announced: Counter[str] = Counter()
    listening, all_heard = asyncio.Event(), asyncio.Event()
    kills_at: list[int] = []
    parents: list[int] = []

    def heard(total: int) -> None:  # kills land as results come in, with work in flight
        victims = children_of(parents[0]) if parents else []
        if total % KILL_EVERY == 0 and total < REQUESTS and victims:
            os.kill(random.choice(victims), signal.SIGKILL)
            kills_at.append(total)
        if total >= REQUESTS:
            all_heard.set()

    async with asyncio.TaskGroup() as group, Transport.redis("fleet", redis_server.url) as t:
        counter = group.create_task(
            count_announcements(redis_server.url, announced, listening, heard)
        )
        await listening.wait()
        client = NetworkClient(t, caller="chaos")
        work = [json.dumps({"job": f"c{n}"}) for n in range(REQUESTS)]
        ids = [await client.submit("fleet", "work", context) for context in work]
        parents.append(fleet.start(processes=4).pid)
        async with asyncio.timeout(DEADLINE):
            await all_heard.wait()
        responses = [await t.result(request_id, 0) for request_id in ids]
        counter.cancel()

    assert kills_at == [400, 800, 1200, 1600]
    assert all(
        response is not None and response.status is ResponseStatus.COMPLETED
        for response in responses
    )
    assert set(announced) == set(ids)
    assert set(announced.values()) == {1}
