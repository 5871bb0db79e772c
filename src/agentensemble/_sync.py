"""The one bridge from sync to async: run a coroutine to completion from sync code.

A sync call made on the main thread where no event loop runs (a script, a CLI, a queue
worker) runs on the main thread's own long-lived event loop, in that thread: no hop to
another thread, which costs more CPU than the run of a small ensemble. Any other sync call
(another thread's: a web server's thread pool; or one made where a loop already runs: a
notebook, an async app calling sync code) runs on one long-lived event loop in a background
thread, started on first use: concurrent calls from many threads share its I/O (measured:
more throughput in a thread-pool web endpoint than a loop per thread), and a call cannot
block a running loop's own thread on another run of it. Either way the loop lives across
calls: model clients bound to an event loop (the OpenAI SDK's, made once per loop) keep
working and nothing is opened again for each call, so file descriptors and threads stay
flat over thousands of calls. Both loops are closed at interpreter exit. The caller's
context variables (OpenTelemetry's current span, logging context) are copied into the call.
Ctrl-C while a call waits cancels only that call's work, then raises `KeyboardInterrupt`.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Coroutine, Iterator
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
        self.closing = False
        self.thread = threading.Thread(target=self._serve, name="agentensemble-loop", daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        import asyncio

        asyncio.set_event_loop(self.loop)
        while not self.closing:  # a `loop.stop()` in user code must not end the service
            # KeyboardInterrupt or SystemExit raised by user code (sys.exit() in a sync
            # tool, say): asyncio re-raises it out of the loop after failing the task, so
            # serve on and let that failure reach the caller waiting in run_sync instead of
            # leaving it waiting forever.
            with contextlib.suppress(KeyboardInterrupt, SystemExit):
                self.loop.run_forever()

    def stop(self) -> None:
        """Close what is bound to the loop (async generators: model clients), then the loop."""
        import asyncio
        import concurrent.futures

        if self.loop.is_closed():
            return
        with contextlib.suppress(RuntimeError, concurrent.futures.TimeoutError):
            asyncio.run_coroutine_threadsafe(self.loop.shutdown_asyncgens(), self.loop).result(5)
        self.closing = True
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


class _OwnRunner:
    """The main thread's own event loop for its sync calls, closed at exit.

    Like `asyncio.Runner`, kept across calls, with a Ctrl-C handler of its own: set through
    the C module under `signal` (which converts every handler to an enum member where it
    can, formatting the handler's repr when it cannot), and a plain function (the repr of
    `asyncio.Runner`'s includes its task's). Both cost tens of microseconds a call, more
    than the rest of this bridge."""

    def __init__(self) -> None:
        import asyncio
        import socket

        self.loop = asyncio.new_event_loop()
        self.thread_id = threading.get_ident()
        self.forked = False
        # Where a Ctrl-C wakes the loop (see `_own_ctrl_c`); the loop drains it.
        self._wake_in, self._wake_out = socket.socketpair()
        self._wake_in.setblocking(False)
        self._wake_out.setblocking(False)
        self._wake_fd = self._wake_out.fileno()
        self._signals = _signal_module()
        self.loop.add_reader(self._wake_in.fileno(), self._drain_wakes)

    def _drain_wakes(self) -> None:
        with contextlib.suppress(OSError):
            self._wake_in.recv(4096)

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        import asyncio

        loop = self.loop
        # in a copy of the context; named, which spares formatting a "Task-N" name per call
        task = loop.create_task(self._stopping_after(coroutine), name=_TASK_NAME)
        interrupted = False
        wake: asyncio.Handle | None = None

        def on_ctrl_c(signum: int, frame: object) -> None:
            nonlocal interrupted, wake
            if interrupted or task.done():  # a second Ctrl-C stops waiting for the cleanup
                raise KeyboardInterrupt
            interrupted = True
            task.cancel()
            # Wakes the loop to see the cancel, and stops it should the work be cancelled
            # before it started (it then never reaches `_stopping_after`'s own stop).
            wake = loop.call_soon_threadsafe(loop.stop)

        owned = _own_ctrl_c(self._signals, on_ctrl_c, self._wake_fd)
        try:
            self._run_until_done(task)
            return task.result()
        except asyncio.CancelledError:
            if interrupted:
                raise KeyboardInterrupt from None
            raise
        except BaseException:
            self._unwind(task)  # raised out of the loop (an application's own Ctrl-C)
            raise
        finally:
            if wake is not None:
                wake.cancel()  # not left queued to stop the loop's next run (or its close)
            if task.done():
                coroutine.close()  # never started (cancelled first): no "never awaited" warning
            if owned is not None:
                _give_back_ctrl_c(self._signals, owned)

    async def _stopping_after(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Await `coroutine`, then stop the loop in the same turn: `run_until_complete`
        stops it from a done callback, one more turn (and `epoll_wait` call) per call,
        about 3 µs of the 25 µs this bridge cost a 2-task run."""
        try:
            return await coroutine
        finally:
            self.loop.stop()

    def _run_until_done(self, task: asyncio.Task[Any]) -> None:
        """Run the loop until `task` (made with `_stopping_after`) is done."""
        while not task.done():  # stopped early only by someone else's `loop.stop()`
            self.loop.run_forever()

    def _unwind(self, task: asyncio.Task[Any]) -> None:
        """Cancel a call's work that an exception raised out of the loop left running, and
        give it `_CANCEL_GRACE` seconds to clean up: the next call on this thread's loop
        must not run it too."""
        import asyncio

        if not task.done():
            task.cancel()
            waiting = asyncio.wait([task], timeout=_CANCEL_GRACE)
            with contextlib.suppress(BaseException):
                self._run_until_done(self.loop.create_task(self._stopping_after(waiting)))
        if task.done() and not task.cancelled():
            task.exception()  # the caller has it (raised out of the loop): not "never retrieved"

    def close(self) -> None:
        """Finalize what is bound to the loop (model clients), then close it (at exit:
        quietly). A loop copied by `fork` is left alone: what it holds belongs to the
        parent process."""
        if self.forked or self.loop.is_closed():
            return
        try:
            with contextlib.suppress(Exception):
                self.loop.run_until_complete(self.loop.shutdown_asyncgens())
                self.loop.run_until_complete(self.loop.shutdown_default_executor())
        finally:
            self.loop.remove_reader(self._wake_in.fileno())
            self.loop.close()
            self._wake_in.close()
            self._wake_out.close()


