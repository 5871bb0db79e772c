"""The in-process result store: responses kept for a time, written once."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import timedelta

from agentensemble.network._spi import RESULT_TTL, ResultStore
from agentensemble.network._waiting import Waiters
from agentensemble.network._wire import WorkResponse

__all__ = ["InMemoryResultStore"]


class InMemoryResultStore(ResultStore):
    """Responses in this process (`ResultStore.in_memory()`); an expired one is removed
    when it is next looked up."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiters = Waiters(self._lock)
        self._stored: dict[str, tuple[WorkResponse, float]] = {}
        self._subscribers: dict[str, list[Callable[[WorkResponse], None]]] = {}

    def __repr__(self) -> str:
        return f"ResultStore.in_memory() with {len(self._stored)} results"

    async def store(self, response: WorkResponse, ttl: timedelta = RESULT_TTL) -> bool:
        """Keep `response` for `ttl` unless one is kept for its id already."""
        request_id = response.request_id
        with self._lock:
            if self._current(request_id) is not None:
                return False
            self._stored[request_id] = (response, time.monotonic() + ttl.total_seconds())
            callbacks = self._subscribers.pop(request_id, [])
            self._waiters.wake_all()
        for callback in callbacks:
            callback(response)
        return True

    async def retrieve(self, request_id: str) -> WorkResponse | None:
        """The kept response, if any."""
        with self._lock:
            return self._current(request_id)

    async def wait(self, request_id: str, timeout: float) -> WorkResponse | None:
        """The response, waiting up to `timeout` seconds for it."""
        return await self._waiters.wait_for(lambda: self._current(request_id), timeout)

    def subscribe(self, request_id: str, callback: Callable[[WorkResponse], None]) -> None:
        """Call `callback` once with the response: now if it is kept, else when stored."""
        with self._lock:
            response = self._current(request_id)
            if response is None:
                self._subscribers.setdefault(request_id, []).append(callback)
                return
        callback(response)

    def _current(self, request_id: str) -> WorkResponse | None:
        kept = self._stored.get(request_id)
        if kept is None:
            return None
        response, expires = kept
        if time.monotonic() >= expires:
            del self._stored[request_id]
            return None
        return response
