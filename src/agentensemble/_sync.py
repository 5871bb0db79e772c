"""The one bridge from sync to async: run a coroutine to completion from sync code."""

from __future__ import annotations

from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["run_sync"]

T = TypeVar("T")


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

    started = threading.Event()
    handles: list[tuple[asyncio.AbstractEventLoop, asyncio.Task[T]]] = []

    def work() -> T:
        with asyncio.Runner() as runner:
            loop = runner.get_loop()
            task = loop.create_task(coroutine)
            handles.append((loop, task))
            started.set()
            return loop.run_until_complete(task)

    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="agentensemble") as pool:
        future = pool.submit(work)
        try:
            return future.result()
        except KeyboardInterrupt:
            started.wait()
            loop, task = handles[0]
            with contextlib.suppress(RuntimeError):  # the loop already finished and closed
                loop.call_soon_threadsafe(task.cancel)
            raise
