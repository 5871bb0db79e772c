"""`EventStream`: a run's events as an async iterator (`Ensemble.astream`).

The stream adds one listener of its own to the run's `RunOptions.listeners` and runs the
run as an asyncio task it owns. The listener puts every event in a bounded buffer; the
reader takes them out. When the buffer is full the listener waits for room (the engine
awaits async listeners, so the run waits too: that is the back-pressure), except for a
token that follows a token of the same task: the two are joined into one event instead.
No other event is ever dropped.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections import deque
from collections.abc import AsyncIterator, Callable, Coroutine
from enum import Enum
from typing import TYPE_CHECKING, Any, NoReturn

from agentensemble._checks import require_int
from agentensemble.errors import ValidationError
from agentensemble.options import RunOptions

if TYPE_CHECKING:
    import asyncio
    from types import TracebackType
    from typing import Self

    from agentensemble.observability import Event, TokenEvent
    from agentensemble.outputs import EnsembleOutput

__all__ = ["DEFAULT_MAX_BUFFER", "EventStream", "StartRun"]

DEFAULT_MAX_BUFFER = 1000
"""How many events a stream holds for a reader that falls behind, by default."""

StartRun = Callable[[RunOptions], Coroutine[Any, Any, "EnsembleOutput"]]
"""Starts the run with the given options (the stream's listener added to them)."""


class _State(Enum):
    RUNNING = "running"
    ENDED = "ended"
    """The reader reached the end of the run."""
    CLOSED = "closed"
    """Closed before the end (`aclose`, leaving the loop, the reader cancelled)."""


class _Buffer:
    """The bounded queue between the run's listener and the stream's reader."""

    def __init__(self, max_size: int) -> None:
        import asyncio  # loaded with the first stream, not with the package

        self.max_size = max_size
        self.events: deque[Event] = deque()
        self.readable = asyncio.Event()
        """Set when an event arrived, the run ended or the stream closed."""
        self.writable = asyncio.Event()
        """Set when the reader took an event or the stream closed."""
        self.turn = asyncio.Lock()
        """Writers wait for room one at a time, so events keep the order they came in."""
        self.closed = False

    async def put(self, event: Event) -> None:
        """Add `event`, waiting for room when full (a token may join the last one instead);
        once the stream is closed, events are let go."""
        async with self.turn:
            while not self.closed and len(self.events) >= self.max_size:
                if self._coalesce(event):
                    return
                self.writable.clear()
                await self.writable.wait()
            if not self.closed:
                self.events.append(event)
                self.readable.set()

    def _coalesce(self, event: Event) -> bool:
        """Join a token to the last buffered event when that is a token of the same task."""
        last = self.events[-1]
        if not (
            event.type == "token"
            and last.type == "token"
            and (last.ensemble_id, last.task_id, last.task_index)
            == (event.ensemble_id, event.task_id, event.task_index)
        ):
            return False
        self.events[-1] = dataclasses.replace(last, token=last.token + event.token)
        return True

    def take(self) -> Event | None:
        """The oldest event (None when there is none), making room for the writers."""
        event = self.events.popleft() if self.events else None
        if not self.events:
            self.readable.clear()
        if event is not None:
            self.writable.set()
        return event

    def close(self) -> None:
        """Drop what is buffered; writers stop waiting, readers wake up."""
        self.closed = True
        self.events.clear()
        self.writable.set()
        self.readable.set()

    def run_ended(self, task: asyncio.Task[EnsembleOutput]) -> None:
        """The run's task finished: wake the reader. The run's error is marked as retrieved
        here (the reader raises it), so that an abandoned stream never logs it."""
        if not task.cancelled():
            task.exception()
        self.readable.set()


class _StreamListener:
    """The stream's per-run listener. Defining `on_token` asks the run to stream answers."""

    def __init__(self, buffer: _Buffer) -> None:
        self._buffer = buffer

    def __repr__(self) -> str:
        return "EventStream listener"

    async def on_token(self, event: TokenEvent) -> None:
        """A streamed piece of an answer."""
        await self._buffer.put(event)

    async def on_event(self, event: Event) -> None:
        """Every other event (tokens come through `on_token`)."""
        if event.type != "token":
            await self._buffer.put(event)


def _abandon(buffer: _Buffer, task: asyncio.Task[EnsembleOutput]) -> None:
    buffer.close()
    task.cancel()


class EventStream(AsyncIterator["Event"]):  # a string: the event classes load with the run
    """The events of one run, as they happen: ``async for event in stream``.

    Made by `Ensemble.astream` (and `MapReduceEnsemble.astream`). The events are the
    objects listeners receive, tokens included (the run streams its answers). The run
    starts when iteration (or ``async with``) starts; `output` is its `EnsembleOutput`
    once the iteration has ended. A failed run raises its error at the end of the
    iteration, after the events that led to it (``ensemble_completed`` included).

    Leaving the loop early (``break``), `aclose`, or cancelling the reader while it waits
    for an event cancels the run as a cancelled `Ensemble.arun` is cancelled: its
    ``ensemble_completed`` event still reaches the other listeners and its trace is still
    exported. Use ``async with ensemble.astream(...) as stream:`` to be sure: leaving the
    block waits until the run has wound down. (After a plain ``break``, the run is cancelled
    as soon as the abandoned loop is collected, without waiting for it; a stream that is
    garbage-collected unfinished cancels its run too.)

    A reader that falls behind holds the run back: at most `max_buffer` events wait for
    it, and the run waits for room, except that consecutive tokens of one task are joined
    into one `TokenEvent` (its text is theirs, its other fields the first one's).
    """

    def __init__(
        self, start: StartRun, options: RunOptions | None, *, max_buffer: int = DEFAULT_MAX_BUFFER
    ) -> None:
        self._task: asyncio.Task[EnsembleOutput] | None = None
        if options is None:
            options = RunOptions()
        if not isinstance(options, RunOptions):
            raise ValidationError(f"run options must be a RunOptions, got: {options!r}")
        if require_int(max_buffer, "astream max_buffer") <= 0:
            raise ValidationError(f"astream max_buffer must be > 0, got: {max_buffer}")
        self._buffer = _Buffer(max_buffer)
        listener = _StreamListener(self._buffer)
        self._options = dataclasses.replace(options, listeners=(*options.listeners, listener))
        self._start = start
        self._state = _State.RUNNING

    @property
    def max_buffer(self) -> int:
        """Most events waiting for the reader before the run waits for room."""
        return self._buffer.max_size

    @property
    def output(self) -> EnsembleOutput:
        """The run's `EnsembleOutput`, once the iteration has ended.

        Raises `RuntimeError` before that, when the stream was closed before the run
        finished, and when the run failed (the error, which the iteration raised at its end,
        is the `RuntimeError`'s ``__cause__``)."""
        task = self._task
        unfinished = task is None or not task.done() or task.cancelled()
        if self._state is _State.CLOSED and unfinished:
            raise RuntimeError("the stream was closed before the run finished: it has no output")
        if self._state is _State.RUNNING or task is None or not task.done():
            raise RuntimeError("the run has not finished: iterate the stream to its end first")
        if task.cancelled():
            raise RuntimeError("the run was cancelled before it finished: it has no output")
        error = task.exception()
        if error is not None:
            raise RuntimeError("the run failed, so it has no output (see __cause__)") from error
        return task.result()

    def __aiter__(self) -> AsyncIterator[Event]:
        """The events; leaving the loop early cancels the run."""
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[Event]:
        try:
            while True:
                try:
                    event = await self.__anext__()
                except StopAsyncIteration:
                    return
                yield event
        except GeneratorExit:  # the loop was left early: the consumer is gone
            task = self._task
            if task is not None and self._state is _State.RUNNING:
                self._state = _State.CLOSED
                _abandon(self._buffer, task)
            raise

    async def __anext__(self) -> Event:
        """The next event; at the end, the run's error or `StopAsyncIteration`."""
        import asyncio

        if self._task is None and self._state is not _State.RUNNING:
            raise StopAsyncIteration  # closed before it started: the run never runs
        task = self._started()
        while (event := self._buffer.take()) is None:
            if self._state is not _State.RUNNING:
                raise StopAsyncIteration
            if task.done():
                self._end(task)
            try:
                await self._buffer.readable.wait()
            except asyncio.CancelledError:
                await self.aclose()
                raise
        return event

    def _started(self) -> asyncio.Task[EnsembleOutput]:
        import asyncio

        if self._task is None:
            self._task = asyncio.create_task(self._start(self._options))
            self._task.add_done_callback(self._buffer.run_ended)
        return self._task

    def _end(self, task: asyncio.Task[EnsembleOutput]) -> NoReturn:
        self._state = _State.ENDED
        error = None if task.cancelled() else task.exception()
        if error is not None:
            raise error
        raise StopAsyncIteration

    async def aclose(self) -> None:
        """Cancel the run if it is still running and wait until it has wound down (its
        ``ensemble_completed`` event sent, its trace exported). Calling it again does
        nothing; after the end of the iteration it does nothing."""
        import asyncio

        if self._state is _State.RUNNING:
            self._state = _State.CLOSED
        task = self._task
        if task is None:
            self._buffer.close()
            return
        _abandon(self._buffer, task)
        interrupted: asyncio.CancelledError | None = None
        while not task.done():
            try:
                await asyncio.wait([task])
            except asyncio.CancelledError as error:  # keep waiting, then re-raise
                interrupted = error
        if interrupted is not None:
            raise interrupted

    async def __aenter__(self) -> Self:
        """Start the run; leaving the block closes the stream (see `aclose`)."""
        if self._task is None and self._state is not _State.RUNNING:
            raise RuntimeError("the stream is closed: make a new one with astream()")
        self._started()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()

    def __del__(self) -> None:
        task = self._task
        if task is not None and not task.done():
            with contextlib.suppress(RuntimeError):  # its loop is closed: nothing runs
                task.get_loop().call_soon_threadsafe(_abandon, self._buffer, task)

    def __repr__(self) -> str:
        return f"EventStream({self._state.value}, max_buffer={self.max_buffer})"
