"""Calling user code that may be sync or async, without ever blocking the event loop.

Sync user code (tools, listeners, handlers, exporters) runs in the current run's own thread
pool (`sync_pool`), bounded by the ensemble's `max_sync_threads` and shut down when the run
ends; outside a run it uses the loop's default executor. Context variables are copied in.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import inspect
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from concurrent.futures import Future

    from agentensemble._daemon_pool import DaemonPool

__all__ = ["NOTHING", "call_user_code", "start_daemon_call", "sync_pool"]


class _Nothing(contextlib.AbstractAsyncContextManager[None]):
    """An async context manager that does nothing (cheaper than a generator-based one)."""

    async def __aexit__(self, *exc: object) -> None:
        return None


NOTHING = _Nothing()
"""Use where a context manager is optional and absent."""


class _Pool:
    """A run's threads for sync user code, started on first use."""

    def __init__(self, max_workers: int) -> None:
        self.max_workers = max_workers
        self._executor: DaemonPool | None = None

    def executor(self) -> DaemonPool:
        if self._executor is None:
            from agentensemble._daemon_pool import DaemonPool  # threads load on first use

            self._executor = DaemonPool(self.max_workers, "agentensemble-sync")
        return self._executor

    def shutdown(self) -> None:
        """Idle threads end now; a call still running (past its deadline) ends on its own."""
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)


_current: contextvars.ContextVar[_Pool | None] = contextvars.ContextVar(
    "agentensemble_sync_pool", default=None
)


@contextlib.contextmanager
def sync_pool(max_workers: int) -> Iterator[None]:
    """Run sync user code called in this block on a pool of at most `max_workers` threads."""
    pool = _Pool(max_workers)
    token = _current.set(pool)
    try:
        yield
    finally:
        _current.reset(token)
        pool.shutdown()


async def call_user_code(
    function: Callable[..., Any], /, *args: Any, is_async: bool | None = None, **kwargs: Any
) -> Any:
    """Await `function` if it is a coroutine function; otherwise run it in a worker thread.

    Either way, an awaitable it returns is awaited too. `is_async` skips the inspection when
    the caller already knows (hot paths cache it).
    """
    if is_async is None:
        is_async = inspect.iscoroutinefunction(function)
    if is_async:
        return await function(*args, **kwargs)
    import asyncio

    pool = _current.get()
    call = functools.partial(contextvars.copy_context().run, function, *args, **kwargs)
    executor = pool.executor() if pool is not None else None
    result = await asyncio.get_running_loop().run_in_executor(executor, call)
    if inspect.isawaitable(result):
        result = await result
    return result


def start_daemon_call(function: Callable[..., Any], /, *args: Any) -> Future[Any]:
    """Run `function` in a daemon thread of its own and return its future at once.

    For sync code that may block for as long as a person takes (a review handler reading
    input): abandoning the future (a timeout, a cancelled run) leaves the thread to finish
    on its own, without holding a pool slot or the interpreter's exit.
    """
    import threading
    from concurrent.futures import Future

    future: Future[Any] = Future()
    future.set_running_or_notify_cancel()  # running: cancelling a waiter never cancels it
    call = functools.partial(contextvars.copy_context().run, function, *args)

    def run() -> None:
        try:
            future.set_result(call())
        except BaseException as error:  # delivered to whoever still waits
            future.set_exception(error)

    threading.Thread(target=run, name="agentensemble-review", daemon=True).start()
    return future
