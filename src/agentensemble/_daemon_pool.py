"""`DaemonPool`: a bounded executor of daemon threads for sync user code."""

from __future__ import annotations

import collections
import concurrent.futures
import functools
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

    def __init__(self, max_workers: int, name: str) -> None:
        self._max_workers = max_workers
        self._name = name
        self._work: collections.deque[tuple[concurrent.futures.Future[Any], Any]] = (
            collections.deque()
        )
        self._ready = threading.Condition()
        self._threads = 0
        self._idle = 0
        """Threads waiting for work (counted under `_ready`, so exactly)."""
        self._closed = False

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
                name = f"{self._name}-{self._threads}"
                threading.Thread(target=self._serve, name=name, daemon=True).start()
        return future

    def _serve(self) -> None:
        while True:
            with self._ready:
                while not self._work and not self._closed:
                    self._idle += 1
                    self._ready.wait()
                    self._idle -= 1
                if not self._work:  # closed, and nothing left
                    self._threads -= 1
                    return
                future, call = self._work.popleft()
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(call())
            except BaseException as error:  # reported to the caller, as an executor does
                future.set_exception(error)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Stop taking work; idle threads end, busy ones after their call (never joined:
        they are daemons)."""
        with self._ready:
            self._closed = True
            if cancel_futures:
                while self._work:
                    self._work.popleft()[0].cancel()
            self._ready.notify_all()
