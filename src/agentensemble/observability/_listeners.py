"""`EnsembleListener` and the per-run dispatcher that calls listeners safely."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Generic, TypeVar

from agentensemble.execution._logging import get_logger
from agentensemble.observability._events import (
    TaskCompleteEvent,
    TaskFailedEvent,
    TaskStartEvent,
    ToolCallEvent,
)

__all__ = ["Callback", "EnsembleListener", "EventDispatcher", "callback_listener"]

logger = get_logger("agentensemble.listeners")

E = TypeVar("E")
Callback = Callable[[E], Any | Awaitable[Any]]
"""A sync or async function receiving one event."""


class EnsembleListener:
    """Subclass and override the methods you need; each may be sync or async.

    Sync methods run in a worker thread so they never block the event loop; with parallel
    workflows they may be called from several tasks at once. A listener that raises is
    logged and never disturbs the run or the other listeners.
    """

    def on_task_start(self, event: TaskStartEvent) -> Any:
        """A task is starting."""

    def on_task_complete(self, event: TaskCompleteEvent) -> Any:
        """A task completed."""

    def on_task_failed(self, event: TaskFailedEvent) -> Any:
        """A task failed."""

    def on_tool_call(self, event: ToolCallEvent) -> Any:
        """A tool call finished."""


_METHODS = ("on_task_start", "on_task_complete", "on_task_failed", "on_tool_call")


def callback_listener(**callbacks: Callable[[Any], Any] | None) -> EnsembleListener | None:
    """A listener calling the given keyword callbacks (``on_task_start=fn`` ...), or None."""
    chosen = {name: fn for name, fn in callbacks.items() if fn is not None}
    if not chosen:
        return None
    listener = EnsembleListener()
    for name, fn in chosen.items():
        object.__setattr__(listener, name, fn)
    return listener


class _Handler(Generic[E]):
    __slots__ = ("fn", "is_async", "owner")

    def __init__(self, owner: object, fn: Callable[[E], Any]) -> None:
        self.owner = owner
        self.fn = fn
        self.is_async = inspect.iscoroutinefunction(fn)


class EventDispatcher:
    """Delivers events to one run's listeners, in registration order, isolating failures."""

    def __init__(self, listeners: Sequence[object]) -> None:
        self._handlers: dict[str, tuple[_Handler[Any], ...]] = {
            name: tuple(
                _Handler(listener, getattr(listener, name))
                for listener in listeners
                if _overrides(listener, name)
            )
            for name in _METHODS
        }

    def wants(self, method: str) -> bool:
        """Whether any listener handles `method` (lets callers skip building events)."""
        return bool(self._handlers[method])

    async def emit(self, method: str, event: object) -> None:
        """Call every handler of `method` with `event`; exceptions are logged, not raised."""
        handlers = self._handlers[method]
        if not handlers:
            return
        import asyncio

        for handler in handlers:
            try:
                if handler.is_async:
                    await handler.fn(event)
                else:
                    result = await asyncio.to_thread(handler.fn, event)
                    if inspect.isawaitable(result):
                        await result
            except Exception:
                logger.warning(
                    "Listener %s raised in %s; the run continues",
                    type(handler.owner).__name__,
                    method,
                    exc_info=True,
                )


def _overrides(listener: object, name: str) -> bool:
    """Whether `listener` really handles `name` (the base class's no-ops are skipped)."""
    if not callable(getattr(listener, name, None)):
        return False
    if name in getattr(listener, "__dict__", {}):
        return True
    return getattr(type(listener), name, None) is not getattr(EnsembleListener, name)
