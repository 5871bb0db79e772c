"""`DaemonPool`: a bounded executor of daemon threads for sync user code."""

from __future__ import annotations

import collections
import concurrent.futures
import functools
import itertools
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["DaemonPool"]


class DaemonPool(concurrent.futures.Executor):
    """At most `max_workers` daemon threads, started as work arrives.

    Unlike `ThreadPoolExecutor`, whose threads the interpreter joins at exit, a sync tool
    or callback stuck in a long call (a sleep, a socket without a timeout) never holds the
    process after Ctrl-C has ended the run: the program exits at once.
    """

    def __init__(self, max_workers: int, name: str, *, idle_timeout: float | None = None) -> None:
        """`idle_timeout`: seconds a thread waits for work before it ends (None: until
        `shutdown`)."""
        self._max_workers = max_workers
        self._idle_timeout = idle_timeout
        self._name = name
        self._work: collections.deque[tuple[concurrent.futures.Future[Any], Any]] = (
            collections.deque()
        )
        self._ready = threading.Condition()
        self._threads = 0
        self._idle = 0
        """Threads waiting for work (counted under `_ready`, so exactly)."""
        self._closed = False
        self._numbers = itertools.count(1)

    def submit(
        self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any
    ) -> concurrent.futures.Future[Any]:
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        with self._ready:
            if self._closed:
                raise RuntimeError("cannot schedule new work after shutdown")
            self._work.append((future, functools.partial(fn, *args, **kwargs)))
            if self._idle >= len(self._work):  # a waiting thread takes it
                self._ready.notify()
            elif self._threads < self._max_workers:
                self._threads += 1
                name = f"{self._name}-{next(self._numbers)}"
                threading.Thread(target=self._serve, name=name, daemon=True).start()
        return future

    @property
    def max_workers(self) -> int:
        """The most threads at once; lowering it retires threads as they become idle."""
        return self._max_workers

    @max_workers.setter
    def max_workers(self, value: int) -> None:
        with self._ready:
            self._max_workers = value
            self._ready.notify_all()

    @property
    def threads(self) -> int:
        """Threads alive now (busy or idle)."""
        return self._threads

    def _serve(self) -> None:
        while True:
            with self._ready:
                while not self._work and not self._closed and not self._surplus():
                    self._idle += 1
                    woken = self._ready.wait(self._idle_timeout)
                    self._idle -= 1
                    if not woken and not self._work:
                        break  # idle too long
                if not self._work or self._surplus():  # closed, idle or over the limit
                    self._threads -= 1
                    if self._work:
                        self._ready.notify()  # the wake-up this thread took goes on
                    return
                future, call = self._work.popleft()
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(call())
            except BaseException as error:  # reported to the caller, as an executor does
                future.set_exception(error)

    def _surplus(self) -> bool:
        return self._threads > self._max_workers

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Stop taking work; idle threads end, busy ones after their call (never joined:
        they are daemons)."""
        with self._ready:
            self._closed = True
            if cancel_futures:
                while self._work:
                    self._work.popleft()[0].cancel()
            self._ready.notify_all()
