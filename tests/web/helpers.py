"""Shared pieces of the dashboard tests: a real WebSocket client and a paced model."""

from __future__ import annotations

import asyncio
import collections
import json
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any

from websockets.asyncio.client import ClientConnection, connect

from agentensemble import FunctionModel
from agentensemble.models import Message, ToolSpec
from agentensemble.web import WebDashboard

Wire = dict[str, Any]
DEADLINE = 20.0
"""Seconds any wait in these tests may take before it fails (never reached when things
work; it turns a hang into a failure)."""


def origin_of(dashboard: WebDashboard) -> str:
    return f"http://127.0.0.1:{dashboard.port}"


@asynccontextmanager
async def client(
    dashboard: WebDashboard,
    *,
    query: str = "",
    origin: str | None = "default",
    **options: Any,
) -> AsyncIterator[ClientConnection]:
    """A WebSocket client of the dashboard (from a page on its own origin by default)."""
    chosen = origin_of(dashboard) if origin == "default" else origin
    uri = f"ws://127.0.0.1:{dashboard.port}/ws{query}"
    async with connect(uri, origin=chosen, open_timeout=DEADLINE, **options) as ws:  # type: ignore[arg-type]
        try:
            yield ws
        finally:
            _unread.pop(id(ws), None)


_unread: dict[int, collections.deque[Wire]] = {}
"""Messages of a frame (a JSON array) not yet returned, per connection."""


async def receive(ws: ClientConnection) -> Wire:
    """The next message (a frame is one message or a JSON array of them)."""
    unread = _unread.setdefault(id(ws), collections.deque())
    if not unread:
        async with asyncio.timeout(DEADLINE):
            frame = json.loads(await ws.recv())
        unread.extend(frame if isinstance(frame, list) else [frame])
    return unread.popleft()


async def receive_until(ws: ClientConnection, done: Callable[[Wire], bool]) -> list[Wire]:
    """Every message up to and including the first for which `done` is true."""
    received: list[Wire] = []
    async with asyncio.timeout(DEADLINE):
        while True:
            message = await receive(ws)
            received.append(message)
            if done(message):
                return received


def of_type(kind: str) -> Callable[[Wire], bool]:
    return lambda message: message.get("type") == kind


class Gate:
    """A model that answers once the test opens its gate (so a test can act mid-run)."""

    def __init__(self, answers: Sequence[str]) -> None:
        self.answers = list(answers)
        self.calls = 0
        self.opened = asyncio.Event()
        self.waiting = asyncio.Event()

    def model(self) -> FunctionModel:
        async def answer(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
            index = self.calls
            self.calls += 1
            if index == len(self.answers) - 1:
                self.waiting.set()
                await self.opened.wait()
            return self.answers[index]

        return FunctionModel(answer)
