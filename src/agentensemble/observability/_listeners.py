"""`EnsembleListener` and the per-run dispatcher that calls listeners safely."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from agentensemble._calling import call_user_code
from agentensemble._logging import get_logger

if TYPE_CHECKING:
    from agentensemble.observability._events import (
        DelegationCompletedEvent,
        DelegationFailedEvent,
        DelegationStartedEvent,
        EnsembleCompletedEvent,
        EnsembleStartedEvent,
        Event,
        LlmIterationCompletedEvent,
        LlmIterationStartedEvent,
        TaskCompleteEvent,
        TaskFailedEvent,
        TaskInputEvent,
        TaskStartEvent,
        TokenEvent,
        ToolCallEvent,
    )

__all__ = ["Callback", "EnsembleListener", "EventDispatcher", "callback_listener"]

logger = get_logger("agentensemble.listeners")

E = TypeVar("E")
Callback = Callable[[E], Any | Awaitable[Any]]
"""A sync or async function receiving one event."""


class EnsembleListener:
    """Subclass and override the methods you need; each may be sync or async.

    Order for one agent task: task start, task input, then per model call LLM iteration
    started/completed (tokens in between when streaming), tool calls, then task complete or
    failed. Sync methods run in a worker thread so they never block the event loop; in
    parallel runs they may be called from several tasks at once, so guard shared state.
    Async methods run on the event loop. A listener that raises is logged and never
    disturbs the run or the other listeners. Listeners belong to one ensemble.
    """

    def on_ensemble_started(self, event: EnsembleStartedEvent) -> Any:
        """A run started."""

    def on_ensemble_completed(self, event: EnsembleCompletedEvent) -> Any:
        """A run ended (exit reason ``ERROR`` when it raised)."""

    def on_task_start(self, event: TaskStartEvent) -> Any:
        """A task is starting."""

    def on_task_input(self, event: TaskInputEvent) -> Any:
        """An agent task's prompts are ready."""

    def on_task_complete(self, event: TaskCompleteEvent) -> Any:
        """A task completed."""

    def on_task_failed(self, event: TaskFailedEvent) -> Any:
        """A task failed."""

    def on_llm_iteration_started(self, event: LlmIterationStartedEvent) -> Any:
        """A model call is starting."""

    def on_llm_iteration_completed(self, event: LlmIterationCompletedEvent) -> Any:
        """A model call returned."""

    def on_tool_call(self, event: ToolCallEvent) -> Any:
        """A tool call finished."""

    def on_token(self, event: TokenEvent) -> Any:
        """A streamed piece of an answer arrived."""

    def on_delegation_started(self, event: DelegationStartedEvent) -> Any:
        """A delegation started."""

    def on_delegation_completed(self, event: DelegationCompletedEvent) -> Any:
        """A delegation completed."""

    def on_delegation_failed(self, event: DelegationFailedEvent) -> Any:
        """A delegation failed."""


METHOD_BY_TYPE = {
    "ensemble_started": "on_ensemble_started",
    "ensemble_completed": "on_ensemble_completed",
    "task_start": "on_task_start",
    "task_input": "on_task_input",
    "task_complete": "on_task_complete",
    "task_failed": "on_task_failed",
    "llm_iteration_started": "on_llm_iteration_started",
    "llm_iteration_completed": "on_llm_iteration_completed",
    "tool_call": "on_tool_call",
    "token": "on_token",
    "delegation_started": "on_delegation_started",
    "delegation_completed": "on_delegation_completed",
    "delegation_failed": "on_delegation_failed",
}
"""Listener method for each event `type`."""


def callback_listener(**callbacks: Callable[[Any], Any] | None) -> EnsembleListener | None:
    """A listener calling the given keyword callbacks (``on_task_start=fn`` ...), or None."""
    chosen = {name: fn for name, fn in callbacks.items() if fn is not None}
    if not chosen:
        return None
    listener = EnsembleListener()
    for name, fn in chosen.items():
        if name not in METHOD_BY_TYPE.values():
            raise ValueError(f"Unknown listener callback: {name}")
        setattr(listener, name, fn)
    return listener


class _Handler(Generic[E]):
    __slots__ = ("fn", "is_async", "owner")

    def __init__(self, owner: object, fn: Callable[[E], Any]) -> None:
        self.owner = owner
        self.fn = fn
        self.is_async = inspect.iscoroutinefunction(fn)


_NO_HANDLERS: dict[str, tuple[_Handler[Any], ...]] = dict.fromkeys(METHOD_BY_TYPE.values(), ())


class EventDispatcher:
    """Delivers events to one run's listeners, in registration order, isolating failures."""

    def __init__(self, listeners: Sequence[object]) -> None:
        self.listeners = tuple(listeners)
        if not self.listeners:
            self._handlers = _NO_HANDLERS
            return
        self._handlers = {
            method: tuple(
                _Handler(listener, getattr(listener, method))
                for listener in listeners
                if _overrides(listener, method)
            )
            for method in METHOD_BY_TYPE.values()
        }

    def wants(self, method: str) -> bool:
        """Whether any listener handles `method` (lets callers skip building events)."""
        return bool(self._handlers[method])

    async def emit(self, event: Event) -> None:
        """Call every handler of the event's type; exceptions are logged, not raised."""
        method = METHOD_BY_TYPE[event.type]
        handlers = self._handlers[method]
        if not handlers:
            return
        for handler in handlers:
            try:
                await call_user_code(handler.fn, event, is_async=handler.is_async)
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
