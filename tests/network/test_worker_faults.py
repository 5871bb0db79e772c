"""``agentensemble worker`` fleets on a real Redis, under the faults of issue 24: a worker
SIGKILLed mid-request, a live worker's long request, a duplicate id, a poison request, a
Redis restart, SIGTERM, and bad input. Workers are real processes serving `fleet.py`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff
from redis.exceptions import BusyLoadingError, ConnectionError

from agentensemble.network import NetworkClient, ResponseStatus, Transport, WorkResponse
from tests.network.conftest import ROOT, WAIT, Fleet, RedisServer


@pytest.fixture
async def client(redis_server: RedisServer) -> AsyncIterator[NetworkClient]:
    async with Transport.redis("fleet", redis_server.url) as transport:
        yield NetworkClient(transport, caller="test")


@pytest.fixture
async def watch(redis_server: RedisServer) -> AsyncIterator[aioredis.Redis]:
    connection = aioredis.Redis.from_url(
        redis_server.url,
        decode_responses=True,
        retry=Retry(ExponentialBackoff(cap=0.5), retries=60),
        retry_on_error=[ConnectionError, BusyLoadingError],
    )
    try:
        yield connection
    finally:
        await connection.aclose()


def job(name: str, mode: str = "quick") -> str:
    return json.dumps({"job": name, "mode": mode})


async def started(watch: aioredis.Redis) -> tuple[int, str]:
    """The (pid, job) of the next execution to start."""
    popped = await watch.blpop(["started"], timeout=WAIT)
    assert popped is not None, "no job started"
    pid, _, name = str(popped[1]).partition(":")
    return int(pid), name


async def runs(watch: aioredis.Redis, name: str) -> int:
    return int(await watch.get(f"runs:{name}") or 0)


async def result(client: NetworkClient, request_id: str) -> WorkResponse:
    return await client.result(request_id, WAIT)


def finished_by(response: WorkResponse) -> int:
    assert response.status is ResponseStatus.COMPLETED, response
    assert response.result is not None
    return int(response.result.rsplit(" ", 1)[1])


async def test_a_request_whose_worker_is_killed_completes_once_on_another(
    fleet: Fleet, client: NetworkClient, watch: aioredis.Redis
) -> None:
    fleet.start(processes=2)
    request_id = await client.submit("fleet", "work", job("j", "hold-first"))
    victim, _ = await started(watch)

    os.kill(victim, signal.SIGKILL)
    response = await result(client, request_id)

    assert finished_by(response) != victim
    assert await runs(watch, "j") == 2
    assert await client.transport.result(request_id, 0) == response  # the one result


async def test_a_live_workers_long_request_is_never_taken_from_it(
    fleet: Fleet, client: NetworkClient, watch: aioredis.Redis
) -> None:
    fleet.start(processes=2)
    long_id = await client.submit("fleet", "work", job("long", "hold"))
    holder, _ = await started(watch)

    # Five heartbeat lifetimes pass while the peer keeps serving (and looking for work to
    # reclaim): the long request stays with its worker.
    assert await client.transport.result(long_id, 5.0) is None
    quick = await client.call("fleet", "work", job("quick"), timeout=WAIT)
    assert finished_by(quick) > 0
    assert await runs(watch, "long") == 1

    await watch.rpush("release:long", "go")
    assert finished_by(await result(client, long_id)) == holder
    assert await runs(watch, "long") == 1


async def test_the_same_request_id_twice_runs_once_and_both_callers_get_its_result(
    fleet: Fleet, client: NetworkClient, watch: aioredis.Redis, redis_server: RedisServer
) -> None:
    async with Transport.redis("fleet", redis_server.url) as other_transport:
        other = NetworkClient(other_transport, caller="other")
        first = await client.submit("fleet", "work", job("once"), request_id="order-1")
        second = await other.submit("fleet", "work", job("once"), request_id="order-1")
        fleet.start()

        responses = [await result(client, first), await result(other, second)]

    assert responses[0] == responses[1]
    assert await runs(watch, "once") == 1


async def test_a_poison_request_is_dead_lettered_after_three_deliveries(
    fleet: Fleet, client: NetworkClient, watch: aioredis.Redis
) -> None:
    # queued before the workers start, so that the first worker takes them all at once and
    # the innocent requests die beside the poison one
    poison = await client.submit("fleet", "work", job("poison", "die"))
    innocent = [await client.submit("fleet", "work", job(f"innocent-{n}")) for n in range(3)]
    fleet.start(processes=2)

    response = await result(client, poison)

    assert response.status is ResponseStatus.FAILED
    assert response.error is not None
    assert "dead" in response.error.lower()
    assert await runs(watch, "poison") == 3
    for request_id in innocent:
        assert finished_by(await result(client, request_id)) > 0
    assert await watch.xlen("agentensemble:dead:fleet") == 1


async def test_no_accepted_request_is_lost_when_redis_restarts(
    fleet: Fleet, client: NetworkClient, watch: aioredis.Redis, redis_server: RedisServer
) -> None:
    fleet.start()
    held = await client.submit("fleet", "work", job("held", "hold"))
    await started(watch)
    waiting = await client.submit("fleet", "work", job("waiting"))

    redis_server.restart()
    await watch.rpush("release:held", "go")
    later = await client.submit("fleet", "work", job("later"))

    for request_id in (held, waiting, later):
        assert finished_by(await result(client, request_id)) > 0


async def test_sigterm_finishes_the_request_in_flight_takes_no_new_one_and_exits_0(
    fleet: Fleet, client: NetworkClient, watch: aioredis.Redis
) -> None:
    parent = fleet.start()
    in_flight = await client.submit("fleet", "work", job("in-flight", "hold"))
    worker, _ = await started(watch)

    parent.send_signal(signal.SIGTERM)
    await watch.rpush("release:in-flight", "go")

    assert finished_by(await result(client, in_flight)) == worker
    assert parent.wait(timeout=WAIT) == 0
    queued = await client.submit("fleet", "work", job("queued"))
    assert await client.transport.result(queued, 0.5) is None  # nobody serves now
    fleet.start()
    assert finished_by(await result(client, queued)) != worker


async def test_a_drain_that_times_out_hands_the_request_to_a_peer(
    fleet: Fleet, client: NetworkClient, watch: aioredis.Redis
) -> None:
    draining = fleet.start(FLEET_DRAIN_TIMEOUT="0.5")
    request_id = await client.submit("fleet", "work", job("handed-over", "hold-first"))
    first, _ = await started(watch)
    fleet.start()

    draining.send_signal(signal.SIGTERM)

    assert finished_by(await result(client, request_id)) != first
    assert draining.wait(timeout=WAIT) == 0


@pytest.mark.parametrize(
    ("task", "context", "expected"),
    [
        ("bake", job("x"), "Unknown shared task or tool 'bake' on ensemble 'fleet'"),
        ("work", "{oops", "is not valid JSON for tool 'work'"),
    ],
)
async def test_a_bad_request_gets_a_failed_response_and_the_worker_keeps_serving(
    fleet: Fleet, client: NetworkClient, task: str, context: str, expected: str
) -> None:
    fleet.start()

    response = await client.call("fleet", task, context, timeout=WAIT)
    after = await client.call("fleet", "work", job("after-bad"), timeout=WAIT)

    assert response.status is ResponseStatus.FAILED
    assert response.error is not None
    assert expected in response.error
    assert finished_by(after) > 0


@pytest.mark.parametrize(
    ("payload", "request_id", "expected"),
    [
        ("{not json", None, "JSON"),
        (json.dumps({"requestId": "no-sender", "task": "work"}), "no-sender", "from"),
    ],
)
async def test_a_malformed_entry_on_the_stream_gets_a_failed_response(
    fleet: Fleet,
    client: NetworkClient,
    watch: aioredis.Redis,
    payload: str,
    request_id: str | None,
    expected: str,
) -> None:
    fields: dict[Any, Any] = {"payload": payload}
    entry = str(await watch.xadd("agentensemble:queue:fleet:NORMAL", fields))
    fleet.start()

    response = await result(client, request_id or f"entry:{entry}")
    after = await client.call("fleet", "work", job("after-malformed"), timeout=WAIT)

    assert response.status is ResponseStatus.FAILED
    assert response.error is not None
    assert expected in response.error
    assert finished_by(after) > 0


def test_the_worker_command_refuses_bad_input_before_starting(redis_server: RedisServer) -> None:
    def worker(*arguments: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "agentensemble.cli", "worker", *arguments]
        return subprocess.run(
            command, cwd=ROOT, capture_output=True, text=True, timeout=WAIT, check=False
        )

    missing = worker("tests.network.nowhere:ensemble", "--redis", redis_server.url)
    bad_file = worker(str(ROOT / "examples" / "yaml" / "nowhere.yaml"))
    no_colon = worker("tests.network.fleet", "--redis", redis_server.url)
    zero = worker("tests.network.fleet:ensemble", "--processes", "0")
    shares_nothing = worker("tests.network.fleet:shares_nothing")
    bad_url = worker("tests.network.fleet:ensemble", "--redis", "http://nowhere")
    not_a_number = worker("tests.network.fleet:ensemble", "--heartbeat-ttl", "nan")

    assert (missing.returncode, no_colon.returncode, zero.returncode) == (2, 2, 2)
    assert bad_file.returncode == 2
    assert "nowhere.yaml" in bad_file.stderr
    for refused, message in [
        (shares_nothing, "the ensemble shares nothing"),
        (bad_url, "--redis http://nowhere"),
        (not_a_number, "--heartbeat-ttl must be a number of seconds > 0, got: nan"),
    ]:
        assert refused.returncode == 2, refused.stderr
        assert message in refused.stderr
    assert "cannot load tests.network.nowhere:ensemble" in missing.stderr
    assert "expected MODULE:ATTRIBUTE" in no_colon.stderr
    assert "--processes must be >= 1, got: 0" in zero.stderr


async def test_max_requests_replaces_a_process_after_it_took_that_many(
    fleet: Fleet, client: NetworkClient
) -> None:
    fleet.start(1, "--max-requests", "2")

    workers = []
    for n in range(6):  # one after the other: each process takes two, then is replaced
        response = await client.call("fleet", "work", job(f"r{n}"), timeout=WAIT)
        workers.append(finished_by(response))

    assert len(set(workers)) == 3
    assert workers[0] == workers[1] != workers[2] == workers[3] != workers[4] == workers[5]


async def test_a_worker_serves_the_shared_tools_of_a_yaml_file(
    fleet: Fleet, client: NetworkClient, tmp_path: Path
) -> None:
    desk = tmp_path / "desk.yaml"
    desk.write_text("name: fleet\nshared_tools:\n  add: calculator\n", encoding="utf-8")
    fleet.start(target=str(desk))

    response = await client.call("fleet", "add", '{"expression": "2 + 40"}', timeout=WAIT)

    assert response.status is ResponseStatus.COMPLETED
    assert response.result is not None
    assert "42" in response.result
