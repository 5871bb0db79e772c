"""The in-process request queues: FIFO, and by priority with aging and a capacity."""

from __future__ import annotations

import threading
import time
from abc import abstractmethod
from collections import deque
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Self

from agentensemble._checks import require_int
from agentensemble.errors import AgentEnsembleError, ValidationError
from agentensemble.network._spi import Received, RequestQueue
from agentensemble.network._waiting import Waiters
from agentensemble.network._wire import Priority, WorkRequest

__all__ = ["AgingPolicy", "FifoQueue", "PriorityQueue", "QueueFullError"]


class QueueFullError(AgentEnsembleError):
    """A bounded queue refused a request: it holds `max_capacity` already."""


@dataclass(frozen=True, slots=True)
class AgingPolicy:
    """How a waiting request gains priority: one level per `promotion_interval` it waits
    (never above CRITICAL). `AgingPolicy.none()` never promotes."""

    promotion_interval: timedelta | None = None

    def __post_init__(self) -> None:
        interval = self.promotion_interval
        if interval is not None and (
            not isinstance(interval, timedelta) or interval <= timedelta(0)
        ):
            raise ValidationError(
                f"AgingPolicy promotion_interval must be positive, got: {interval!r}"
            )

    @classmethod
    def every(cls, interval: timedelta) -> Self:
        """Promote a waiting request one level each `interval`."""
        return cls(interval)

    @classmethod
    def none(cls) -> Self:
        """Never promote."""
        return cls(None)

    def effective_rank(self, rank: int, waited: float) -> int:
        """`rank` (0 = CRITICAL) after waiting `waited` seconds."""
        if self.promotion_interval is None:
            return rank
        return max(0, rank - int(waited // self.promotion_interval.total_seconds()))


class _InProcessQueue(RequestQueue):
    """What both in-process queues share: a lock, waiters, the requests taken and not yet
    acknowledged, and the ids accepted (queued or taken), which dedupe submissions."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiters = Waiters(self._lock)
        self._taken: dict[tuple[str, str], WorkRequest] = {}
        self._accepted: set[tuple[str, str]] = set()

    async def enqueue(self, queue: str, request: WorkRequest) -> bool:
        """Add `request`; False when its id is queued or taken already."""
        key = (queue, request.request_id)
        request = request.stamped(time.time())
        with self._lock:
            if key in self._accepted:
                return False
            self._put(queue, request)
            self._accepted.add(key)
            self._waiters.wake_all()
        return True

    async def dequeue(self, queue: str, timeout: float) -> Received | None:
        """The next request, waiting up to `timeout` seconds."""

        def take() -> WorkRequest | None:
            request = self._take(queue)
            if request is not None:
                self._taken[(queue, request.request_id)] = request
            return request

        return await self._waiters.wait_for(take, timeout)

    async def acknowledge(self, queue: str, request_id: str) -> None:
        """Forget a taken request: done."""
        with self._lock:
            self._taken.pop((queue, request_id), None)
            self._accepted.discard((queue, request_id))
            self._forget(queue, request_id)

    async def release(self, queue: str, request_id: str) -> None:
        """Put a taken request back at the front of its queue."""
        with self._lock:
            request = self._taken.pop((queue, request_id), None)
            if request is not None:
                self._put_back(queue, request)
                self._waiters.wake_all()

    @abstractmethod
    def _put(self, queue: str, request: WorkRequest) -> None:
        """Add a new request (the lock is held)."""

    @abstractmethod
    def _put_back(self, queue: str, request: WorkRequest) -> None:
        """Return a released request to the front (the lock is held)."""

    @abstractmethod
    def _take(self, queue: str) -> WorkRequest | None:
        """Remove and return the next request, if any (the lock is held)."""

    def _forget(self, queue: str, request_id: str) -> None:
        """Drop what was kept about a taken request once it is done (the lock is held)."""


class FifoQueue(_InProcessQueue):
    """Requests in the order they came, per queue name (`RequestQueue.in_memory()`)."""

    def __init__(self) -> None:
        super().__init__()
        self._queues: dict[str, deque[WorkRequest]] = {}

    def __repr__(self) -> str:
        return f"RequestQueue.in_memory() with {sum(map(len, self._queues.values()))} queued"

    def _put(self, queue: str, request: WorkRequest) -> None:
        self._queues.setdefault(queue, deque()).append(request)

    def _put_back(self, queue: str, request: WorkRequest) -> None:
        self._queues.setdefault(queue, deque()).appendleft(request)

    def _take(self, queue: str) -> WorkRequest | None:
        waiting = self._queues.get(queue)
        return waiting.popleft() if waiting else None


@dataclass(slots=True)
class _Buckets:
    """One queue of `PriorityQueue`: a FIFO per priority, entries stamped when enqueued."""

    by_rank: tuple[deque[tuple[float, WorkRequest]], ...] = field(
        default_factory=lambda: tuple(deque() for _ in Priority)
    )

    def __len__(self) -> int:
        return sum(map(len, self.by_rank))


class PriorityQueue(_InProcessQueue):
    """CRITICAL before HIGH before NORMAL before LOW, oldest first among equals, with aging
    and an optional capacity (`RequestQueue.priority()`)."""

    def __init__(
        self, *, aging: AgingPolicy | None = None, max_capacity: int | None = None
    ) -> None:
        super().__init__()
        if aging is not None and not isinstance(aging, AgingPolicy):
            raise ValidationError(
                f"RequestQueue.priority aging must be an AgingPolicy, got: {aging!r}"
            )
        if max_capacity is not None and require_int(max_capacity, "max_capacity") <= 0:
            raise ValidationError(
                f"RequestQueue.priority max_capacity must be > 0, got: {max_capacity!r}"
            )
        self.aging = aging or AgingPolicy.none()
        self.max_capacity = max_capacity
        self._queues: dict[str, _Buckets] = {}
        self._stamps: dict[tuple[str, str], float] = {}
        """When each taken request was first queued (a released one keeps its age)."""

    def __repr__(self) -> str:
        return f"RequestQueue.priority(aging={self.aging!r}, max_capacity={self.max_capacity})"

    def _put(self, queue: str, request: WorkRequest) -> None:
        buckets = self._queues.setdefault(queue, _Buckets())
        if self.max_capacity is not None and len(buckets) >= self.max_capacity:
            raise QueueFullError(
                f"Queue '{queue}' is full: it holds max_capacity={self.max_capacity} requests"
            )
        buckets.by_rank[request.priority.rank].append((time.monotonic(), request))

    def _put_back(self, queue: str, request: WorkRequest) -> None:
        buckets = self._queues.setdefault(queue, _Buckets())
        stamp = self._stamps.pop((queue, request.request_id), time.monotonic())
        buckets.by_rank[request.priority.rank].appendleft((stamp, request))  # its age kept

    def _take(self, queue: str) -> WorkRequest | None:
        buckets = self._queues.get(queue)
        if not buckets:
            return None
        now = time.monotonic()
        # The head of each bucket is its oldest entry, so the one aging raised the most.
        heads = [
            (self.aging.effective_rank(rank, now - waiting[0][0]), waiting[0][0], rank)
            for rank, waiting in enumerate(buckets.by_rank)
            if waiting
        ]
        _, _, rank = min(heads)
        stamp, request = buckets.by_rank[rank].popleft()
        self._stamps[(queue, request.request_id)] = stamp
        return request

    def _forget(self, queue: str, request_id: str) -> None:
        self._stamps.pop((queue, request_id), None)
