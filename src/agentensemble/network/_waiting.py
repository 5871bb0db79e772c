"""Waking coroutines of any event loop from any thread: the in-process queue and store are
shared by a serving ensemble (often on its own thread and loop) and its callers."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from typing import TypeVar

__all__ = ["Waiters"]

T = TypeVar("T")


class Waiters:
    """Coroutines waiting for something a lock guards.

    `wait_for(take, timeout)` calls `take` under the lock until it returns something; a
    `wake_all` from any thread makes every waiter try again. Waking all (rather than one)
    means a waiter that timed out or was cancelled can never swallow a wake-up.
    """

    def __init__(self, lock: threading.Lock) -> None:
        self._lock = lock
        self._waiting: set[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = set()

    async def wait_for(self, take: Callable[[], T | None], timeout: float) -> T | None:
        """What `take` returns once it is not None, or None after `timeout` seconds."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(timeout, 0.0)
        while True:
            with self._lock:
                taken = take()
                if taken is not None:
                    return taken
                waiter = (loop, loop.create_future())
                self._waiting.add(waiter)
            try:
                async with asyncio.timeout_at(deadline):
                    await waiter[1]
            except TimeoutError:
                return None
            finally:
                with self._lock:
                    self._waiting.discard(waiter)

    def wake_all(self) -> None:
        """Make every waiter try again; call it holding the lock, after the change."""
        waiting, self._waiting = self._waiting, set()
        for loop, future in waiting:
            # a loop closed since (on its own thread) has nobody left to wake
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(_resolve, future)


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
