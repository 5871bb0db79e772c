"""`SyncLane`: a run's sync listeners, called on one thread of the run, in event order.

A sync listener method must not run on the event loop (it may block), and a thread hop per
event costs more than most listeners do. So every listener whose methods are all sync is
fed through one lane per run: the loop puts each event (with the methods it calls) in a
queue and goes on; one worker of the run's thread pool calls them one event at a time, in
`seq` order. When `MAX_PENDING` events wait, the run waits for room (a stuck listener holds
the run back instead of growing memory); the run's end waits until every event was handled.
"""

from __future__ import annotations

from collections.abc import Sequence
from queue import SimpleQueue
from typing import TYPE_CHECKING, Any, Protocol

from agentensemble._calling import call_user_code

if TYPE_CHECKING:
    import asyncio

__all__ = ["MAX_PENDING", "LaneHandler", "SyncLane", "finish_on_loop"]

MAX_PENDING = 10_000
"""Events a run's sync listeners may fall behind by before the run waits for them."""


class LaneHandler(Protocol):
    """A listener method the lane can call (see `_listeners._Handler`)."""

    def call_sync(self, event: Any, loop: asyncio.AbstractEventLoop) -> None: ...


Batch = list[tuple[Sequence[LaneHandler], Any]]
"""Events (with the methods they call) handed to the worker together."""


class SyncLane:
    """One run's sync listener methods, called in event order on one worker thread. The
    events of one turn of the event loop go to the worker as one batch: one hand-over
    between the threads per turn, not per event."""

    def __init__(self, max_pending: int | None = None) -> None:
        self._batches: SimpleQueue[Batch | None] = SimpleQueue()
        self._batch: Batch = []
        self._max = MAX_PENDING if max_pending is None else max_pending
        self._queued = 0
        """Events offered (written by the loop only)."""
        self._handled = 0
        """Events handled (written by the worker only)."""
        self._waiting = False
        self._room: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._worker: asyncio.Task[Any] | None = None

    async def offer(self, handlers: Sequence[LaneHandler], event: Any) -> None:
        """Queue `event` for `handlers` (waiting first if the lane is full)."""
        if self._worker is None:
            self._start()
        if self._queued - self._handled >= self._max:
            await self._wait_for_room()
        self._queued += 1
        if not self._batch and self._loop is not None:
            self._loop.call_soon(self._hand_over)
        self._batch.append((handlers, event))

    async def _wait_for_room(self) -> None:
        room = self._room
        if room is None:  # set by _start
            raise AssertionError("lane without its room event")
        self._hand_over()
        while self._queued - self._handled >= self._max:
            room.clear()
            self._waiting = True  # the worker sets `room` after its next batch
            if self._queued - self._handled >= self._max:
                await room.wait()
            self._waiting = False

    def _hand_over(self) -> None:
        """Give the worker the events offered so far (once per turn of the loop)."""
        if self._batch:
            batch, self._batch = self._batch, []
            self._batches.put(batch)

    def _start(self) -> None:
        import asyncio

        self._loop = asyncio.get_running_loop()
        self._room = asyncio.Event()
        self._worker = asyncio.create_task(call_user_code(self._work, is_async=False))

    def _work(self) -> None:
        """The worker thread: every batch, in order, until the lane closes."""
        loop, room = self._loop, self._room
        if loop is None or room is None:  # set by _start before the worker runs
            raise AssertionError("lane worker without its loop")
        while (batch := self._batches.get()) is not None:
            for handlers, event in batch:
                for handler in handlers:
                    handler.call_sync(event, loop)
            self._handled += len(batch)
            if self._waiting:
                loop.call_soon_threadsafe(room.set)

    @property
    def running(self) -> bool:
        """Whether the worker runs (from the first event offered until `close`)."""
        return self._worker is not None

    async def close(self) -> None:
        """Wait until every queued event was handled, then end the worker (a run's end).
        Calling it again does nothing."""
        worker, self._worker = self._worker, None
        if worker is None:
            return
        self._hand_over()
        self._batches.put(None)
        await worker


def finish_on_loop(awaitable: Any, loop: asyncio.AbstractEventLoop) -> Any:
    """Finish, on the run's loop, an awaitable that a sync listener method returned; the
    lane's worker waits for it."""
    import asyncio

    async def wait() -> Any:
        return await awaitable

    return asyncio.run_coroutine_threadsafe(wait(), loop).result()
