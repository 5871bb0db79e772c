"""`EnsembleListener`, `QueuedListener` and the per-run dispatcher that calls listeners safely."""

from __future__ import annotations

import contextlib
import functools
import inspect
import itertools
from collections.abc import AsyncIterator, Awaitable, Callable, Generator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, TypeAlias, TypeGuard, TypeVar

from agentensemble._calling import NOTHING, call_user_code, is_awaitable
from agentensemble._checks import unknown_methods
from agentensemble._logging import get_logger
from agentensemble.errors import ValidationError
from agentensemble.observability._lane import SyncLane, finish_on_loop

if TYPE_CHECKING:
    import asyncio

    from agentensemble.observability._events import (
        DelegationCompletedEvent,
        DelegationFailedEvent,
        DelegationStartedEvent,
        EnsembleCompletedEvent,
        EnsembleStartedEvent,
        Event,
        GraphStateCompletedEvent,
        GuardrailCheckedEvent,
        LlmIterationCompletedEvent,
        LlmIterationStartedEvent,
        LoopIterationCompletedEvent,
        MemoryOperationEvent,
        ReviewDecidedEvent,
        ReviewRequestedEvent,
        ReviewTimedOutEvent,
        RunWarningEvent,
        TaskCompleteEvent,
        TaskFailedEvent,
        TaskInputEvent,
        TaskStartEvent,
        TokenEvent,
        ToolCallEvent,
    )
    from agentensemble.observability._trace_fold import TraceFold

__all__ = [
    "CALLBACK_NAMES",
    "Callback",
    "EnsembleListener",
    "EventDispatcher",
    "QueuedListener",
    "callback_listener",
    "check_listeners",
]

logger = get_logger("agentensemble.listeners")

E = TypeVar("E")
Callback: TypeAlias = Callable[[E], Any | Awaitable[Any]]
"""A sync or async function receiving one event."""


class EnsembleListener:
    """Subclass and override the methods you need; each may be sync or async.

    Order for one agent task: task start, task input, then per model call LLM iteration
    started/completed (tokens in between when streaming), tool calls, then task complete or
    failed. `on_event` receives every event, after the event's own method. A listener whose
    methods are all sync is called on the run's listener lane: one worker thread, one event
    at a time, in `seq` order; the run does not wait for it (unless it falls 10,000 events
    behind) and every event is handled before the run returns. Async methods (and every
    method of a listener that has one) are awaited on the event loop. A listener that raises
    is logged and never disturbs the run or the other listeners. Listeners belong to one
    ensemble (or one run, through `RunOptions`); wrap a slow one in `QueuedListener` so
    that it never holds a run up.

    A listener with a `handlers` mapping (event class -> ``handler(listener, event)``) is
    also fed like the run's own folds: synchronously as each event is emitted, in `seq`
    order, before any listener method. Such handlers must be instant and must not raise
    (the web dashboard's listener only appends to a queue there).
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

    def on_review_requested(self, event: ReviewRequestedEvent) -> Any:
        """A review is waiting for a decision."""

    def on_review_decided(self, event: ReviewDecidedEvent) -> Any:
        """A reviewer decided."""

    def on_review_timed_out(self, event: ReviewTimedOutEvent) -> Any:
        """A review got no decision in time."""

    def on_memory_operation(self, event: MemoryOperationEvent) -> Any:
        """A task read or wrote memory."""

    def on_guardrail_checked(self, event: GuardrailCheckedEvent) -> Any:
        """A guardrail checked a task's input or output."""

    def on_loop_iteration_completed(self, event: LoopIterationCompletedEvent) -> Any:
        """An iteration of a loop completed."""

    def on_graph_state_completed(self, event: GraphStateCompletedEvent) -> Any:
        """A graph state ran."""

    def on_run_warning(self, event: RunWarningEvent) -> Any:
        """Something about the run to know, though it did not fail it."""

    def on_event(self, event: Event) -> Any:
        """Any event (called after the event's own method)."""


_CATCH_ALL = "on_event"


