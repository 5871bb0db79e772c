"""A request's progress: its run's events, sent to the transport's event log as they happen,
so that a caller can follow them (`NetworkClient.events`) and fold them into a trace."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from agentensemble._logging import get_logger
from agentensemble.errors import describe_error

if TYPE_CHECKING:
    from agentensemble.network._spi import Transport
    from agentensemble.observability import Event

__all__ = ["EventForwarder"]

logger = get_logger("agentensemble.network")


class EventForwarder:
    """A run's listener: each event is serialized and buffered (the run never waits on the
    transport), and one task sends what has gathered, one batch per round trip. `running()`
    brackets the run: when it ends, every event has been sent, so a caller that sees the
    response has already seen every event before it."""

    def __init__(self, transport: Transport, request_id: str) -> None:
        self.transport = transport
        self.request_id = request_id
        self._pending: list[dict[str, Any]] = []
        self._wake = asyncio.Event()
        self._stopping = False

    async def on_event(self, event: Event) -> None:
        """Buffer the event for the next batch."""
        from agentensemble.observability import serialize_event

        self._pending.append(serialize_event(event))
        self._wake.set()

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Send batches while the block runs, and the rest when it ends."""
        async with asyncio.TaskGroup() as group:
            group.create_task(self._send_batches())
            try:
                yield
            finally:
                self._stopping = True
                self._wake.set()

    async def _send_batches(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            batch, self._pending = self._pending, []
            if batch:
                await self._send(batch)
            if self._stopping and not self._pending:
                return

    async def _send(self, batch: list[dict[str, Any]]) -> None:
        try:
            await self.transport.record_events(self.request_id, batch)
        except Exception as error:  # progress is best effort: the response is what counts
            logger.warning(
                "Could not record %d events of request '%s': %s",
                len(batch),
                self.request_id,
                describe_error(error),
            )
