"""`SyncLane`: a run's sync listeners, called on one thread of the run, in event order.

A sync listener method must not run on the event loop (it may block), and a thread hop per
event costs more than most listeners do. So every listener whose methods are all sync is
fed through one lane per run: the loop puts each event (with the methods it calls) in a
queue and goes on; one thread of the lane calls them one event at a time, in `seq` order.
When more than `MAX_PENDING` events wait, the run waits until half of them are handled (a
stuck listener holds the run back instead of growing memory); the run's end waits until
every event was handled, within the run's deadline.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
from collections.abc import Sequence
from queue import SimpleQueue
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import asyncio

__all__ = ["BATCH_SIZE", "MAX_PENDING", "LaneHandler", "SyncLane", "finish_on_loop"]

MAX_PENDING = 10_000
"""Events a run's sync listeners may fall behind by before the run waits for them."""
BATCH_SIZE = 256
"""Events handed to the worker at once, at most. A batch also ends with each turn of the
event loop; but one turn of a wide fan-out runs thousands of tasks, and a batch that waited
for its end would hold all their events (and the contexts they were emitted in) at once."""


class LaneHandler(Protocol):
    """A listener method the lane can call (see `_listeners._Handler`)."""

    def call_sync(self, event: Any, loop: asyncio.AbstractEventLoop) -> None: ...


Batch = list[tuple[Sequence[LaneHandler], Any, contextvars.Context]]
"""Events (with the methods they call and the context they were emitted in) handed to the
worker together."""


class SyncLane:
    """One run's sync listener methods, called in event order on one thread of its own. The
    events of one turn of the event loop go to the worker as one batch: one hand-over
    between the threads per turn, not per event. Each method runs in the context of the
    task that emitted its event (log context, tracing spans)."""

    def __init__(self, max_pending: int | None = None) -> None:
        self._batches: SimpleQueue[Batch | None] = SimpleQueue()
        self._batch: Batch = []
        self._max = MAX_PENDING if max_pending is None else max_pending
        self._low = self._max // 2
        """A full lane lets the run go on once this many events (or fewer) wait."""
        self._queued = 0
        """Events offered (written by the loop only)."""
        self._handled = 0
        """Events handled (written by the worker only)."""
        self._waiters = 0
        """Offers waiting for room (written by the loop only; read by the worker)."""
        self._room: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._done: asyncio.Future[None] | None = None

    def put(self, handlers: Sequence[LaneHandler], event: Any) -> bool:
        """Queue `event` for `handlers`, in order; True when the lane is now full, and the
        caller should wait for `room` (the run waits for a listener that fell too far
        behind). Nothing is awaited here: most events cost no coroutine at all."""
        if self._done is None:
            self._start()
        self._queued += 1
        batch = self._batch
        if not batch and self._loop is not None:
            self._loop.call_soon(self._hand_over)
        batch.append((handlers, event, contextvars.copy_context()))
        if len(batch) >= BATCH_SIZE:
            self._hand_over()
        return self._queued - self._handled > self._max

    async def room(self) -> None:
        """Wait until the listeners have caught up to half the lane: a lane that let one
        event in per event handled would wake the run once per batch, and a run whose
        listener is slower than its tasks would spend its time in those wake-ups."""
        room = self._room
        if room is None:  # set by _start
            raise AssertionError("lane without its room event")
        self._hand_over()
        self._waiters += 1  # the worker sets `room` once below `_low` while anyone waits
        try:
            while self._queued - self._handled > self._low and self.running:
                room.clear()
                if self._queued - self._handled > self._low:
                    await room.wait()
        finally:
            self._waiters -= 1

    def _hand_over(self) -> None:
        """Give the worker the events offered so far (once per turn of the loop, and
        whenever `BATCH_SIZE` wait)."""
        if self._batch:
            batch, self._batch = self._batch, []
            self._batches.put(batch)

    def _start(self) -> None:
        import asyncio

        loop = asyncio.get_running_loop()
        self._loop, self._room, self._done = loop, asyncio.Event(), loop.create_future()
        # A thread of its own, not one of the run's pool: a pool of one thread must stay
        # free for sync tools; a daemon, so a listener stuck forever never holds the exit.
        threading.Thread(target=self._work, name="agentensemble-listeners", daemon=True).start()

    def _work(self) -> None:
        """The worker thread: every batch, in order, until the lane closes."""
        loop, room, done = self._loop, self._room, self._done
        if loop is None or room is None or done is None:  # set by _start before the thread
            raise AssertionError("lane worker without its loop")
        try:
            while (batch := self._batches.get()) is not None:
                for handlers, event, context in batch:
                    for handler in handlers:
                        context.run(handler.call_sync, event, loop)
                self._handled += len(batch)
                if self._waiters and self._queued - self._handled <= self._low:
                    loop.call_soon_threadsafe(room.set)
        finally:
            with contextlib.suppress(RuntimeError):  # the loop is already closed
                loop.call_soon_threadsafe(_settle, done)

    @property
    def running(self) -> bool:
        """Whether the worker runs (from the first event offered until it has finished)."""
        return self._done is not None and not self._done.done()

    def abandon(self) -> None:
        """End the lane without waiting: the worker handles what is queued, then ends."""
        if self._done is not None:
            self._hand_over()
            self._batches.put(None)
            self._done = None

    async def close(self) -> None:
        """Wait until every queued event was handled and the worker has ended (a run's end).
        Cancelling the wait abandons the lane: its worker finishes the queue on its own."""
        done = self._done
        if done is None:
            return
        self._hand_over()
        self._batches.put(None)
        import asyncio

        await asyncio.shield(done)


def _settle(done: asyncio.Future[None]) -> None:
    if not done.done():
        done.set_result(None)


def finish_on_loop(awaitable: Any, loop: asyncio.AbstractEventLoop) -> Any:
    """Finish, on the run's loop, an awaitable that a sync listener method returned; the
    lane's worker waits for it."""
    import asyncio

    async def wait() -> Any:
        return await awaitable

    return asyncio.run_coroutine_threadsafe(wait(), loop).result()
