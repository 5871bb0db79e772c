"""The run's record: one closed union of small frozen dataclasses, plain data only.

Every fact of a run is one event, emitted once by the engine: ids, texts, numbers, and the
data forms of outputs and errors, never live objects. The `type` strings are the wire names
of the dashboard protocol and are part of the public API. Every event carries `ensemble_id`
(the run id), `seq` (1, 2, 3 ... per run, over every event) and `timestamp` (UTC); task-scoped
events also carry `task_id` (unique per task execution in the run, delegated workers
included), `parent_task_id` (the delegating task's id, else None), `task_index`,
`task_description` and `agent_role`.

`serialize_event` / `parse_event` (in `agentensemble.observability`) write and read every
event through one pydantic adapter; the trace, metrics, logs, the console and OpenTelemetry
are folds over these events. A new kind of event is one dataclass here, added to `Event`:
its `type`, its listener method (`listener_method`) and, when the protocol names its instant
otherwise, `wire_time`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal, TypeAlias, TypeVar

from agentensemble._frozen import direct_init, direct_maker
from agentensemble.models import Message, ToolCall
from agentensemble.observability._cost import CostConfiguration

if TYPE_CHECKING:  # named only in annotations: `event_adapter` resolves them when it builds
    from agentensemble.observability._trace import (
        AgentSummary,
        ErrorTrace,
        LlmInteraction,
        MapReduceLevelSummary,
        TaskTrace,
    )

__all__ = [
    "DelegationCompletedEvent",
    "DelegationFailedEvent",
    "DelegationStartedEvent",
    "EnsembleCompletedEvent",
    "EnsembleStartedEvent",
    "Event",
    "EventBase",
    "GraphStateCompletedEvent",
    "GuardrailCheckedEvent",
    "LlmIterationCompletedEvent",
    "LlmIterationStartedEvent",
    "LoopIterationCompletedEvent",
    "MemoryOperationEvent",
    "PlanNode",
    "ReviewDecidedEvent",
    "ReviewRequestedEvent",
    "ReviewTimedOutEvent",
    "RunWarningEvent",
    "TaskCompleteEvent",
    "TaskEvent",
    "TaskFailedEvent",
    "TaskIds",
    "TaskInputEvent",
    "TaskStartEvent",
    "TokenEvent",
    "ToolCallEvent",
    "task_event_maker",
    "task_id_fields",
    "task_ids",
]


def _now() -> datetime:
    return datetime.now(UTC)


def _wire_messages(messages: tuple[Message, ...]) -> list[dict[str, Any]]:
    from agentensemble.observability._wire import messages_to_wire

    return messages_to_wire(messages)


def _read_messages(value: Any) -> Any:
    from agentensemble.observability._wire import messages_from_wire

    return messages_from_wire(value)


class _Lazy:
    """Pydantic metadata built on first use, so importing the events imports no pydantic."""

    def __init__(self, serializer: Any, validator: Any) -> None:
        self.serializer, self.validator = serializer, validator

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> Any:
        from pydantic_core import core_schema

        return core_schema.no_info_before_validator_function(
            self.validator,
            handler(source),
            serialization=core_schema.plain_serializer_function_ser_schema(
                self.serializer, when_used="json"
            ),
        )


_DURATIONS = frozenset({"duration", "latency", "timeout", "prompt_build_time"})


def _wire_config(renamed: Mapping[str, str]) -> dict[str, Any]:
    """Pydantic settings of an event class (a plain dict: no pydantic import here)."""
    return {"alias_generator": _wire_names(renamed), "populate_by_name": True}


def _wire_names(renamed: Mapping[str, str]) -> Callable[[str], str]:
    def wire_name(name: str) -> str:
        if name in renamed:
            return renamed[name]
        head, *rest = name.split("_")
        camel = head + "".join(part.title() for part in rest)
        return f"{camel}Ms" if name in _DURATIONS else camel

    return wire_name


def _millis(duration: timedelta) -> float:
    return duration / timedelta(milliseconds=1)


def _from_millis(value: Any) -> Any:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return timedelta(milliseconds=value)
    return value


Millis = Annotated[timedelta, _Lazy(_millis, _from_millis)]
"""A duration: a `timedelta` in Python, milliseconds on the wire (as ``...Ms``)."""

WireMessages = Annotated[tuple[Message, ...], _Lazy(_wire_messages, _read_messages)]
"""A conversation: the model's messages in Python, ``{role, content, ...}`` on the wire."""


