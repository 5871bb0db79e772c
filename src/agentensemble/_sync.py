"""The one bridge from sync to async: run a coroutine to completion from sync code.

Every sync call runs on one long-lived event loop in a background thread (started on first
use, stopped at interpreter exit), as other async libraries do. Model clients bound to an
event loop (the OpenAI SDK's, LangChain's httpx clients) therefore keep working across
calls and threads, and nothing is opened again for each call: file descriptors and threads
stay flat over thousands of calls. The caller's context variables (OpenTelemetry's current
span, logging context) are copied into the call. Ctrl-C while a call waits cancels only
that call's work, then raises `KeyboardInterrupt`.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Coroutine, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:  # asyncio and its friends load on the first sync call, not on import
    import asyncio
    import concurrent.futures

__all__ = ["background_loop", "run_sync"]

T = TypeVar("T")

_CANCEL_GRACE = 30.0
"""Seconds to wait, after Ctrl-C, for the cancelled work to finish cleaning up."""


class _LoopThread:
    """An event loop running forever in a daemon thread."""

    def __init__(self) -> None:
        import asyncio

        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._serve, name="agentensemble-loop", daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        import asyncio

        asyncio.set_event_loop(self.loop)
        while True:
            try:
                self.loop.run_forever()
            except (KeyboardInterrupt, SystemExit):
                # Raised by user code (sys.exit() in a sync tool, say): asyncio re-raises it
                # out of the loop after failing the task, so serve on and let that failure
                # reach the caller waiting in run_sync instead of leaving it waiting forever.
                continue
            return

    def stop(self) -> None:
        """Close what is bound to the loop (async generators: model clients), then the loop."""
        import asyncio
        import concurrent.futures

        if self.loop.is_closed():
            return
        with contextlib.suppress(RuntimeError, concurrent.futures.TimeoutError):
            asyncio.run_coroutine_threadsafe(self.loop.shutdown_asyncgens(), self.loop).result(5)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)
        if not self.thread.is_alive():
            self.loop.close()


_lock = threading.Lock()
_background: _LoopThread | None = None


def background_loop() -> asyncio.AbstractEventLoop:
    """The long-lived loop that sync calls run on (started on first use)."""
    global _background
    with _lock:
        if _background is None:
            import atexit

            _background = _LoopThread()
            atexit.register(_background.stop)
        return _background.loop


def _forget_after_fork() -> None:
    global _background, _lock
    _background, _lock = None, threading.Lock()  # the thread did not survive the fork


os.register_at_fork(after_in_child=_forget_after_fork)


def run_sync(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run `coroutine` to completion and return its result; callable from any sync code,
    including code called from inside a running event loop (a notebook, a web framework)."""
    import asyncio

    try:
        running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    loop = background_loop()
    if running is loop:  # sync code on the background loop itself must not block it
        return _run_on_own_thread(coroutine)
    return _run_on(loop, coroutine)


def _run_on(loop: asyncio.AbstractEventLoop, coroutine: Coroutine[Any, Any, T]) -> T:
    import concurrent.futures
    import contextvars

    context = contextvars.copy_context()
    result: concurrent.futures.Future[T] = concurrent.futures.Future()
    started: list[asyncio.Task[T]] = []

    def start() -> None:
        task = loop.create_task(coroutine, context=context)
        started.append(task)
        task.add_done_callback(lambda done: _settle(result, done))

    def cancel() -> None:
        # Queued after `start` (the loop runs callbacks in order), so either the work has
        # started and is cancelled, or it was never scheduled and is dropped here.
        if started:
            started[0].cancel()
        else:
            coroutine.close()
            result.cancel()
            result.set_running_or_notify_cancel()

    try:
        with _interruptible():
            loop.call_soon_threadsafe(start)
            return result.result()
    except KeyboardInterrupt:
        loop.call_soon_threadsafe(cancel)
        with contextlib.suppress(BaseException):
            result.exception(timeout=_CANCEL_GRACE)  # wait for the work to unwind
        raise


def _settle(result: concurrent.futures.Future[T], task: asyncio.Task[T]) -> None:
    if task.cancelled():
        result.cancel()
        result.set_running_or_notify_cancel()
    elif (error := task.exception()) is not None:
        result.set_exception(error)
    else:
        result.set_result(task.result())


@contextlib.contextmanager
def _interruptible() -> Iterator[None]:
    """Make Ctrl-C raise `KeyboardInterrupt` while the main thread waits, even when an
    outer `asyncio.run()` installed a handler that only flags the interrupt."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    import signal

    previous = signal.getsignal(signal.SIGINT)
    if previous in (signal.SIG_IGN, None):
        yield
        return
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _run_on_own_thread(coroutine: Coroutine[Any, Any, T]) -> T:
    """For sync code called on the background loop: a fresh loop in a fresh thread."""
    import asyncio
    import concurrent.futures
    import contextvars

    context = contextvars.copy_context()
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="agentensemble") as pool:
        return pool.submit(context.run, asyncio.run, coroutine).result()
