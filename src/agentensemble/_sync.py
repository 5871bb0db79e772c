"""The one bridge from sync to async: run a coroutine to completion from sync code."""

from __future__ import annotations

from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["run_sync"]

T = TypeVar("T")


def run_sync(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run `coroutine` on a fresh event loop and return its result.

    Works inside a running loop too (a notebook, an async framework): the work then runs on
    its own loop in a worker thread while this thread waits. Ctrl-C cancels only this work.
    """
    import asyncio
    import concurrent.futures

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="agentensemble") as pool:
        return pool.submit(asyncio.run, coroutine).result()