@dataclass(frozen=True, slots=True, kw_only=True)
class EventBase:
    """What every event carries."""

    listener_method: ClassVar[str] = "on_event"
    """The `EnsembleListener` method called with this kind of event."""
    wire_names: ClassVar[Mapping[str, str]] = {}
    """Fields whose wire name is not their camelCase name (the protocol calls some
    instants ``startedAt``...). A duration's wire name ends in ``Ms``."""

    def __init_subclass__(cls) -> None:
        # no super() call: a slots dataclass is a new class without the __class__ cell
        cls.__pydantic_config__ = _wire_config(cls.wire_names)  # type: ignore[attr-defined]

    ensemble_id: str = ""
    """The run this event belongs to."""
    seq: int = 0
    """The event's place in its run: 1, 2, 3 ... over every event of the run."""
    timestamp: datetime = field(default_factory=_now)
    """When the event happened (UTC)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskEvent(EventBase):
    """What every task-scoped event carries."""

    task_id: str = ""
    """The task execution this event belongs to."""
    parent_task_id: str | None = None
    """The delegating task's id when the task runs by delegation, else None."""
    task_index: int = 0
    """1-based, unique within the run (a delegated worker has its caller's)."""
    task_description: str = ""
    agent_role: str = ""


TaskIds: TypeAlias = tuple[str, str, str | None, int, str, str]
"""The ids every event of one task execution carries (`TaskEvent`'s fields, in
`TASK_ID_FIELDS` order). A plain tuple, not a named one: the garbage collector stops
walking a plain tuple of strings and numbers, and every running task holds one."""

TASK_ID_FIELDS = (
    "ensemble_id",
    "task_id",
    "parent_task_id",
    "task_index",
    "task_description",
    "agent_role",
)


def task_ids(
    *,
    ensemble_id: str,
    task_id: str,
    parent_task_id: str | None,
    task_index: int,
    task_description: str,
    agent_role: str,
) -> TaskIds:
    """A task's `TaskIds`, by name (the one place that knows their order)."""
    return (ensemble_id, task_id, parent_task_id, task_index, task_description, agent_role)


def task_id_fields(ids: TaskIds) -> dict[str, Any]:
    """`TaskIds` as the `TaskEvent` fields they are."""
    return dict(zip(TASK_ID_FIELDS, ids, strict=True))


AnyTaskEvent = TypeVar("AnyTaskEvent", bound=TaskEvent)