class _Tables(NamedTuple):
    """What the dispatcher looks up by kind of event, made from the event classes."""

    method_by_class: dict[type[Any], str]
    """Listener method for each kind of event (declared on the event class)."""
    methods_by_class: dict[type[Any], tuple[str, ...]]
    """Every method called for each kind of event: its listener method, and ``on_<type>``
    (named after the event's `type`, ``on_task_completed`` say) where that differs."""
    listener_methods: frozenset[str]
    """Every method a listener may define."""
    no_handlers: dict[type[Any], tuple[_Handler, ...]]
    no_plans: dict[type[Any], tuple[tuple[_Handler, ...], tuple[_Handler, ...]]]


@functools.cache
def _tables() -> _Tables:
    """Built when first needed (a listener is checked, a run starts): the event classes load
    then, not with ``import agentensemble``."""
    from agentensemble.observability._events import EVENT_TYPES

    methods = {
        kind: tuple(
            dict.fromkeys((kind.listener_method, f"on_{kind.__dataclass_fields__['type'].default}"))
        )
        for kind in EVENT_TYPES
    }
    return _Tables(
        method_by_class={kind: kind.listener_method for kind in EVENT_TYPES},
        methods_by_class=methods,
        listener_methods=frozenset((*(m for ms in methods.values() for m in ms), _CATCH_ALL)),
        no_handlers=dict.fromkeys(EVENT_TYPES, ()),
        no_plans=dict.fromkeys(EVENT_TYPES, ((), ())),
    )


@functools.cache
def _trace_fold_class() -> type[TraceFold]:
    """`TraceFold`, loaded with the first run (a function-level import costs 0.4 µs a run)."""
    from agentensemble.observability._trace_fold import TraceFold

    return TraceFold


def _token_event() -> type[TokenEvent]:
    from agentensemble.observability._events import TokenEvent

    return TokenEvent


def listener_methods() -> frozenset[str]:
    """Every method a listener may define."""
    return _tables().listener_methods


CALLBACK_NAMES = (
    "on_task_start",
    "on_task_complete",
    "on_task_failed",
    "on_tool_call",
    "on_token",
    "on_delegation_started",
    "on_delegation_completed",
    "on_delegation_failed",
)
"""The keyword callbacks an `Ensemble` accepts."""


class QueuedListener:
    """Delivers events to `listener` from a bounded queue of its own, so that a slow
    listener (a dashboard, a network publisher) never holds a run up.

    Events reach the listener in order. When `max_pending` events wait, new ones are
    dropped and counted (logged once per run, and in a summary when the run ends). When a
    run ends, the queue gets `drain_timeout` seconds to empty; what is left is dropped.
    """

    def __init__(
        self, listener: object, *, max_pending: int = 1000, drain_timeout: float = 5.0
    ) -> None:
        check_listeners([listener], field="QueuedListener listener")
        if isinstance(max_pending, bool) or not isinstance(max_pending, int) or max_pending <= 0:
            raise ValidationError(f"QueuedListener max_pending must be > 0, got: {max_pending!r}")
        if not isinstance(drain_timeout, (int, float)) or drain_timeout < 0:
            raise ValidationError(
                f"QueuedListener drain_timeout must be >= 0 seconds, got: {drain_timeout!r}"
            )
        self.listener = listener
        self.max_pending = max_pending
        self.drain_timeout = float(drain_timeout)

    def __repr__(self) -> str:
        return f"QueuedListener({self.listener!r}, max_pending={self.max_pending})"


def callback_listener(**callbacks: Callable[[Any], Any] | None) -> object | None:
    """A listener calling the given keyword callbacks (``on_task_start=fn`` ...), or None."""
    chosen = {name: fn for name, fn in callbacks.items() if fn is not None}
    if not chosen:
        return None
    unknown = set(chosen) - listener_methods()
    if unknown:
        raise ValueError(f"Unknown listener callback: {', '.join(sorted(unknown))}")
    return _Callbacks(chosen)


class _Callbacks:
    """The keyword callbacks of an ensemble, looked up by method name."""

    def __init__(self, callbacks: dict[str, Callable[[Any], Any]]) -> None:
        self.callbacks = callbacks

    def __repr__(self) -> str:
        return f"callbacks({', '.join(self.callbacks)})"


