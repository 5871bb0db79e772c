"""The one bridge from sync to async: run a coroutine to completion from sync code."""

from __future__ import annotations

from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["run_sync"]

T = TypeVar("T")

_WORKER_START_GRACE = 5.0
"""Seconds to wait, after Ctrl-C, for a worker that submit() was launching."""


def run_sync(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run `coroutine` on a fresh event loop and return its result.

    Works inside a running loop too (a notebook, an async framework): the work then runs on
    its own loop in a worker thread while this thread waits. Ctrl-C cancels only this work
    (`asyncio.run` does so in the first case; the worker's task is cancelled in the second).
    """
    import asyncio

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    return _run_in_worker(coroutine)


def _run_in_worker(coroutine: Coroutine[Any, Any, T]) -> T:
    import asyncio
    import concurrent.futures
    import contextlib
    import threading

    started, finished = threading.Event(), threading.Event()
    handles: list[tuple[asyncio.AbstractEventLoop, asyncio.Task[T]]] = []

    def work() -> T:
        try:
            with asyncio.Runner() as runner:
                loop = runner.get_loop()
                task = loop.create_task(coroutine)
                handles.append((loop, task))
                started.set()
                return loop.run_until_complete(task)
        finally:
            finished.set()

    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="agentensemble") as pool:
        try:
            return pool.submit(work).result()
        except KeyboardInterrupt:
            # Ctrl-C may land while submit() is still starting the worker thread: the work is
            # then queued or running already, and starts within moments.
            if started.wait(timeout=_WORKER_START_GRACE):
                loop, task = handles[0]
                with contextlib.suppress(RuntimeError):  # the loop already finished
                    loop.call_soon_threadsafe(task.cancel)
                finished.wait()  # the pool may not know this thread yet, so it won't join it
            raise
