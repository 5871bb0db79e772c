"""`ResultStore.redis`: write-once results and waits on a real Redis server."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Protocol

import pytest
import redis.asyncio as aioredis

from agentensemble.network._redis_results import RedisResultStore
from agentensemble.network._spi import ResultStore
from agentensemble.network._wire import ResponseStatus, WorkResponse

pytestmark = pytest.mark.integration


class Server(Protocol):
    url: str

    def restart(self) -> None: ...


async def eventually(check: Callable[[], Awaitable[bool]]) -> None:
    """Wait until `check` holds, polling Redis (the state is in Redis, not in an event)."""
    async with asyncio.timeout(20):
        for _ in itertools.count():
            if await check():
                return
            await asyncio.sleep(0.01)


async def subscribers(raw: aioredis.Redis, request_id: str) -> int:
    channel = f"agentensemble:notify:{request_id}"
    [(_, count)] = await raw.pubsub_numsub(channel)
    return int(count)


async def _equals(value: Awaitable[int], expected: int) -> bool:
    return await value == expected


def done(request_id: str, result: str = "ok") -> WorkResponse:
    return WorkResponse(request_id=request_id, status=ResponseStatus.COMPLETED, result=result)


@pytest.fixture
async def store(redis_url: str) -> AsyncIterator[ResultStore]:
    made = ResultStore.redis(redis_url)
    assert isinstance(made, RedisResultStore)
    yield made
    await made.aclose()


async def test_a_result_is_written_once_and_published_once(
    store: ResultStore, raw: aioredis.Redis
) -> None:
    async with raw.pubsub() as pubsub:
        await pubsub.subscribe("agentensemble:notify:r1")
        assert (await pubsub.get_message(timeout=5.0))["type"] == "subscribe"

        assert await store.store(done("r1", "first")) is True
        assert await store.store(done("r1", "second")) is False

        first = await pubsub.get_message(timeout=5.0)
        assert first is not None
        assert WorkResponse.model_validate_json(first["data"]).result == "first"
        await raw.publish("agentensemble:notify:r1", "marker")  # anything after it is later
        second = await pubsub.get_message(timeout=5.0)
        assert second is not None
        assert second["data"] == "marker"

    assert await store.retrieve("r1") == done("r1", "first")
    assert 0 < await raw.pttl("agentensemble:result:r1") <= 3_600_000


async def test_retrieve_of_an_unknown_id_is_none(store: ResultStore) -> None:
    assert await store.retrieve("nobody") is None


async def test_wait_sees_a_result_stored_before(store: ResultStore) -> None:
    await store.store(done("before"))

    assert await store.wait("before", 5.0) == done("before")


async def test_wait_sees_a_result_stored_while_it_waits(store: ResultStore, redis_url: str) -> None:
    writer = ResultStore.redis(redis_url)
    try:
        async with asyncio.TaskGroup() as group:
            waiting = group.create_task(store.wait("later", 10.0))
            await asyncio.sleep(0)  # the waiter registers first
            await writer.store(done("later"))
        assert waiting.result() == done("later")
    finally:
        await writer.aclose()


async def test_wait_sees_a_result_stored_while_it_subscribes(
    store: ResultStore, redis_url: str
) -> None:
    writer = ResultStore.redis(redis_url)
    try:
        for n in range(20):  # stores landing at every point of the subscription
            async with asyncio.TaskGroup() as group:
                waiting = group.create_task(store.wait(f"race-{n}", 10.0))
                for _ in range(n):
                    await asyncio.sleep(0)
                await writer.store(done(f"race-{n}"))
            assert waiting.result() == done(f"race-{n}")
    finally:
        await writer.aclose()


async def test_wait_times_out_with_none(store: ResultStore) -> None:
    assert await store.wait("never", 0.2) is None


async def test_a_thousand_waiters_share_one_connection(
    store: ResultStore, redis_url: str, raw: aioredis.Redis
) -> None:
    writer = ResultStore.redis(redis_url)
    ids = [f"many-{n}" for n in range(1000)]
    try:
        async with asyncio.TaskGroup() as group:
            waits = [group.create_task(store.wait(request_id, 30.0)) for request_id in ids]
            await eventually(lambda: _equals(subscribers(raw, ids[-1]), 1))
            clients = await raw.client_list()
            assert len([c for c in clients if int(c["sub"]) > 0]) == 1
            assert len(clients) <= 4  # this test's client, the waiters' pub/sub and pool
            for request_id in ids:
                await writer.store(done(request_id))
        assert [task.result() for task in waits] == [done(request_id) for request_id in ids]
        await eventually(lambda: _equals(subscribers(raw, ids[0]), 0))
    finally:
        await writer.aclose()


async def test_a_cancelled_waiter_unsubscribes(store: ResultStore, raw: aioredis.Redis) -> None:
    waiting = asyncio.create_task(store.wait("cancelled", 30.0))
    await eventually(lambda: _equals(subscribers(raw, "cancelled"), 1))

    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting

    await eventually(lambda: _equals(subscribers(raw, "cancelled"), 0))


async def test_a_wait_survives_a_redis_restart(redis_server: Server) -> None:
    store = ResultStore.redis(redis_server.url)
    writer = ResultStore.redis(redis_server.url)
    try:
        async with asyncio.TaskGroup() as group:
            waiting = group.create_task(store.wait("across", 60.0))
            kept = group.create_task(store.wait("stored-while-down", 60.0))
            await writer.store(done("warm-up"))
            assert await store.wait("warm-up", 5.0) == done("warm-up")

            await asyncio.to_thread(redis_server.restart)
            # a result written right after the restart, maybe before the waiter is
            # subscribed again, is still seen: the re-subscription reads the key again
            await writer.store(done("stored-while-down"))
            await writer.store(done("across"))
        assert waiting.result() == done("across")
        assert kept.result() == done("stored-while-down")
    finally:
        await store.aclose()
        await writer.aclose()


async def test_a_redis_store_refuses_a_second_event_loop_while_its_first_is_open(
    redis_url: str,
) -> None:
    import threading

    from agentensemble.network import ResultStore

    store = ResultStore.redis(redis_url)
    await store.retrieve("a")
    errors: list[BaseException] = []

    def elsewhere() -> None:
        try:
            asyncio.run(store.retrieve("a"))
        except RuntimeError as error:
            errors.append(error)

    thread = threading.Thread(target=elsewhere)
    thread.start()
    thread.join()
    await store.aclose()

    assert len(errors) == 1
    assert "in use on another event loop" in str(errors[0])


async def test_a_second_waiter_on_a_subscribed_id_sees_a_result_announced_before_it_came(
    redis_url: str, raw: aioredis.Redis
) -> None:
    from agentensemble.network import ResultStore

    store = ResultStore.redis(redis_url)
    first = asyncio.create_task(store.wait("shared", 60))
    await eventually(lambda: _equals(subscribers(raw, "shared"), 1))
    # the announcement came and went before the second waiter: only the key is left
    answer = WorkResponse(request_id="shared", status=ResponseStatus.COMPLETED, result="one")
    await raw.set("agentensemble:result:shared", answer.to_json())
    try:
        async with asyncio.timeout(20):  # not the 60 s the wait allows
            second = await store.wait("shared", 60)
    finally:
        first.cancel()
        await store.aclose()

    assert second == answer
