"""`QueueTransport`: a transport over any `RequestQueue` and `ResultStore`."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from agentensemble._checks import require_text
from agentensemble.network._spi import Received, RequestQueue, ResultStore, Transport
from agentensemble.network._waiting import Waiters
from agentensemble.network._wire import WorkRequest, WorkResponse

if TYPE_CHECKING:
    from agentensemble.network._redis_queue import RedisRequestQueue
    from agentensemble.network._redis_results import RedisResultStore

__all__ = ["QueueTransport", "RedisTransport"]

_KEPT_LOGS = 1_000
"""Requests whose event logs an in-process transport keeps (the oldest go first)."""


class QueueTransport(Transport):
    """Requests go through `queue` (the queue named after the ensemble), responses through
    `store`. A response is stored before its request is acknowledged, so a crash between
    the two re-runs the request and the store keeps the first response: one result."""

    def __init__(self, name: str, queue: RequestQueue, store: ResultStore) -> None:
        self.name = require_text(name, "Transport name must not be blank")
        self.queue = queue
        self.store = store
        self._log = _EventLog()

    def __repr__(self) -> str:
        return f"Transport.durable({self.name!r}, {self.queue!r}, {self.store!r})"

    async def send(self, request: WorkRequest, *, to: str | None = None) -> bool:
        """Queue `request` unless its id was accepted already or has a result."""
        if await self.store.retrieve(request.request_id) is not None:
            return False
        return await self.queue.enqueue(to or self.name, request)

    async def receive(self, timeout: float) -> Received | None:
        """The next request of this ensemble."""
        return await self.queue.dequeue(self.name, timeout)

    async def receive_many(self, count: int, timeout: float) -> list[Received]:
        """Up to `count` requests of this ensemble at once."""
        return await self.queue.dequeue_many(self.name, count, timeout)

    async def deliver(self, response: WorkResponse) -> bool:
        """Store the response, then acknowledge its request."""
        stored = await self.store.store(response)
        await self.queue.acknowledge(self.name, response.request_id)
        return stored

    async def result(self, request_id: str, timeout: float) -> WorkResponse | None:
        """The response to `request_id`, waiting up to `timeout` seconds."""
        return await self.store.wait(request_id, timeout)

    async def release(self, request_id: str) -> None:
        """Hand an unfinished request back to the queue."""
        await self.queue.release(self.name, request_id)

    async def record_events(self, request_id: str, events: Sequence[Mapping[str, Any]]) -> None:
        """Keep the events in this process (the most recent requests' logs)."""
        self._log.append(request_id, events)

    async def read_events(
        self, request_id: str, cursor: str | None, timeout: float
    ) -> tuple[list[dict[str, Any]], str | None]:
        """The events after `cursor` (an index into this process's log)."""
        return await self._log.read(request_id, cursor, timeout)

    async def cached(self, cache_key: str) -> WorkResponse | None:
        """The response the store keeps for `cache_key` on this ensemble."""
        return await self.store.retrieve(self._cache_id(cache_key))

    async def cache(self, cache_key: str, response: WorkResponse, ttl: timedelta) -> None:
        """Keep `response` for `ttl` under `cache_key` (the first one kept stays until it
        expires: results are written once)."""
        await self.store.store(
            response.model_copy(update={"request_id": self._cache_id(cache_key)}), ttl
        )

    def _cache_id(self, cache_key: str) -> str:
        return f"cache:{self.name}:{cache_key}"

    async def aclose(self) -> None:
        """Close the queue and the store (the store even when the queue fails to close)."""
        try:
            await self.queue.aclose()
        finally:
            await self.store.aclose()


class _EventLog:
    """Event logs of the last `_KEPT_LOGS` requests, in this process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiters = Waiters(self._lock)
        self._logs: OrderedDict[str, list[dict[str, Any]]] = OrderedDict()

    def append(self, request_id: str, events: Sequence[Mapping[str, Any]]) -> None:
        with self._lock:
            log = self._logs.setdefault(request_id, [])
            self._logs.move_to_end(request_id)
            log.extend(dict(event) for event in events)
            while len(self._logs) > _KEPT_LOGS:
                self._logs.popitem(last=False)
            self._waiters.wake_all()

    async def read(
        self, request_id: str, cursor: str | None, timeout: float
    ) -> tuple[list[dict[str, Any]], str | None]:
        start = int(cursor or 0)

        def newer() -> list[dict[str, Any]] | None:
            events = self._logs.get(request_id, [])[start:]
            return events or None

        events = await self._waiters.wait_for(newer, timeout) or []
        return events, str(start + len(events))


class RedisTransport(QueueTransport):
    """`QueueTransport` on one Redis (`Transport.redis`): a response is stored and its
    request acknowledged by one script."""

    def __init__(self, name: str, queue: RedisRequestQueue, store: RedisResultStore) -> None:
        super().__init__(name, queue, store)
        self._redis_queue = queue

    def __repr__(self) -> str:
        return f"Transport.redis({self.name!r})"  # the URL may hold a password

    async def send(self, request: WorkRequest, *, to: str | None = None) -> bool:
        """Queue `request` unless its id was accepted in the last day (the enqueue script's
        dedupe record outlives every result, so no separate lookup of the result)."""
        return await self.queue.enqueue(to or self.name, request)

    async def deliver(self, response: WorkResponse) -> bool:
        """Store the response once and acknowledge its request, in one step."""
        return await self._redis_queue.answer(self.name, response)

    async def record_events(self, request_id: str, events: Sequence[Mapping[str, Any]]) -> None:
        """Append the events to the request's stream (kept as long as its result)."""
        await self._redis_queue.record_events(request_id, events)

    async def read_events(
        self, request_id: str, cursor: str | None, timeout: float
    ) -> tuple[list[dict[str, Any]], str | None]:
        """The events after `cursor` (a stream entry id), blocking up to `timeout`."""
        return await self._redis_queue.read_events(request_id, cursor, timeout)
