"""Long-running mode: an ensemble serving its shared tasks and tools from a transport."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
import threading
from collections.abc import AsyncIterator, Awaitable, Iterator
from enum import StrEnum
from typing import TYPE_CHECKING, TypeVar

from agentensemble._calling import sync_pool
from agentensemble._checks import require_seconds
from agentensemble._logging import get_logger
from agentensemble.errors import ValidationError, describe_error
from agentensemble.network._delivery import DeliveryRegistry
from agentensemble.network._shared import SharedWork
from agentensemble.network._spi import Received, Transport
from agentensemble.network._wire import (
    CachePolicy,
    ResponseStatus,
    WorkRequest,
    WorkResponse,
)

if TYPE_CHECKING:
    from agentensemble.ensemble import Ensemble

__all__ = ["EnsembleServer", "ServerState"]

logger = get_logger("agentensemble.network")
T = TypeVar("T")

_RECEIVE_WAIT = 5.0
"""Seconds one receive waits before the loop asks again (a drain cancels it at once)."""
_BACKOFF = (0.1, 0.2, 0.5, 1.0, 2.0, 5.0)
"""Seconds between tries after a transport error (the last repeats)."""
_BATCH = 16
"""Most requests a worker takes in one receive (one round trip to a network queue)."""
_DELIVERY_TRIES = 8
"""How often a response is offered to a failing transport before its request is released."""


class ServerState(StrEnum):
    """Where a serving ensemble is in its life."""

    STARTING = "STARTING"
    READY = "READY"
    DRAINING = "DRAINING"
    STOPPED = "STOPPED"


class EnsembleServer:
    """An ensemble answering requests from a transport, at most `concurrency` at a time.

    `Ensemble.serve` awaits `serve()`; `Ensemble.start` runs it on a thread of its own.
    `drain()` (or SIGTERM, when serving on the main thread) stops taking requests, lets the
    ones in flight finish within the ensemble's `drain_timeout`, hands the rest back to the
    transport for another worker, and stops; so does taking `max_requests` requests (a
    worker process recycles itself that way). The transport stays open: its owner closes it.
    """

    def __init__(
        self,
        ensemble: Ensemble,
        transport: Transport,
        *,
        concurrency: int = 8,
        max_requests: int | None = None,
        deliveries: DeliveryRegistry | None = None,
    ) -> None:
        if not isinstance(transport, Transport):
            raise ValidationError(f"serve() transport must be a Transport, got: {transport!r}")
        if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
            raise ValidationError(f"serve() concurrency must be an int >= 1, got: {concurrency!r}")
        if not ensemble.shared_tasks and not ensemble.shared_tools:
            raise ValidationError(
                "serve() needs an Ensemble with shared_tasks or shared_tools to serve"
            )
        if max_requests is not None and (
            isinstance(max_requests, bool) or not isinstance(max_requests, int) or max_requests < 1
        ):
            raise ValidationError(f"max_requests must be an int >= 1, got: {max_requests!r}")
        if deliveries is not None and not isinstance(deliveries, DeliveryRegistry):
            raise ValidationError(
                f"serve() deliveries must be a DeliveryRegistry, got: {deliveries!r}"
            )
        self.max_requests = max_requests
        self.deliveries = deliveries or DeliveryRegistry()
        self._work = SharedWork(ensemble, transport)  # checks each shared task first
        self._dashboard = ensemble.web_dashboard
        self.transport = transport
        self.concurrency = concurrency
        self.max_sync_threads = ensemble.max_sync_threads
        self.drain_timeout = require_seconds(ensemble.drain_timeout, "Ensemble drain_timeout")
        self.requests_answered = 0
        self._state = ServerState.STARTING
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._draining: asyncio.Event | None = None
        self._drain_asked = False
        self._stopped = threading.Event()
        self._serving = threading.Event()
        """Set once READY (or once serving has ended, for `start` to stop waiting)."""
        self._thread: threading.Thread | None = None
        self._failure: BaseException | None = None

    def __repr__(self) -> str:
        return f"EnsembleServer({self.transport.name!r}, state={self._state})"

    @property
    def state(self) -> ServerState:
        """STARTING, READY (taking requests), DRAINING or STOPPED."""
        return self._state

    async def serve(self) -> None:
        """Answer requests until drained (or cancelled: then the requests in flight are
        handed back at once)."""
        self._loop = asyncio.get_running_loop()
        self._draining = asyncio.Event()
        with self._lock:
            if self._drain_asked:
                self._draining.set()
        try:
            async with self._shown_on_dashboard():
                # sync tools run on daemon threads: one stuck past the drain never holds
                # the process's exit
                with _drain_on_sigterm(self), sync_pool(self.max_sync_threads):
                    self._state = ServerState.READY
                    self._serving.set()
                    await self._serve_until_drained()
        finally:
            self._state = ServerState.STOPPED
            self._serving.set()
            self._stopped.set()

    @contextlib.asynccontextmanager
    async def _shown_on_dashboard(self) -> AsyncIterator[None]:
        """With a dashboard: it runs while serving (each request's run shows on it) and its
        ``/api/health/ready`` answers from this server's state."""
        dashboard = self._dashboard
        if dashboard is None:
            yield
            return
        await dashboard.acquire_for_run()
        dashboard.readiness = self._readiness
        try:
            yield
        finally:
            dashboard.readiness = None
            await dashboard.release_for_run()

    def _readiness(self) -> str:
        return self._state.value

    def drain(self) -> None:
        """Stop taking requests and finish (from any thread; returns at once)."""
        with self._lock:
            self._drain_asked = True
            loop, draining = self._loop, self._draining
        if loop is not None and draining is not None and not loop.is_closed():
            loop.call_soon_threadsafe(draining.set)

    def start(self) -> EnsembleServer:
        """Serve on a thread of this server's own (see `Ensemble.start`); returns once the
        server is READY, and raises what stopped it if it could not get there (its
        dashboard's port taken, say)."""
        if self._thread is not None:
            return self
        self._thread = threading.Thread(
            target=self._serve_on_thread, name="agentensemble-server", daemon=True
        )
        self._thread.start()
        self._serving.wait()
        if self._failure is not None:
            self._thread.join()
            raise self._failure
        return self

    def stop(self, timeout: float | None = None) -> None:
        """Drain, and wait until stopped: at most `timeout` seconds (None: the drain
        timeout and a little more). Idempotent."""
        self.drain()
        if self._thread is not None:
            self._thread.join(self.drain_timeout + 10 if timeout is None else timeout)
        elif self._loop is not None:
            self._stopped.wait(self.drain_timeout + 10 if timeout is None else timeout)

    async def astop(self) -> None:
        """`stop` for async callers (does not block the event loop)."""
        self.drain()
        await asyncio.to_thread(self._stopped.wait, self.drain_timeout + 10)

    def __enter__(self) -> EnsembleServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def _serve_on_thread(self) -> None:
        try:
            asyncio.run(self.serve())
        except BaseException as error:  # `start` raises it, or the log shows it
            self._failure = error
            logger.exception("Ensemble server '%s' stopped on an error", self.transport.name)
        finally:
            self._serving.set()
            self._stopped.set()

    async def _serve_until_drained(self) -> None:
        assert self._draining is not None
        in_flight: set[asyncio.Task[None]] = set()
        async with asyncio.TaskGroup() as group:
            receiver = group.create_task(self._receive(group, in_flight))
            await self._draining.wait()
            self._state = ServerState.DRAINING
            receiver.cancel()
            await self._finish(in_flight)

    async def _receive(self, group: asyncio.TaskGroup, in_flight: set[asyncio.Task[None]]) -> None:
        slots = asyncio.Semaphore(self.concurrency)
        failures = taken = 0
        while self.max_requests is None or taken < self.max_requests:
            free = await _free_slots(slots, self._batch_limit(taken))
            try:
                batch = await self.transport.receive_many(free, _RECEIVE_WAIT)
            except Exception as error:  # the transport's own retries gave up: keep trying
                _release_slots(slots, free)
                failures += 1
                await _back_off("receive from", self.transport, error, failures)
                continue
            failures = 0
            _release_slots(slots, free - len(batch))
            for received in batch:
                taken += 1
                task = group.create_task(self._handle(received, slots))
                in_flight.add(task)
                task.add_done_callback(in_flight.discard)
        self.drain()  # took max_requests: finish them and stop

    def _batch_limit(self, taken: int) -> int:
        """Most requests to take at once: the free slots, up to `_BATCH`, and never past
        `max_requests`."""
        if self.max_requests is None:
            return _BATCH
        return min(_BATCH, self.max_requests - taken)

    async def _handle(self, received: Received, slots: asyncio.Semaphore) -> None:
        try:
            response = await self._respond(received)
            await self._deliver(received, response)
        except asyncio.CancelledError:
            if isinstance(received, WorkRequest):
                await asyncio.shield(self._release(received.request_id))
            raise
        finally:
            slots.release()

    async def _respond(self, received: Received) -> WorkResponse:
        """The response: refused for a delivery this transport cannot make, the cached one
        for a ``USE_CACHED`` request whose key has one, else the work's (cached when the
        request gives a key and a ``maxAge``)."""
        if not isinstance(received, WorkRequest):
            return await self._work.answer(received)
        method = received.delivery.method
        if not self.deliveries.can_deliver(method):
            return WorkResponse.failed(received.request_id, self.deliveries.missing(method))
        key = received.cache_key
        if key and received.cache_policy is CachePolicy.USE_CACHED:
            hit = await _or_none(self.transport.cached(key))
            if hit is not None:
                return hit.model_copy(update={"request_id": received.request_id})
        response = await self._work.answer(received)
        if key and received.max_age and response.status is ResponseStatus.COMPLETED:
            await _or_none(self.transport.cache(key, response, received.max_age))
        return response

    async def _deliver(self, received: Received, response: WorkResponse) -> None:
        """Hand the response to its delivery handler (if the request names one), then keep
        it in the transport and acknowledge the request, trying again while that fails."""
        for attempt in range(1, _DELIVERY_TRIES + 1):
            try:
                if isinstance(received, WorkRequest):
                    await self.deliveries.deliver(received.delivery, response)
                await self.transport.deliver(response)
            except Exception as error:
                await _back_off("deliver to", self.transport, error, attempt)
                continue
            self.requests_answered += 1
            return
        logger.error(
            "Could not deliver the response to request '%s'; it is handed back to be run again",
            response.request_id,
        )
        await self._release(response.request_id)

    async def _release(self, request_id: str) -> None:
        try:
            await self.transport.release(request_id)
        except Exception as error:  # its reclaim takes it back once this worker is gone
            logger.warning("Could not hand request '%s' back: %s", request_id, error)

    async def _finish(self, in_flight: set[asyncio.Task[None]]) -> None:
        """Let the requests in flight finish within the drain timeout; cancel the rest
        (each hands its request back)."""
        if not in_flight:
            return
        _, pending = await asyncio.wait(set(in_flight), timeout=self.drain_timeout)
        for task in pending:
            task.cancel()


async def _free_slots(slots: asyncio.Semaphore, most: int) -> int:
    """Wait for one free slot, then take the others free now (at most `most` in all)."""
    await slots.acquire()
    free = 1
    while free < most and not slots.locked():
        await slots.acquire()  # free now: returns at once
        free += 1
    return free


def _release_slots(slots: asyncio.Semaphore, count: int) -> None:
    for _ in range(count):
        slots.release()


async def _or_none(call: Awaitable[T]) -> T | None:
    """`call`'s result, or None when the transport failed (a cache is an optimisation)."""
    try:
        return await call
    except Exception as error:
        logger.warning("The result cache failed: %s", describe_error(error))
        return None


async def _back_off(action: str, transport: Transport, error: Exception, failures: int) -> None:
    delay = _BACKOFF[min(failures, len(_BACKOFF)) - 1]
    logger.warning(
        "Could not %s transport '%s' (%s); trying again in %.1f s",
        action,
        transport.name,
        describe_error(error),
        delay,
    )
    await asyncio.sleep(delay)


@contextlib.contextmanager
def _drain_on_sigterm(server: EnsembleServer) -> Iterator[None]:
    """On the main thread, SIGTERM drains the server; the handler set before comes back
    after."""
    loop = asyncio.get_running_loop()
    # Windows' loops have no add_signal_handler; elsewhere only the main thread gets signals
    if sys.platform == "win32" or threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGTERM)
    loop.add_signal_handler(signal.SIGTERM, server.drain)
    try:
        yield
    finally:
        loop.remove_signal_handler(signal.SIGTERM)
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
