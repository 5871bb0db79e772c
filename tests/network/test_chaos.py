"""Chaos: 2,000 requests on 4 worker processes, one SIGKILLed every 3 seconds (and started
again by the fleet's parent). Every request ends with exactly one terminal result, and no
caller is told of a result twice."""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
from collections import Counter
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from agentensemble.network import NetworkClient, ResponseStatus, Transport, WorkResponse
from tests.network.conftest import Fleet, RedisServer

REQUESTS = 2_000
KILL_EVERY = 3.0
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


async def count_announcements(url: str, counts: Counter[str], listening: asyncio.Event) -> None:
    """Count every result announcement by request id, until cancelled."""
    connection = aioredis.Redis.from_url(url, decode_responses=True)
    try:
        async with connection.pubsub() as pubsub:
            await pubsub.psubscribe("agentensemble:notify:*")
            listening.set()
            async for message in pubsub.listen():
                if message["type"] == "pmessage":
                    counts[message["channel"].rsplit(":", 1)[1]] += 1
    finally:
        await connection.aclose()


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="finds worker processes in /proc")
async def test_every_request_gets_one_result_while_workers_are_killed(
    fleet: Fleet, redis_server: RedisServer
) -> None:
    announced: Counter[str] = Counter()
    listening = asyncio.Event()
    killed = 0
    async with asyncio.TaskGroup() as group, Transport.redis("fleet", redis_server.url) as t:
        counter = group.create_task(count_announcements(redis_server.url, announced, listening))
        await listening.wait()
        client = NetworkClient(t, caller="chaos")
        work = [json.dumps({"job": f"c{n}", "seconds": 0.05}) for n in range(REQUESTS)]
        ids = [await client.submit("fleet", "work", context) for context in work]
        parent = fleet.start(processes=4)

        loop = asyncio.get_running_loop()
        deadline = loop.time() + DEADLINE
        next_kill = loop.time() + KILL_EVERY
        for request_id in ids:  # wait for each in turn, killing a worker every KILL_EVERY s
            while await t.result(request_id, max(next_kill - loop.time(), 0)) is None:
                assert loop.time() < deadline, f"no result for {request_id}"
                victims = children_of(parent.pid)
                if victims:
                    os.kill(random.choice(victims), signal.SIGKILL)
                    killed += 1
                next_kill = loop.time() + KILL_EVERY
        responses: list[WorkResponse] = []
        for request_id in ids:
            response = await t.result(request_id, 0)
            assert response is not None
            responses.append(response)
        # the announcements of the last results may still be on their way
        while sum(announced.values()) < REQUESTS and loop.time() < deadline:
            await t.result("never", 0.05)
        counter.cancel()

    assert killed >= 1
    assert all(response.status is ResponseStatus.COMPLETED for response in responses)
    assert set(announced) == set(ids)
    assert set(announced.values()) == {1}