def check_listeners(listeners: Sequence[object], *, field: str) -> None:
    """Reject objects that handle no event, ``on_*`` methods that no event calls (a
    misspelt method would silently never run), and two methods for one kind of event."""
    for index, listener in enumerate(listeners):
        target = listener.listener if isinstance(listener, QueuedListener) else listener
        known = listener_methods()
        misspelt = unknown_methods(target, "on_", known)
        if misspelt:
            raise ValidationError(
                f"{field}[{index}] defines {', '.join(misspelt)}, which no event calls"
                f"{_did_you_mean(misspelt)} (known: {', '.join(sorted(known))}), "
                f"got: {listener!r}"
            )
        handled = _handled_methods(target)
        if not handled:
            raise ValidationError(
                f"{field}[{index}] must be a listener with at least one of "
                f"{', '.join(sorted(known))}, got: {listener!r}"
            )
        for methods in _tables().methods_by_class.values():
            if len(both := [name for name in methods if name in handled]) > 1:
                raise ValidationError(
                    f"{field}[{index}] defines {' and '.join(both)}, which receive the same "
                    f"events: keep one, got: {listener!r}"
                )


def _did_you_mean(names: Sequence[str]) -> str:
    """The known methods closest to misspelt ones (``on_task_compelte`` ->
    ``on_task_complete``)."""
    import difflib

    meant = [
        f"{name} -> {close[0]}"
        for name in names
        if (close := difflib.get_close_matches(name, listener_methods(), n=1))
    ]
    return f"; did you mean {', '.join(meant)}?" if meant else ""


def _handled_methods(listener: object) -> list[str]:
    if isinstance(listener, _Callbacks):
        return list(listener.callbacks)
    return [name for name in listener_methods() if _overrides(listener, name)]


def _overrides(listener: object, name: str) -> bool:
    """Whether the listener's class really handles `name` (the base class's no-ops don't)."""
    method = getattr(type(listener), name, None)
    return callable(method) and method is not getattr(EnsembleListener, name, None)


class _Handler:
    """One listener method, and what went wrong with it during this run."""

    __slots__ = ("failures", "fn", "is_async", "method", "owner", "queue")

    def __init__(self, owner: object, method: str, fn: Callable[[Any], Any]) -> None:
        self.owner = owner
        self.method = method
        self.fn = fn
        self.is_async = inspect.iscoroutinefunction(fn)
        self.failures = 0
        self.queue: _Queue | None = None

    async def call(self, event: Event) -> None:
        try:
            await call_user_code(self.fn, event, is_async=self.is_async)
        except Exception:
            self._failed()

    def call_sync(self, event: Event, loop: asyncio.AbstractEventLoop) -> None:
        """Call a sync method on the run's listener lane (a worker thread)."""
        try:
            result = self.fn(event)
            if is_awaitable(result):
                finish_on_loop(result, loop)
        except BaseException:  # even SystemExit: the lane's thread must go on
            self._failed()

    def _failed(self) -> None:
        self.failures += 1
        if self.failures == 1:
            logger.warning(
                "Listener %s raised in %s; the run continues (further failures of this "
                "method are counted, not logged)",
                _name(self.owner),
                self.method,
                exc_info=True,
            )


def _name(owner: object) -> str:
    return type(owner).__name__


class _Queue:
    """One run's queue in front of one `QueuedListener`."""

    def __init__(self, config: QueuedListener) -> None:
        import asyncio

        self.config = config
        self.items: asyncio.Queue[tuple[_Handler, Event]] = asyncio.Queue(config.max_pending)
        self.dropped = 0

    def offer(self, handler: _Handler, event: Event) -> None:
        import asyncio

        try:
            self.items.put_nowait((handler, event))
        except asyncio.QueueFull:
            self.dropped += 1
            if self.dropped == 1:
                logger.warning(
                    "%r is full; dropping events until it catches up", self.config.listener
                )

    async def deliver(self) -> None:
        while True:
            handler, event = await self.items.get()
            try:
                await handler.call(event)
            finally:
                self.items.task_done()

    async def drain(self) -> None:
        import asyncio

        try:
            async with asyncio.timeout(self.config.drain_timeout):
                await self.items.join()
        except TimeoutError:
            self.dropped += self.items.qsize()


def _delivery_plans(
    by_kind: dict[type[Any], tuple[_Handler, ...]], bound: Sequence[dict[str, _Handler]]
) -> dict[type[Any], tuple[tuple[_Handler, ...], tuple[_Handler, ...]]]:
    """For each kind of event: the methods called on the lane, and those awaited or queued."""
    laned = {
        id(handler) for handlers in bound if _all_sync(handlers) for handler in handlers.values()
    }
    return {
        kind: (
            tuple(handler for handler in handlers if id(handler) in laned),
            tuple(handler for handler in handlers if id(handler) not in laned),
        )
        for kind, handlers in by_kind.items()
    }


