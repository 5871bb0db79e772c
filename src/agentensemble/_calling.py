"""Calling user code that may be sync or async, without ever blocking the event loop.

Sync user code (tools, listeners, handlers, exporters) runs on the process's pool of sync
threads: at most `agentensemble.limit_sync_threads` (64 by default) across every run, each
run holding at most its ensemble's `max_sync_threads` of them (`sync_pool`). Threads start
as work arrives and end after a while idle. Outside a run it uses the loop's default executor.
Context variables are copied in.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import inspect
from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    import asyncio
    import types
    from concurrent.futures import Future

    from typing_extensions import TypeIs  # in typing from Python 3.13

    from agentensemble._daemon_pool import DaemonPool

__all__ = [
    "DEFAULT_SYNC_THREAD_LIMIT",
    "NOTHING",
    "call_user_code",
    "finish_even_if_cancelled",
    "import_off_loop",
    "is_awaitable",
    "set_sync_thread_limit",
    "start_daemon_call",
    "sync_pool",
    "sync_threads",
]


class _Nothing(contextlib.AbstractAsyncContextManager[None]):
    """An async context manager that does nothing (cheaper than a generator-based one)."""

    async def __aexit__(self, *exc: object) -> None:
        return None


NOTHING = _Nothing()
"""Use where a context manager is optional and absent."""


DEFAULT_SYNC_THREAD_LIMIT = 64
_IDLE_SECONDS = 30.0
"""How long an idle sync thread waits for work before it ends."""


class _Shared:
    """The process's sync threads: one `DaemonPool`, made on first use (and again in a
    forked child, which inherits none of its parent's threads)."""

    limit = DEFAULT_SYNC_THREAD_LIMIT
    pool: DaemonPool | None = None
    forks_watched = False

    @classmethod
    def executor(cls) -> DaemonPool:
        if cls.pool is None:
            import os

            from agentensemble._daemon_pool import DaemonPool  # threads load on first use

            if not cls.forks_watched:
                os.register_at_fork(after_in_child=cls.forget)
                cls.forks_watched = True
            cls.pool = DaemonPool(cls.limit, "agentensemble-sync", idle_timeout=_IDLE_SECONDS)
        return cls.pool

    @classmethod
    def forget(cls) -> None:
        cls.pool = None


def set_sync_thread_limit(limit: int) -> None:
    """See `agentensemble.limit_sync_threads` (which checks `limit`)."""
    _Shared.limit = limit
    if _Shared.pool is not None:
        _Shared.pool.max_workers = limit


def sync_threads() -> int:
    """Sync threads alive in this process now (busy or idle)."""
    return _Shared.pool.threads if _Shared.pool is not None else 0


class _Pool:
    """A run's share of the process's sync threads: at most `max_workers` calls at once
    (the semaphore made by the run's first sync call: most runs make none)."""

    __slots__ = ("_max_workers", "_slots")

    def __init__(self, max_workers: int) -> None:
        self._max_workers = max_workers
        self._slots: asyncio.Semaphore | None = None

    @property
    def slots(self) -> asyncio.Semaphore:
        if self._slots is None:
            import asyncio

            self._slots = asyncio.Semaphore(self._max_workers)
        return self._slots


_current: contextvars.ContextVar[_Pool | None] = contextvars.ContextVar(
    "agentensemble_sync_pool", default=None
)


def sync_pool(max_workers: int) -> _PoolScope:
    """Sync user code called in this block (``with sync_pool(n):``) runs at most
    `max_workers` calls at once, on the process's sync threads."""
    return _PoolScope(max_workers)


class _PoolScope:
    """The block of `sync_pool` (a plain class: every run enters one)."""

    __slots__ = ("_max_workers", "_token")

    def __init__(self, max_workers: int) -> None:
        self._max_workers = max_workers

    def __enter__(self) -> None:
        self._token = _current.set(_Pool(self._max_workers))

    def __exit__(self, *exc: object) -> None:
        _current.reset(self._token)


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
    if pool is None:
        result = await asyncio.get_running_loop().run_in_executor(None, call)
    else:
        async with pool.slots:
            result = await asyncio.get_running_loop().run_in_executor(_Shared.executor(), call)
    if is_awaitable(result):
        result = await result
    return result


_NEVER_AWAITABLE = frozenset({str, bool, int, float, bytes})


def is_awaitable(value: object) -> TypeIs[Awaitable[Any]]:
    """`inspect.isawaitable`, answered at once for None, text, numbers and booleans, what
    sync callables mostly return: for them inspect falls back to an abstract-base-class
    check that costs about 0.4 µs (a sync listener's whole call costs about 1 µs)."""
    if value is None or type(value) in _NEVER_AWAITABLE:
        return False
    return inspect.isawaitable(value)


def start_daemon_call(
    function: Callable[..., Any], /, *args: Any, name: str = "agentensemble-review"
) -> Future[Any]:
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

    threading.Thread(target=run, name=name, daemon=True).start()
    return future


async def finish_even_if_cancelled(
    work: Coroutine[Any, Any, None],
) -> asyncio.CancelledError | None:
    """Finish `work` (reporting a run's end) even when the run is cancelled meanwhile, and
    return the cancellation for the caller to raise once every report is done: a cancelled
    run still reports what it completed."""
    import asyncio

    task = asyncio.create_task(work)
    cancelled: asyncio.CancelledError | None = None
    while not task.done():
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError as error:
            cancelled = error
    return cancelled


async def import_off_loop(name: str) -> types.ModuleType:
    """The module `name`, imported on a thread of its own the first time (a first run
    imports the engine and a model SDK: a few hundred milliseconds the event loop would
    otherwise stand still for, in a web server every request waits)."""
    import importlib
    import sys

    module = sys.modules.get(name)
    if module is not None:
        return module
    import asyncio

    imported = await asyncio.wrap_future(
        start_daemon_call(importlib.import_module, name, name="agentensemble-import")
    )
    return cast("types.ModuleType", imported)
