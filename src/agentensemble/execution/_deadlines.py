"""Deadlines of one task execution that stop running while a person decides.

A task's `timeout` and the tool batch limit bound the work of the engine and the model, not
the time a reviewer takes: while a review is waiting for its decision every deadline
registered here is suspended, and it resumes with the time it had left. The run's own
deadline (`RunOptions.timeout`) is never suspended. A delegated worker's deadlines chain to
its caller's, so a review inside the worker suspends the caller's task timeout too.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["Deadlines"]


class Deadlines:
    """The `asyncio.Timeout`s in force for one task execution (and its callers')."""

    __slots__ = ("_active", "_left", "_paused", "parent")

    def __init__(self, parent: Deadlines | None = None) -> None:
        self.parent = parent
        self._active: list[asyncio.Timeout] = []
        self._left: dict[asyncio.Timeout, float] = {}  # while paused: the time each had left
        self._paused = 0

    @contextmanager
    def registered(self, timeout: asyncio.Timeout) -> Iterator[None]:
        """Make `timeout` (entered, and exited after this block) suspendable."""
        self._active.append(timeout)
        if self._paused:
            self._suspend(timeout)
        try:
            yield
        finally:
            self._active.remove(timeout)
            self._left.pop(timeout, None)

    @contextmanager
    def paused(self) -> Iterator[None]:
        """Suspend every registered deadline (this task's and its callers') in the block."""
        chain = []
        node: Deadlines | None = self
        while node is not None:
            chain.append(node)
            node = node.parent
        for deadlines in chain:
            deadlines._pause()
        try:
            yield
        finally:
            for deadlines in chain:
                deadlines._resume()

    def _pause(self) -> None:
        self._paused += 1
        if self._paused == 1:
            for timeout in self._active:
                self._suspend(timeout)

    def _resume(self) -> None:
        self._paused -= 1
        if self._paused:
            return
        now = asyncio.get_running_loop().time()
        for timeout, left in self._left.items():
            if timeout in self._active:
                timeout.reschedule(now + left)
        self._left.clear()

    def _suspend(self, timeout: asyncio.Timeout) -> None:
        when = timeout.when()
        if when is None or timeout.expired():
            return
        self._left[timeout] = max(0.0, when - asyncio.get_running_loop().time())
        timeout.reschedule(None)