def _all_sync(handlers: dict[str, _Handler]) -> bool:
    """Whether a listener goes on the run's lane: all its methods sync, and not queued."""
    return bool(handlers) and all(
        not handler.is_async and handler.queue is None for handler in handlers.values()
    )


class _Delivered:
    """An awaitable that is already done: an event nobody listens to."""

    __slots__ = ()

    if TYPE_CHECKING:

        def __await__(self) -> Generator[None, None, None]: ...

    else:
        # a builtin, not a function: Python calls it without the instance (it does not
        # bind), and awaiting costs no frame and no generator: about 100 ns less per event
        __await__ = ().__iter__


_DELIVERED = _Delivered()


class Fold(Protocol):
    """Something the run's events are folded into (the trace, the logs...), on the event
    loop, before any listener; must not block or raise. `handlers` says what it does with
    each kind of event it takes (``handler(fold, event)``): the dispatcher looks the kind up
    there itself, so a fold costs nothing for the kinds it ignores."""

    @property
    def handlers(self) -> Mapping[type[Any], Callable[[Any, Any], None]]: ...


_IDLE_LANE = SyncLane()
"""The lane of every run without a sync listener: never offered an event, so never started
(shared: a run's own lane is made only when it has sync listeners)."""


class EventDispatcher:
    """Numbers one run's events, feeds them to the run's folds, then delivers them to its
    listeners, isolating failures: a listener whose methods are all sync gets them on the
    run's listener lane (one thread, in event order, see `SyncLane`); the others are awaited
    in registration order, and queued listeners get their own queue."""

    def __init__(self, listeners: Sequence[object], folds: Sequence[Fold] = ()) -> None:
        self.listeners = tuple(listeners)
        self.trace = _trace_fold_class()()
        """The run's trace, folded from its events as they are emitted (the first fold)."""
        if self.listeners:
            folds = (*folds, *(listener for listener in self.listeners if _is_fold(listener)))
        self._folds: tuple[tuple[Fold, Mapping[type[Any], Callable[[Any, Any], None]]], ...] = (
            (self.trace, self.trace.handlers),
            *[(fold, fold.handlers) for fold in folds],
        )
        # the counter's own method, not a method calling it: every event takes a number
        self.next_seq: Callable[[], int] = itertools.count(1).__next__
        """The `seq` of the run's next event (1, 2, 3 ...)."""
        self._queues: list[_Queue] = []
        self._bound: list[dict[str, _Handler]] = []
        self._lane = _IDLE_LANE
        if not self.listeners:
            tables = _tables()
            self._handlers = tables.no_handlers
            self._plans = tables.no_plans
            self._streams_tokens = False
            return
        self._bound = [self._bind(listener) for listener in self.listeners]
        self._handlers = {
            kind: tuple(
                handler
                for handlers in self._bound
                for name in (*methods, _CATCH_ALL)
                if (handler := handlers.get(name)) is not None
            )
            for kind, methods in _tables().methods_by_class.items()
        }
        self._plans = _delivery_plans(self._handlers, self._bound)
        if any(laned for laned, _ in self._plans.values()):
            self._lane = SyncLane()
        self._streams_tokens = any(
            handler.method == "on_token" for handler in self._handlers[_token_event()]
        )

    def continue_after(self, seq: int) -> None:
        """Number this run's events from ``seq + 1`` (a resumed run goes on from the run it
        resumes, so one run id never has two events with one `seq`)."""
        self.next_seq = itertools.count(seq + 1).__next__

    def _bind(self, listener: object) -> dict[str, _Handler]:
        """One handler per method the listener defines (so `on_event` is one handler, with
        one failure count, whatever the event type)."""
        queued = listener if isinstance(listener, QueuedListener) else None
        target = queued.listener if queued else listener
        handlers = {
            name: _Handler(target, name, _lookup(target, name)) for name in _handled_methods(target)
        }
        if queued is not None and handlers:
            queue = _Queue(queued)
            self._queues.append(queue)
            for handler in handlers.values():
                handler.queue = queue
        return handlers

    @property
    def streams_tokens(self) -> bool:
        """Whether a listener asked for tokens by name (``on_token``): only then are answers
        streamed; a catch-all ``on_event`` then receives the tokens too."""
        return self._streams_tokens

    def wants(self, kind: type[Any]) -> bool:
        """Whether any listener handles events of class `kind`."""
        return bool(self._handlers[kind])

    def emit(self, event: Event) -> Awaitable[None]:
        """Fold the event into the run's record now; await the result to deliver it to the
        listeners (nothing to wait for when no listener handles its kind, or when only sync
        listeners do and their lane has room)."""
        self.record(event)
        laned, awaited = self._plans[type(event)]
        if awaited:
            return self.deliver(event)
        if laned and self._lane.put(laned, event):
            return self._lane.room()
        return _DELIVERED

    def record(self, event: Event) -> None:
        """Feed the event to the run's folds (the trace, the logs...)."""
        kind = type(event)
        for fold, handlers in self._folds:
            handler = handlers.get(kind)
            if handler is not None:
                handler(fold, event)

    async def deliver(self, event: Event) -> None:
        """Call every listener method for the event's class; exceptions are logged, not
        raised."""
        laned, awaited = self._plans[type(event)]
        if laned and self._lane.put(laned, event):
            await self._lane.room()
        for handler in awaited:
            if handler.queue is not None:
                handler.queue.offer(handler, event)
            else:
                await handler.call(event)

    @property
    def draining(self) -> bool:
        """Whether sync listeners have events to finish (the lane is running)."""
        return self._lane.running

    def abandon(self) -> None:
        """Stop waiting for the sync listeners: they finish the events queued so far on
        their own thread (a cancelled run)."""
        self._lane.abandon()

    async def drain(self) -> None:
        """Wait until the sync listeners have handled every event (the run's end calls it,
        within the run's deadline; cancelling the wait leaves them to finish alone)."""
        await self._lane.close()

    def open(self) -> contextlib.AbstractAsyncContextManager[None]:
        """For the span of a run (``async with dispatcher.open():``): run the queued
        listeners' deliveries, then drain them (each within its `drain_timeout`), and report
        listener failures and dropped events."""
        if not self._queues and self.listeners:
            return _Reporting(self)
        if not self._queues:
            return NOTHING
        return self._serving()

    @contextlib.asynccontextmanager
    async def _serving(self) -> AsyncIterator[None]:
        # Plain tasks, not a TaskGroup: a TaskGroup would wrap the run's own error in an
        # ExceptionGroup. The workers never raise; they are always cancelled and awaited.
        import asyncio

        workers = [asyncio.create_task(queue.deliver()) for queue in self._queues]
        try:
            yield
        finally:
            try:
                await _drain_all(self._queues)
            finally:
                for worker in workers:
                    worker.cancel()
                await asyncio.wait(workers)
                self.report()

    def report(self) -> None:
        """Log listener failures beyond the first, and events dropped by full queues."""
        for handlers in self._bound:
            for handler in handlers.values():
                if handler.failures > 1:
                    logger.warning(
                        "Listener %s raised %d times in %s during this run",
                        _name(handler.owner),
                        handler.failures,
                        handler.method,
                    )
        for queue in self._queues:
            if queue.dropped:
                logger.warning(
                    "%r dropped %d events during this run", queue.config.listener, queue.dropped
                )


class _Reporting(contextlib.AbstractAsyncContextManager[None]):
    """A run without queued listeners: only the failure report at the end."""

    def __init__(self, dispatcher: EventDispatcher) -> None:
        self.dispatcher = dispatcher

    async def __aexit__(self, *exc: object) -> None:
        self.dispatcher.report()


async def _drain_all(queues: Sequence[_Queue]) -> None:
    """Every queue drains at once, each within its own `drain_timeout`."""
    import asyncio

    async with asyncio.TaskGroup() as group:
        for queue in queues:
            group.create_task(queue.drain())


def _is_fold(listener: object) -> TypeGuard[Fold]:
    """Whether a listener is also fed as a fold: it has a `handlers` mapping (event class ->
    ``handler(listener, event)``), called as each event is emitted, in `seq` order."""
    return isinstance(getattr(listener, "handlers", None), Mapping)


def _lookup(listener: object, name: str) -> Callable[[Any], Any]:
    if isinstance(listener, _Callbacks):
        return listener.callbacks[name]
    method: Callable[[Any], Any] = getattr(listener, name)
    return method