def task_event_maker(kind: type[AnyTaskEvent]) -> Callable[..., AnyTaskEvent]:
    """The engine's constructor of a task's events of class `kind`:
    ``make(ids, seq, timestamp, **fields)``, with the task's `TaskIds` and the event's own
    fields by keyword (made at its first use, see `direct_maker`: a task emits several
    events, and building each is a good part of the engine's cost per task)."""
    # kept on the class with the class it was made for: a subclass inherits the attribute
    # but needs its own maker (getattr, because `vars(kind)` builds a proxy at every event)
    made: tuple[type[Any], Callable[..., AnyTaskEvent]] | None = getattr(
        kind, "__task_event_maker__", None
    )
    if made is not None and made[0] is kind:
        return made[1]
    maker = direct_maker(kind, TASK_ID_FIELDS, ("seq", "timestamp"))
    setattr(kind, "__task_event_maker__", (kind, maker))  # noqa: B010  (a class attribute)
    return maker


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanNode:
    """A planned task, as the run's start announces it (what a flow graph draws)."""

    task_index: int
    description: str
    agent_role: str
    name: str | None = None
    depends_on: tuple[int, ...] = ()
    """The `task_index` of each task whose output this one waits for (its `context`, and
    for a SEQUENTIAL run the task before it)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class EnsembleStartedEvent(EventBase):
    """A run started (after validation and planning, before the first task)."""

    listener_method: ClassVar[str] = "on_ensemble_started"
    wire_names: ClassVar[Mapping[str, str]] = {"timestamp": "startedAt"}

    workflow: str
    """``SEQUENTIAL``, ``PARALLEL``, ``HIERARCHICAL``, ``PHASES`` or a map-reduce mode."""
    total_tasks: int
    name: str | None = None
    """The ensemble's name, if it has one."""
    capture_mode: str = "OFF"
    inputs: dict[str, str] = field(default_factory=dict)
    """The run's template inputs."""
    cost_configuration: CostConfiguration | None = None
    plan: tuple[PlanNode, ...] = ()
    """The planned tasks and what each waits for (tasks planned later, such as adaptive
    map-reduce levels, are not in it). Only listeners read it: a run that no listener of
    this event hears leaves it empty instead of building a node per task."""
    type: Literal["ensemble_started"] = field(default="ensemble_started", init=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class EnsembleCompletedEvent(EventBase):
    """A run ended. `exit_reason` is ``ERROR`` (and `reason` says why) when it raised."""

    listener_method: ClassVar[str] = "on_ensemble_completed"
    wire_names: ClassVar[Mapping[str, str]] = {"timestamp": "completedAt"}

    duration: Millis
    exit_reason: str
    error_type: str | None = None
    """The error's class name when the run raised."""
    reason: str | None = None
    """The error's message when the run raised."""
    total_tokens: int = -1
    """Tokens over every completed task (-1 when any count is unknown)."""
    total_tool_calls: int = 0
    """Tool calls executed over every completed task."""
    output_task_ids: tuple[str, ...] = ()
    """The run's outputs, as task ids, in the order of `EnsembleOutput.task_outputs`."""
    agents: tuple[AgentSummary, ...] = ()
    """Every agent that took part."""
    errors: tuple[ErrorTrace, ...] = ()
    """The failures of a failed run, and those a run went on without."""
    agent_synthesis: tuple[LlmInteraction, ...] = ()
    """Model calls made while planning (to synthesise agents), of the whole run."""
    map_reduce_levels: tuple[MapReduceLevelSummary, ...] = ()
    type: Literal["ensemble_completed"] = field(default="ensemble_completed", init=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskStartEvent(TaskEvent):
    """A task is about to run."""

    listener_method: ClassVar[str] = "on_task_start"
    wire_names: ClassVar[Mapping[str, str]] = {"timestamp": "startedAt"}

    total_tasks: int
    expected_output: str = ""
    name: str | None = None
    """The task's `name`, when it has one."""
    node_type: str | None = None
    """In a `MapReduceEnsemble` run: ``map``, ``reduce``, ``final-reduce`` or ``direct``."""
    map_reduce_level: int | None = None
    """In a `MapReduceEnsemble` run: the task's level (0 for the map tasks)."""
    type: Literal["task_started"] = field(default="task_started", init=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskInputEvent(TaskEvent):
    """What an agent task is given: its prompts, agent and tools (after the start)."""

    listener_method: ClassVar[str] = "on_task_input"
    wire_names: ClassVar[Mapping[str, str]] = {
        "timestamp": "sentAt",
        "user_prompt": "assembledContext",
    }

    expected_output: str
    agent_goal: str
    agent_background: str | None = None
    tool_names: tuple[str, ...] = ()
    system_prompt: str
    user_prompt: str
    """The user prompt (``assembledContext`` on the wire)."""
    prompt_build_time: Millis = timedelta(0)
    type: Literal["task_input"] = field(default="task_input", init=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskCompleteEvent(TaskEvent):
    """A task finished successfully: its answer, as data."""

    listener_method: ClassVar[str] = "on_task_complete"
    wire_names: ClassVar[Mapping[str, str]] = {"timestamp": "completedAt"}

    total_tasks: int
    duration: Millis
    raw: str
    """The final answer text."""
    parsed_output: Any = None
    """The structured result as JSON data (None without an ``output_type``)."""
    tool_call_count: int = 0
    """Tool calls executed."""
    input_tokens: int = -1
    output_tokens: int = -1
    token_count: int = -1
    """Tokens of the task's model calls (each -1 when any count is unknown)."""
    restored_trace: TaskTrace | None = None
    """In a resumed run, a task whose output came from the run's checkpoint: the trace of
    the execution that produced it (its model calls, tokens and tools). None otherwise."""
    type: Literal["task_completed"] = field(default="task_completed", init=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskFailedEvent(TaskEvent):
    """A task failed, was cancelled or was ended early."""

    listener_method: ClassVar[str] = "on_task_failed"
    wire_names: ClassVar[Mapping[str, str]] = {"timestamp": "failedAt"}

    total_tasks: int
    duration: Millis
    error_type: str
    """The exception's class name (``CancelledError`` when the task was cancelled)."""
    reason: str
    """The exception's message, or its class name when it has none."""
    type: Literal["task_failed"] = field(default="task_failed", init=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class LlmIterationStartedEvent(TaskEvent):
    """A model call is about to be made. `iteration_index` is 0-based within the task."""

    listener_method: ClassVar[str] = "on_llm_iteration_started"

    iteration_index: int
    messages: WireMessages
    model_name: str = ""
    type: Literal["llm_iteration_started"] = field(default="llm_iteration_started", init=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class LlmIterationCompletedEvent(TaskEvent):
    """A model call returned. Token counts are -1 when the provider reported none."""

    listener_method: ClassVar[str] = "on_llm_iteration_completed"

    iteration_index: int
    response_type: Literal["TOOL_CALLS", "FINAL_ANSWER"]
    response_text: str | None = None
    tool_requests: tuple[ToolCall, ...] = ()
    input_tokens: int = -1
    output_tokens: int = -1
    latency: Millis
    model_name: str = ""
    type: Literal["llm_iteration_completed"] = field(default="llm_iteration_completed", init=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallEvent(TaskEvent):
    """A tool call finished (or was answered with a STOP: ``SKIPPED_MAX_ITERATIONS``).
    `tool_result` is the full text, never truncated."""

    listener_method: ClassVar[str] = "on_tool_call"

    tool_name: str
    tool_arguments: str
    tool_result: str
    structured_result: Any = None
    """The tool's structured output as JSON data."""
    duration: Millis
    outcome: Literal["SUCCESS", "FAILURE", "SKIPPED_MAX_ITERATIONS"]
    tool_call_id: str = ""
    type: Literal["tool_called"] = field(default="tool_called", init=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class TokenEvent(TaskEvent):
    """A piece of a streamed answer. The pieces of one model call concatenate to its text."""

    listener_method: ClassVar[str] = "on_token"
    wire_names: ClassVar[Mapping[str, str]] = {"timestamp": "sentAt"}

    token: str
    type: Literal["token"] = field(default="token", init=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class DelegationStartedEvent(EventBase):
    """An agent handed a subtask to another agent; `task_id` is the delegating task's (the
    worker's task events have it as `parent_task_id`, and `delegation_id` as `task_id`)."""

    listener_method: ClassVar[str] = "on_delegation_started"

    task_id: str = ""
    delegation_id: str
    delegating_agent_role: str
    worker_role: str
    task_description: str
    delegation_depth: int
    tool_call_id: str | None = None
    """The tool call that asked for the delegation (None when made outside a tool call)."""
    priority: str = "NORMAL"
    scope: dict[str, Any] = field(default_factory=dict)
    """The request's scope, as JSON data."""
    expected_output_schema: str | None = None
    type: Literal["delegation_started"] = field(default="delegation_started", init=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class DelegationCompletedEvent(EventBase):
    """A delegated subtask completed: the worker's response, as data."""

    listener_method: ClassVar[str] = "on_delegation_completed"

    task_id: str = ""
    delegation_id: str
    delegating_agent_role: str
    worker_role: str
    duration: Millis
    status: str = "SUCCESS"
    raw_output: str | None = None
    parsed_output: Any = None
    """The worker's structured result as JSON data."""
    type: Literal["delegation_completed"] = field(default="delegation_completed", init=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class DelegationFailedEvent(EventBase):
    """A delegation was refused (`error_type` None) or the worker failed."""

    listener_method: ClassVar[str] = "on_delegation_failed"
    wire_names: ClassVar[Mapping[str, str]] = {"failure_reason": "reason"}

    task_id: str = ""
    delegation_id: str
    delegating_agent_role: str
    worker_role: str
    failure_reason: str
    """The text the delegating model is shown."""
    task_description: str = ""
    """The subtask asked for (a refused delegation has no `delegation_started`)."""
    error_type: str | None = None
    """The worker's exception class name (None when the delegation was refused)."""
    status: str = "FAILURE"
    errors: tuple[str, ...] = ()
    duration: Millis
    type: Literal["delegation_failed"] = field(default="delegation_failed", init=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class ReviewRequestedEvent(TaskEvent):
    """A review gate (or a tool asking for approval or input) is waiting for a decision."""

    listener_method: ClassVar[str] = "on_review_requested"

    review_id: str
    """Unique per review in the run; the decision's event carries it too."""
    task_output: str | None = None
    """What is under review (None before a task starts)."""
    timing: str
    """``BEFORE_EXECUTION``, ``DURING_EXECUTION`` or ``AFTER_EXECUTION``."""
    timeout: Millis
    """How long the run waits (0: forever)."""
    on_timeout: str
    """``CONTINUE``, ``EXIT_EARLY`` or ``FAIL``."""
    prompt: str | None = None
    required_role: str | None = None
    tool_name: str | None = None
    """The tool asking, for reviews during a task."""
    type: Literal["review_requested"] = field(default="review_requested", init=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class ReviewDecidedEvent(TaskEvent):
    """A reviewer decided."""

    listener_method: ClassVar[str] = "on_review_decided"

    review_id: str
    decision: str
    """``CONTINUE``, ``EDIT`` or ``EXIT_EARLY``; ``NONE`` when the review ended without a
    decision (the run or task was cancelled, or the handler failed)."""
    revised_output: str | None = None
    """The edited text, for ``EDIT``."""
    duration: Millis
    """How long the decision took."""
    type: Literal["review_decided"] = field(default="review_decided", init=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class ReviewTimedOutEvent(TaskEvent):
    """Nobody decided in time; `action` (the review's on-timeout action) applies."""

    listener_method: ClassVar[str] = "on_review_timed_out"

    review_id: str
    action: str
    """``CONTINUE``, ``EXIT_EARLY`` or ``FAIL``."""
    duration: Millis
    type: Literal["review_timed_out"] = field(default="review_timed_out", init=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryOperationEvent(TaskEvent):
    """A task read or wrote memory: `operation` is ``retrieve`` or ``store`` (a scope of the
    memory store, or a `MemoryTool` call), ``evict`` (a scope's eviction after a store),
    ``clear``, ``short_term`` (earlier outputs of the run) or ``entity_lookup`` (entity
    facts). `timestamp` is when it finished."""

    listener_method: ClassVar[str] = "on_memory_operation"

    operation: str
    scope: str | None = None
    """The memory scope (None for short-term memory and entity lookups)."""
    entry_count: int
    """Entries found (retrieve, short_term, entity_lookup), stored (1) or evicted."""
    duration: Millis
    type: Literal["memory_operation"] = field(default="memory_operation", init=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class GuardrailCheckedEvent(TaskEvent):
    """A guardrail checked a task's input (before its first model call) or its output."""

    listener_method: ClassVar[str] = "on_guardrail_checked"

    guardrail_type: Literal["INPUT", "OUTPUT"]
    guardrail: str
    """The guardrail's name (its function's qualified name)."""
    passed: bool
    reason: str | None = None
    """Why it failed (None when it passed)."""
    duration: Millis
    type: Literal["guardrail_checked"] = field(default="guardrail_checked", init=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class LoopIterationCompletedEvent(EventBase):
    """An iteration of a `Loop` completed (before its `until` predicate is asked)."""

    listener_method: ClassVar[str] = "on_loop_iteration_completed"

    task_id: str = ""
    """The loop's own task execution (its body tasks have it as `parent_task_id`)."""
    loop_name: str
    iteration: int
    """1-based."""
    max_iterations: int | None
    outputs: dict[str, str] = field(default_factory=dict)
    """Each body task's text this iteration, by body task name (else description)."""
    type: Literal["loop_iteration_completed"] = field(
        default="loop_iteration_completed", init=False
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class GraphStateCompletedEvent(EventBase):
    """A state of a `Graph` ran and the walk chose where to go next."""

    listener_method: ClassVar[str] = "on_graph_state_completed"

    task_id: str = ""
    """The state's task execution."""
    graph_name: str
    state: str
    step: int
    """1-based position in the walk."""
    next_state: str
    """The next state, or ``__END__``."""
    output: str
    """The state's text."""
    type: Literal["graph_state_completed"] = field(default="graph_state_completed", init=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class RunWarningEvent(EventBase):
    """Something a user should know about the run though it did not fail it (the manager of
    a hierarchical run delegated nothing, say). Logged, and kept in the trace's `warnings`."""

    listener_method: ClassVar[str] = "on_run_warning"

    code: str
    """A stable name for the kind of warning: ``manager_delegated_nothing``."""
    message: str
    type: Literal["run_warning"] = field(default="run_warning", init=False)


Event = (
    EnsembleStartedEvent
    | EnsembleCompletedEvent
    | TaskStartEvent
    | TaskInputEvent
    | TaskCompleteEvent
    | TaskFailedEvent
    | LlmIterationStartedEvent
    | LlmIterationCompletedEvent
    | ToolCallEvent
    | TokenEvent
    | DelegationStartedEvent
    | DelegationCompletedEvent
    | DelegationFailedEvent
    | ReviewRequestedEvent
    | ReviewDecidedEvent
    | ReviewTimedOutEvent
    | MemoryOperationEvent
    | GuardrailCheckedEvent
    | LoopIterationCompletedEvent
    | GraphStateCompletedEvent
    | RunWarningEvent
)
"""Any event of a run."""

EVENT_TYPES: tuple[type[EventBase], ...] = Event.__args__
"""Every kind of event, in the union's order."""


for _kind in (*EVENT_TYPES, PlanNode):  # built once per fact (a node per task): `direct_init`
    direct_init(_kind)