def _own_ctrl_c(signals: Any, handler: Callable[[int, Any], None], wake_fd: int) -> int | None:
    """Make `handler` the SIGINT handler while a call runs on the main thread, where Ctrl-C
    would otherwise raise `KeyboardInterrupt` wherever the loop happens to be, and `wake_fd`
    the signal's wake-up: the kernel may hand the signal to any thread (a sync tool's), and
    its handler runs only once the main thread runs Python again, which a loop waiting in
    `select` with nothing scheduled never would. Called on the main thread (`run_sync`
    checks) with `signals`, the module `_signal_module` returns. Returns the wake-up it
    replaced, for `_give_back_ctrl_c`, or None when someone else handles Ctrl-C (or
    ignores it)."""
    if signals.getsignal(signals.SIGINT) is not signals.default_int_handler:
        return None
    previous_fd: int = signals.set_wakeup_fd(wake_fd, warn_on_full_buffer=False)
    signals.signal(signals.SIGINT, handler)
    return previous_fd


def _give_back_ctrl_c(signals: Any, previous_fd: int) -> None:
    """Undo `_own_ctrl_c`: Python's own SIGINT handler, and the wake-up it had."""
    signals.signal(signals.SIGINT, signals.default_int_handler)
    signals.set_wakeup_fd(previous_fd)


def _signal_module() -> Any:
    """The C module under `signal`: the same functions without the conversion of every
    handler to and from an enum, which costs more than the rest of a call's bridge."""
    try:
        import _signal  # type: ignore[import-not-found,unused-ignore]
    except ImportError:  # not CPython
        import signal as _signal
    return _signal


_main: _OwnRunner | None = None

_TASK_NAME = "agentensemble.run_sync"
"""The name of the task a sync call on the main thread runs in."""


def _main_runner() -> _OwnRunner:
    """The main thread's runner, made on its first sync call and closed at exit."""
    global _main
    if _main is None or _main.loop.is_closed():
        import atexit

        _main = _OwnRunner()
        atexit.register(_main.close)
    return _main


def _forget_after_fork() -> None:
    global _background, _lock, _main
    _background, _lock = None, threading.Lock()  # the thread did not survive the fork
    if _main is not None:
        _main.forked = True
        _main = None


os.register_at_fork(after_in_child=_forget_after_fork)


def run_sync(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run `coroutine` to completion and return its result; callable from any sync code,
    including code called from inside a running event loop (a notebook, a web framework)."""
    import asyncio

    running = asyncio._get_running_loop()  # None, not an error to chain onto the run's own
    if running is None:
        main = _main  # made on the main thread: its thread id is the main thread's
        if (
            main is not None
            and main.thread_id == threading.get_ident()
            and not main.loop.is_closed()
        ):
            return main.run(coroutine)  # every sync call on the main thread but the first
        if threading.current_thread() is threading.main_thread():
            return _main_runner().run(coroutine)
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
