"""The in-process queues and result store of BEHAVIOUR 18.2."""

from __future__ import annotations

import asyncio
import threading
from datetime import timedelta

import pytest

from agentensemble.errors import ValidationError
from agentensemble.network import (
    AgingPolicy,
    Priority,
    QueueFullError,
    RequestQueue,
    ResponseStatus,
    ResultStore,
    WorkRequest,
    WorkResponse,
)
from agentensemble.network._queues import PriorityQueue


def request(request_id: str, priority: Priority = Priority.NORMAL) -> WorkRequest:
    return WorkRequest(request_id=request_id, from_="test", task="t", priority=priority)


def done(request_id: str, result: str = "ok") -> WorkResponse:
    return WorkResponse(request_id=request_id, status=ResponseStatus.COMPLETED, result=result)


async def drain(queue: RequestQueue, name: str = "q") -> list[str]:
    taken = []
    while (item := await queue.dequeue(name, 0)) is not None:
        assert isinstance(item, WorkRequest)
        taken.append(item.request_id)
    return taken


async def test_the_fifo_queue_hands_out_requests_in_order_per_queue_name() -> None:
    queue = RequestQueue.in_memory()
    for name in ("a", "b", "c"):
        await queue.enqueue("q", request(name))
    await queue.enqueue("other", request("x"))

    assert await drain(queue) == ["a", "b", "c"]
    assert await drain(queue, "other") == ["x"]


async def test_an_accepted_id_is_not_queued_again_until_acknowledged() -> None:
    queue = RequestQueue.in_memory()

    assert await queue.enqueue("q", request("a"))
    assert not await queue.enqueue("q", request("a"))
    assert await drain(queue) == ["a"]
    assert not await queue.enqueue("q", request("a"))  # taken, not done
    await queue.acknowledge("q", "a")
    assert await queue.enqueue("q", request("a"))


async def test_a_released_request_goes_back_to_the_front() -> None:
    queue = RequestQueue.in_memory()
    await queue.enqueue("q", request("a"))
    await queue.enqueue("q", request("b"))
    await queue.dequeue("q", 0)

    await queue.release("q", "a")

    assert await drain(queue) == ["a", "b"]


async def test_a_waiting_dequeue_wakes_for_a_request_from_another_thread() -> None:
    queue = RequestQueue.in_memory()
    waiting = asyncio.create_task(queue.dequeue("q", 10))
    await asyncio.sleep(0)  # let it start waiting

    thread = threading.Thread(target=asyncio.run, args=(queue.enqueue("q", request("a")),))
    thread.start()
    taken = await waiting
    thread.join()

    assert isinstance(taken, WorkRequest)
    assert taken.request_id == "a"


async def test_dequeue_returns_none_when_nothing_comes_in_time() -> None:
    assert await RequestQueue.in_memory().dequeue("q", 0.01) is None


async def test_the_priority_queue_takes_higher_priorities_first_then_the_oldest() -> None:
    queue = RequestQueue.priority()
    await queue.enqueue("q", request("low", Priority.LOW))
    await queue.enqueue("q", request("normal-1"))
    await queue.enqueue("q", request("critical", Priority.CRITICAL))
    await queue.enqueue("q", request("normal-2"))
    await queue.enqueue("q", request("high", Priority.HIGH))

    assert await drain(queue) == ["critical", "high", "normal-1", "normal-2", "low"]


async def test_aging_promotes_a_waiting_request_one_level_per_interval(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = [1000.0]
    monkeypatch.setattr("agentensemble.network._queues.time.monotonic", lambda: clock[0])
    queue = RequestQueue.priority(aging=AgingPolicy.every(timedelta(seconds=10)))
    await queue.enqueue("q", request("old-low", Priority.LOW))
    clock[0] += 25  # two levels: LOW -> HIGH ... but not above CRITICAL
    await queue.enqueue("q", request("new-normal"))
    await queue.enqueue("q", request("new-critical", Priority.CRITICAL))

    assert await drain(queue) == ["new-critical", "old-low", "new-normal"]


async def test_a_full_priority_queue_refuses_more() -> None:
    queue = RequestQueue.priority(max_capacity=2)
    await queue.enqueue("q", request("a"))
    await queue.enqueue("q", request("b"))

    with pytest.raises(QueueFullError, match="max_capacity=2"):
        await queue.enqueue("q", request("c"))
    assert await drain(queue) == ["a", "b"]


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: AgingPolicy.every(timedelta(0)), "promotion_interval must be positive"),
        (lambda: PriorityQueue(max_capacity=0), "max_capacity must be > 0"),
        (lambda: PriorityQueue(aging="fast"), "aging must be an AgingPolicy"),  # type: ignore[arg-type]
    ],
)
def test_bad_queue_settings_are_refused(make: object, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        make()  # type: ignore[operator]


async def test_the_store_keeps_the_first_response_of_an_id() -> None:
    store = ResultStore.in_memory()

    assert await store.store(done("a", "first"))
    assert not await store.store(done("a", "second"))
    assert await store.retrieve("a") == done("a", "first")


async def test_an_expired_response_is_gone() -> None:
    store = ResultStore.in_memory()
    await store.store(done("a"), ttl=timedelta(0))

    assert await store.retrieve("a") is None
    assert await store.store(done("a", "again"))


async def test_subscribe_fires_once_now_or_when_stored() -> None:
    store = ResultStore.in_memory()
    assert hasattr(store, "subscribe")
    seen: list[str | None] = []
    store.subscribe("a", lambda response: seen.append(response.result))
    await store.store(done("a", "later"))
    await store.store(done("a", "ignored"))
    store.subscribe("a", lambda response: seen.append(response.result))

    assert seen == ["later", "later"]


async def test_wait_sees_a_response_stored_before_or_while_waiting() -> None:
    store = ResultStore.in_memory()
    await store.store(done("before"))
    waiting = asyncio.create_task(store.wait("during", 10))
    await asyncio.sleep(0)
    await store.store(done("during"))

    assert await store.wait("before", 0) == done("before")
    assert await waiting == done("during")
    assert await store.wait("never", 0.01) is None


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"heartbeat_ttl": timedelta(0)}, "heartbeat_ttl must be a positive timedelta"),
        ({"visibility_timeout": 300}, "visibility_timeout must be a positive timedelta"),
        ({"max_deliveries": 0}, "max_deliveries must be an int >= 1, got: 0"),
    ],
)
def test_bad_redis_queue_settings_are_refused_before_connecting(
    settings: dict[str, object], message: str
) -> None:
    with pytest.raises(ValidationError, match=message):
        RequestQueue.redis("redis://127.0.0.1:1/0", **settings)  # type: ignore[arg-type]
