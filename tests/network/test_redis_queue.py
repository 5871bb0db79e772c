"""`RequestQueue.redis`: durable queues on a real Redis server."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Protocol, cast

import pytest
import redis.asyncio as aioredis

from agentensemble.network._redis_queue import RedisRequestQueue
from agentensemble.network._redis_results import RedisResultStore
from agentensemble.network._spi import BadRequest, RequestQueue, ResultStore
from agentensemble.network._wire import Priority, ResponseStatus, WorkRequest, WorkResponse

pytestmark = pytest.mark.integration

HEARTBEAT = timedelta(seconds=0.6)
"""Heartbeats short enough that a dead worker is noticed within a second."""


def request(request_id: str, priority: Priority = Priority.NORMAL) -> WorkRequest:
    return WorkRequest(request_id=request_id, from_="caller", task="summarise", priority=priority)


@pytest.fixture
async def queue(redis_url: str) -> AsyncIterator[RequestQueue]:
    made = RequestQueue.redis(redis_url, heartbeat_ttl=HEARTBEAT)
    yield made
    await made.aclose()


async def entries(raw: aioredis.Redis, stream: str) -> list[tuple[str, dict[str, str]]]:
    return cast("list[tuple[str, dict[str, str]]]", await raw.xrange(stream))


async def take(queue: RequestQueue, within: float = 5.0) -> WorkRequest:
    received = await queue.dequeue("jobs", within)
    assert isinstance(received, WorkRequest), received
    return received


async def test_the_factory_makes_a_redis_queue(redis_url: str) -> None:
    made = RequestQueue.redis(redis_url)
    assert isinstance(made, RedisRequestQueue)
    await made.aclose()


async def test_higher_priority_first_and_fifo_within_a_priority(queue: RequestQueue) -> None:
    for request_id, priority in [
        ("low", Priority.LOW),
        ("normal-1", Priority.NORMAL),
        ("high", Priority.HIGH),
        ("normal-2", Priority.NORMAL),
        ("critical", Priority.CRITICAL),
    ]:
        assert await queue.enqueue("jobs", request(request_id, priority))

    taken = [(await take(queue)).request_id for _ in range(5)]

    assert taken == ["critical", "high", "normal-1", "normal-2", "low"]
    assert await queue.dequeue("jobs", 0.05) is None


async def test_a_blocked_dequeue_gets_a_request_enqueued_later(
    redis_url: str, queue: RequestQueue
) -> None:
    other = RequestQueue.redis(redis_url)
    try:
        assert await queue.dequeue("jobs", 0.01) is None  # the groups exist, the worker waits
        waiting = take(queue)
        async with asyncio.TaskGroup() as group:
            got = group.create_task(waiting)
            await other.enqueue("jobs", request("later"))
        assert got.result().request_id == "later"
    finally:
        await other.aclose()


async def test_the_same_id_is_accepted_once(queue: RequestQueue, raw: aioredis.Redis) -> None:
    assert await queue.enqueue("jobs", request("once")) is True
    assert await queue.enqueue("jobs", request("once", Priority.HIGH)) is False

    assert await raw.xlen("agentensemble:queue:jobs:NORMAL") == 1
    assert await raw.exists("agentensemble:queue:jobs:HIGH") == 0
    assert (await take(queue)).request_id == "once"


async def test_an_entry_carries_the_payload_and_id(
    queue: RequestQueue, raw: aioredis.Redis
) -> None:
    await queue.enqueue("jobs", request("r1"))

    [(_, fields)] = await entries(raw, "agentensemble:queue:jobs:NORMAL")

    assert fields["id"] == "r1"
    assert WorkRequest.model_validate_json(fields["payload"]) == request("r1")


async def test_acknowledge_removes_the_entry(queue: RequestQueue, raw: aioredis.Redis) -> None:
    await queue.enqueue("jobs", request("done"))
    await take(queue)

    await queue.acknowledge("jobs", "done")

    assert await raw.xlen("agentensemble:queue:jobs:NORMAL") == 0
    pending = await raw.xpending("agentensemble:queue:jobs:NORMAL", "agentensemble:group:jobs")
    assert pending["pending"] == 0
    assert await queue.dequeue("jobs", 0.05) is None


async def test_a_dead_workers_request_is_reclaimed(redis_url: str, queue: RequestQueue) -> None:
    dying = RequestQueue.redis(redis_url, heartbeat_ttl=HEARTBEAT)
    await queue.enqueue("jobs", request("orphan"))
    assert (await take(dying)).request_id == "orphan"

    await dying.aclose()  # the heartbeat stops and its key goes; nothing is acknowledged

    reclaimed = await take(queue, within=10.0)
    assert reclaimed.request_id == "orphan"
    await queue.acknowledge("jobs", "orphan")


async def test_an_expired_heartbeat_is_enough(
    redis_url: str, queue: RequestQueue, raw: aioredis.Redis
) -> None:
    crashed = RedisRequestQueue(redis_url, heartbeat_ttl=timedelta(seconds=0.6))
    await queue.enqueue("jobs", request("orphan"))
    assert (await take(crashed)).request_id == "orphan"
    heartbeat = crashed._heartbeat
    assert heartbeat is not None
    heartbeat.stop()  # as if the process died: no more beats...
    heartbeat.join()
    await raw.delete(f"agentensemble:heartbeat:{crashed.consumer}")  # ...and the key expired

    assert (await take(queue, within=10.0)).request_id == "orphan"
    crashed._heartbeat = None
    await crashed.aclose()


async def test_a_live_worker_keeps_its_request_past_the_visibility_timeout(
    redis_url: str, raw: aioredis.Redis
) -> None:
    visibility = timedelta(seconds=0.4)
    busy = RedisRequestQueue(redis_url, heartbeat_ttl=HEARTBEAT, visibility_timeout=visibility)
    peer = RedisRequestQueue(redis_url, heartbeat_ttl=HEARTBEAT, visibility_timeout=visibility)
    try:
        await busy.enqueue("jobs", request("long"))
        assert (await take(busy)).request_id == "long"

        # many reclaim passes of the peer, over several visibility timeouts
        for _ in range(12):
            assert await peer.dequeue("jobs", 0.3) is None

        [entry] = await raw.xpending_range(
            "agentensemble:queue:jobs:NORMAL", "agentensemble:group:jobs", "-", "+", 10
        )
        assert entry["consumer"] == busy.consumer
        assert entry["times_delivered"] == 1
    finally:
        await busy.aclose()
        await peer.aclose()


async def test_dead_lettered_after_max_deliveries(redis_url: str, raw: aioredis.Redis) -> None:
    store = ResultStore.redis(redis_url)
    await RequestQueue.redis(redis_url).enqueue("jobs", request("poison"))
    try:
        for _ in range(3):
            worker = RedisRequestQueue(redis_url, heartbeat_ttl=timedelta(seconds=0.6))
            assert (await take(worker, within=10.0)).request_id == "poison"
            await worker.aclose()  # dies while running it
        last = RedisRequestQueue(redis_url, heartbeat_ttl=timedelta(seconds=0.6))
        waiting = store.wait("poison", 10.0)
        assert await last.dequeue("jobs", 3.0) is None
        response = await waiting
        await last.aclose()

        assert response is not None
        assert response.status is ResponseStatus.FAILED
        assert response.error is not None
        assert "dead-lettered to agentensemble:dead:jobs" in response.error
        assert "stopped heartbeating while running it, delivery 3 of 3" in response.error
        [(_, letter)] = await entries(raw, "agentensemble:dead:jobs")
        assert letter["id"] == "poison"
        assert WorkRequest.model_validate_json(letter["payload"]).request_id == "poison"
        assert "delivery 3 of 3" in letter["error"]
        assert await raw.xlen("agentensemble:queue:jobs:NORMAL") == 0
    finally:
        await store.aclose()


async def test_malformed_entries_are_bad_requests(queue: RequestQueue, raw: aioredis.Redis) -> None:
    assert await queue.dequeue("jobs", 0.01) is None  # creates the group
    stream = "agentensemble:queue:jobs:NORMAL"
    not_json = str(await raw.xadd(stream, {"payload": "{not json"}))
    await raw.xadd(
        stream, {"payload": '{"requestId": "r9", "from": "x", "task": "t", "priority": "URGENT"}'}
    )

    first = await queue.dequeue("jobs", 5.0)
    second = await queue.dequeue("jobs", 5.0)

    assert isinstance(first, BadRequest)
    assert first.request_id == f"entry:{not_json}"
    assert "Invalid JSON" in first.error
    assert isinstance(second, BadRequest)
    assert second.request_id == "r9"
    assert "priority" in second.error
    assert "'URGENT'" in second.error
    await queue.acknowledge("jobs", first.request_id)
    await queue.acknowledge("jobs", "r9")
    assert await raw.xlen(stream) == 0


async def test_an_entry_deleted_while_pending_gets_a_failed_result(
    redis_url: str, queue: RequestQueue, raw: aioredis.Redis
) -> None:
    store = RedisResultStore(redis_url)
    dying = RequestQueue.redis(redis_url, heartbeat_ttl=HEARTBEAT)
    try:
        await queue.enqueue("jobs", request("gone"))
        await take(dying)
        [(entry_id, _)] = await entries(raw, "agentensemble:queue:jobs:NORMAL")
        await raw.xdel("agentensemble:queue:jobs:NORMAL", entry_id)
        await dying.aclose()

        waiting = store.wait("gone", 10.0)
        assert await queue.dequeue("jobs", 2.0) is None
        response = await waiting

        assert response == WorkResponse.failed(
            "gone", "request deleted from the queue while pending"
        )
    finally:
        await store.aclose()


async def test_release_hands_the_request_to_a_peer_without_counting_it(
    redis_url: str, queue: RequestQueue, raw: aioredis.Redis
) -> None:
    draining = RequestQueue.redis(redis_url, heartbeat_ttl=HEARTBEAT)
    try:
        await queue.enqueue("jobs", request("handed"))
        await take(draining)
        await draining.release("jobs", "handed")

        assert (await take(queue, within=10.0)).request_id == "handed"
        [entry] = await raw.xpending_range(
            "agentensemble:queue:jobs:NORMAL", "agentensemble:group:jobs", "-", "+", 10
        )
        assert entry["times_delivered"] == 1
    finally:
        await draining.aclose()


class Server(Protocol):
    url: str

    def restart(self) -> None: ...


async def test_no_accepted_request_is_lost_over_a_restart(redis_server: Server) -> None:
    worker = RedisRequestQueue(redis_server.url, heartbeat_ttl=HEARTBEAT)
    try:
        for n in range(5):
            assert await worker.enqueue("jobs", request(f"r{n}"))
        assert (await take(worker)).request_id == "r0"
        await worker.acknowledge("jobs", "r0")
        assert (await take(worker)).request_id == "r1"  # running when Redis goes away

        async with asyncio.TaskGroup() as group:  # a dequeue blocked across the restart
            blocked = group.create_task(worker.dequeue("idle", 60.0))
            await asyncio.to_thread(redis_server.restart)
            await worker.enqueue("idle", request("after-restart"))
        received = blocked.result()
        assert isinstance(received, WorkRequest)
        assert received.request_id == "after-restart"
        await worker.acknowledge("idle", "after-restart")

        seen = {"r1"}
        for _ in range(3):
            got = await take(worker, within=15.0)
            seen.add(got.request_id)
            await worker.acknowledge("jobs", got.request_id)
        await worker.acknowledge("jobs", "r1")
        assert seen == {"r1", "r2", "r3", "r4"}
        assert await worker.enqueue("jobs", request("r2")) is False  # still deduped
    finally:
        await worker.aclose()


async def test_the_redis_transport_answers_and_acknowledges_in_one_step(
    redis_url: str, raw: aioredis.Redis
) -> None:
    from agentensemble.network import Transport

    async with Transport.redis("jobs", redis_url, heartbeat_ttl=HEARTBEAT) as transport:
        assert await transport.send(request("r1"))
        assert not await transport.send(request("r1"))
        received = await transport.receive(5)
        assert isinstance(received, WorkRequest)
        answer = WorkResponse(request_id="r1", status=ResponseStatus.COMPLETED, result="ok")

        assert await transport.deliver(answer)
        assert not await transport.deliver(answer.model_copy(update={"result": "second"}))

        assert await transport.result("r1", 1) == answer
        assert await entries(raw, "agentensemble:queue:jobs:NORMAL") == []
        pending = await raw.xpending("agentensemble:queue:jobs:NORMAL", "agentensemble:group:jobs")
        assert pending["pending"] == 0
        # the id stays deduped as long as its result is kept, not a day
        dedupe_ms = await raw.pttl("agentensemble:request:jobs:r1")
        assert 0 < dedupe_ms <= 3_600_000


async def test_a_requests_events_are_followed_through_redis(redis_url: str) -> None:
    from agentensemble import Ensemble, FunctionModel, Task
    from agentensemble.network import EnsembleServer, NetworkClient, Transport
    from agentensemble.observability import ExecutionTrace

    kitchen = Ensemble(
        name="kitchen",
        llm=FunctionModel(lambda messages, tools: "soup is ready"),
        shared_tasks={"cook": Task("Cook what the request asks for")},
    )
    async with Transport.redis("kitchen", redis_url, heartbeat_ttl=HEARTBEAT) as transport:
        server = EnsembleServer(kitchen, transport)
        async with asyncio.TaskGroup() as group:
            group.create_task(server.serve())
            client = NetworkClient(transport)
            request_id = await client.submit("kitchen", "cook", "soup")
            events = [event async for event in client.events(request_id, timeout=30)]
            server.drain()

    assert events[0].type == "ensemble_started"
    assert {event.ensemble_id for event in events} == {request_id}
    assert [task.final_output for task in ExecutionTrace.from_events(events).task_traces] == [
        "soup is ready"
    ]


async def test_dequeue_many_takes_at_most_count_highest_priority_first(
    queue: RequestQueue, raw: aioredis.Redis
) -> None:
    for request_id, priority in [
        ("low", Priority.LOW),
        ("normal-1", Priority.NORMAL),
        ("high", Priority.HIGH),
        ("normal-2", Priority.NORMAL),
    ]:
        await queue.enqueue("jobs", request(request_id, priority))

    first = await queue.dequeue_many("jobs", 3, 5)
    rest = await queue.dequeue_many("jobs", 3, 5)

    assert [item.request_id for item in first] == ["high", "normal-1", "normal-2"]
    assert [item.request_id for item in rest] == ["low"]
    pending = await raw.xpending("agentensemble:queue:jobs:NORMAL", "agentensemble:group:jobs")
    assert pending["pending"] == 2  # taken, not yet acknowledged
