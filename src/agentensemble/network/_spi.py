"""The transport SPI of BEHAVIOUR 18.2: `RequestQueue`, `ResultStore` and `Transport`.

Every method is async: a queue or store may be a network service. Implementations live in
their own modules and load when a factory is first called.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Self

from agentensemble.network._wire import WorkRequest, WorkResponse

if TYPE_CHECKING:
    from agentensemble.network._queues import AgingPolicy

__all__ = ["RESULT_TTL", "BadRequest", "Received", "RequestQueue", "ResultStore", "Transport"]

RESULT_TTL = timedelta(hours=1)
"""How long a delivered result is kept (the reference's 1 hour)."""


@dataclass(frozen=True, slots=True)
class BadRequest:
    """An entry taken from a queue that is not a valid `WorkRequest` (malformed JSON, a
    missing field): it is answered with a FAILED response naming what was wrong."""

    request_id: str
    """The entry's ``requestId`` when it had one, else the queue's id of the entry."""
    error: str


Received = WorkRequest | BadRequest


class RequestQueue(ABC):
    """Named queues of requests. A dequeued request stays owned by its taker until it is
    acknowledged (done) or released (handed back for another taker)."""

    @abstractmethod
    async def enqueue(self, queue: str, request: WorkRequest) -> bool:
        """Add `request` to `queue`. False when a request with the same id was already
        accepted (it is not added again: one id, one execution)."""

    @abstractmethod
    async def dequeue(self, queue: str, timeout: float) -> Received | None:
        """The next request of `queue`, waiting up to `timeout` seconds for one (None when
        none came)."""

    async def dequeue_many(self, queue: str, count: int, timeout: float) -> list[Received]:
        """Up to `count` requests of `queue` at once, waiting up to `timeout` seconds for
        the first (the default takes one; a network queue takes several per round trip)."""
        received = await self.dequeue(queue, timeout)
        return [] if received is None else [received]

    @abstractmethod
    async def acknowledge(self, queue: str, request_id: str) -> None:
        """Mark a dequeued request done: it is never handed out again."""

    async def release(self, queue: str, request_id: str) -> None:  # noqa: B027
        """Hand a dequeued, unfinished request back so that another taker gets it at once
        (a worker that drains calls this for what it could not finish). Queues that
        cannot hand work back leave it to their reclaim."""

    async def aclose(self) -> None:  # noqa: B027
        """Release connections and threads (the default has none)."""

    @staticmethod
    def in_memory() -> RequestQueue:
        """FIFO queues in this process (for development and tests)."""
        from agentensemble.network._queues import FifoQueue

        return FifoQueue()

    @staticmethod
    def priority(aging: AgingPolicy | None = None, max_capacity: int | None = None) -> RequestQueue:
        """In-process queues that hand out CRITICAL before HIGH before NORMAL before LOW,
        oldest first within a priority; `aging` promotes a waiting request one level per
        interval; a queue holding `max_capacity` requests refuses more (`QueueFullError`)."""
        from agentensemble.network._queues import PriorityQueue

        return PriorityQueue(aging=aging, max_capacity=max_capacity)

    @staticmethod
    def redis(
        url: str,
        *,
        heartbeat_ttl: timedelta = timedelta(seconds=3),
        visibility_timeout: timedelta = timedelta(minutes=5),
        max_deliveries: int = 3,
    ) -> RequestQueue:
        """Durable queues on Redis Streams (extra ``redis``): one stream per priority per
        queue, read by a consumer group. A request whose taker's heartbeat is gone for
        `heartbeat_ttl` is taken by another worker; one pending for `visibility_timeout`
        is taken too (a backstop); one delivered `max_deliveries` times is dead-lettered
        with a FAILED result."""
        from agentensemble.network._redis_queue import RedisRequestQueue

        return RedisRequestQueue(
            url,
            heartbeat_ttl=heartbeat_ttl,
            visibility_timeout=visibility_timeout,
            max_deliveries=max_deliveries,
        )


class ResultStore(ABC):
    """Responses by request id, each written once and kept for a time."""

    @abstractmethod
    async def store(self, response: WorkResponse, ttl: timedelta = RESULT_TTL) -> bool:
        """Keep `response` for `ttl`. Only the first write of an id is kept: False when a
        response was already stored (this one is dropped)."""

    @abstractmethod
    async def retrieve(self, request_id: str) -> WorkResponse | None:
        """The stored response (None when none is stored, or it expired)."""

    @abstractmethod
    async def wait(self, request_id: str, timeout: float) -> WorkResponse | None:
        """The response, waiting up to `timeout` seconds for it to be stored (None when it
        was not). A response stored at any time before the timeout is seen: never a lost
        notification."""

    async def aclose(self) -> None:  # noqa: B027
        """Release connections (the default has none)."""

    @staticmethod
    def in_memory() -> ResultStore:
        """Responses in this process's memory."""
        from agentensemble.network._results import InMemoryResultStore

        return InMemoryResultStore()

    @staticmethod
    def redis(url: str) -> ResultStore:
        """Responses in Redis (extra ``redis``): written with ``SET NX``, announced on a
        channel by the write that won."""
        from agentensemble.network._redis_results import RedisResultStore

        return RedisResultStore(url)


class Transport(ABC):
    """How requests reach an ensemble and responses reach callers.

    `name` is the ensemble's queue: a serving ensemble receives from it, and `send` puts a
    request on it (or on the queue `to` names).
    """

    name: str

    @abstractmethod
    async def send(self, request: WorkRequest, *, to: str | None = None) -> bool:
        """Queue `request` for the ensemble `to` (this transport's own by default). False
        when its id was already accepted: the caller then shares the first one's result."""

    @abstractmethod
    async def receive(self, timeout: float) -> Received | None:
        """The next request for this ensemble, waiting up to `timeout` seconds."""

    async def receive_many(self, count: int, timeout: float) -> list[Received]:
        """Up to `count` requests at once (a worker asks for as many as it has free slots),
        waiting up to `timeout` seconds for the first; the default takes one."""
        received = await self.receive(timeout)
        return [] if received is None else [received]

    @abstractmethod
    async def deliver(self, response: WorkResponse) -> bool:
        """Record the response of a received request and mark the request done. False when
        a response was already recorded for its id (this one is dropped)."""

    @abstractmethod
    async def result(self, request_id: str, timeout: float) -> WorkResponse | None:
        """The response to `request_id`, waiting up to `timeout` seconds."""

    async def release(self, request_id: str) -> None:  # noqa: B027
        """Hand an unfinished received request back for another worker."""

    async def record_events(self, request_id: str, events: Sequence[Mapping[str, Any]]) -> None:  # noqa: B027
        """Append wire events (`serialize_event`) of the run answering `request_id` to its
        event log, kept as long as results are (a transport without one keeps nothing)."""

    async def read_events(
        self, request_id: str, cursor: str | None, timeout: float
    ) -> tuple[list[dict[str, Any]], str | None]:
        """The events logged for `request_id` after `cursor` (None: from the start), waiting
        up to `timeout` seconds for one when there is none yet, and the cursor after them (a
        transport without a log has none). After a worker's death the log holds what its
        attempt sent, then the next attempt's events (``seq`` starts again at 1)."""
        return [], cursor

    async def cached(self, cache_key: str) -> WorkResponse | None:
        """The response cached under `cache_key` (see `cache`); None when there is none
        (a transport without a cache never has one)."""
        return None

    async def cache(self, cache_key: str, response: WorkResponse, ttl: timedelta) -> None:  # noqa: B027
        """Keep `response` for `ttl` as the answer to requests with `cache_key` and
        ``cachePolicy: USE_CACHED`` (a transport without a cache keeps nothing)."""

    async def aclose(self) -> None:  # noqa: B027
        """Close what the transport opened."""

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    @staticmethod
    def websocket(name: str = "default") -> Transport:
        """The in-process transport: an in-memory queue and result store."""
        return Transport.durable(name, RequestQueue.in_memory(), ResultStore.in_memory())

    @staticmethod
    def durable(name: str, queue: RequestQueue, store: ResultStore) -> Transport:
        """A transport over any queue and store."""
        from agentensemble.network._transport import QueueTransport

        return QueueTransport(name, queue, store)

    @staticmethod
    def redis(
        name: str,
        url: str,
        *,
        heartbeat_ttl: timedelta = timedelta(seconds=3),
        visibility_timeout: timedelta = timedelta(minutes=5),
        max_deliveries: int = 3,
    ) -> Transport:
        """Both parts on one Redis: `RequestQueue.redis` and `ResultStore.redis` (a response
        is stored and its request acknowledged by one script)."""
        from agentensemble.network._redis_queue import RedisRequestQueue
        from agentensemble.network._redis_results import RedisResultStore
        from agentensemble.network._transport import RedisTransport

        queue = RedisRequestQueue(
            url,
            heartbeat_ttl=heartbeat_ttl,
            visibility_timeout=visibility_timeout,
            max_deliveries=max_deliveries,
        )
        return RedisTransport(name, queue, RedisResultStore(url))
