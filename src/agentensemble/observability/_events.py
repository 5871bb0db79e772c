"""Lifecycle events: small frozen dataclasses with a literal `type` discriminator.

The `type` strings are part of the public API. Every event carries `ensemble_id` (the run
id) and `timestamp` (when it happened, UTC); every task-scoped event also carries `task_id`
(unique per task execution in the run, delegated workers included) and `parent_task_id` (the
delegating task's id, else None). `serialize_event` turns any event into its wire message.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from agentensemble.models import Message, ToolCall
    from agentensemble.outputs import TaskOutput

__all__ = [
    "DelegationCompletedEvent",
    "DelegationFailedEvent",
    "DelegationStartedEvent",
    "EnsembleCompletedEvent",
    "EnsembleStartedEvent",
    "Event",
    "LlmIterationCompletedEvent",
    "LlmIterationStartedEvent",
    "MemoryOperationEvent",
    "ReviewDecidedEvent",
    "ReviewRequestedEvent",
    "ReviewTimedOutEvent",
    "TaskCompleteEvent",
    "TaskFailedEvent",
    "TaskInputEvent",
    "TaskStartEvent",
    "TokenEvent",
    "ToolCallEvent",
]


def _now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True, slots=True, kw_only=True)
class EnsembleStartedEvent:
    """A run started (after validation and planning, before the first task)."""

    ensemble_id: str
    workflow: str
    """``SEQUENTIAL``, ``PARALLEL`` or ``PHASES``."""
    total_tasks: int
    name: str | None = None
    """The ensemble's name, if it has one."""
    timestamp: datetime = field(default_factory=_now)
    """When the event happened (UTC)."""
    type: Literal["ensemble_started"] = field(default="ensemble_started", init=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class EnsembleCompletedEvent:
    """A run ended. `exit_reason` is ``ERROR`` (and `error` set) when it raised."""

    ensemble_id: str
    duration: timedelta
    exit_reason: str
    error: BaseException | None = None
    total_tokens: int = -1
    """Tokens over every completed task (-1 when any count is unknown)."""
    total_tool_calls: int = 0
    """Tool calls executed over every completed task."""
    timestamp: datetime = field(default_factory=_now)
    """When the event happened (UTC)."""
    type: Literal["ensemble_completed"] = field(default="ensemble_completed", init=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskStartEvent:
    """A task is about to run. `task_index` is 1-based and unique within the run."""

    task_description: str
    agent_role: str
    task_index: int
    total_tasks: int
    ensemble_id: str = ""
    """The run this event belongs to."""
    task_id: str = ""
    """The task execution this event belongs to."""
    parent_task_id: str | None = None
    """The delegating task's id when the task runs by delegation, else None."""
    timestamp: datetime = field(default_factory=_now)
    """When the event happened (UTC)."""
    type: Literal["task_start"] = field(default="task_start", init=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskInputEvent:
    """What an agent task is given: its prompt, agent and tools (fired after the start)."""

    task_index: int
    task_description: str
    expected_output: str
    agent_role: str
    agent_goal: str
    agent_background: str | None
    tool_names: tuple[str, ...]
    system_prompt: str
    user_prompt: str
    ensemble_id: str = ""
    """The run this event belongs to."""
    task_id: str = ""
    """The task execution this event belongs to."""
    parent_task_id: str | None = None
    """The delegating task's id when the task runs by delegation, else None."""
    timestamp: datetime = field(default_factory=_now)
    """When the event happened (UTC)."""
    type: Literal["task_input"] = field(default="task_input", init=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskCompleteEvent:
    """A task finished successfully."""

    task_description: str
    agent_role: str
    task_output: TaskOutput[Any]
    duration: timedelta
    task_index: int
    total_tasks: int
    ensemble_id: str = ""
    """The run this event belongs to."""
    task_id: str = ""
    """The task execution this event belongs to."""
    parent_task_id: str | None = None
    """The delegating task's id when the task runs by delegation, else None."""
    timestamp: datetime = field(default_factory=_now)
    """When the event happened (UTC)."""
    type: Literal["task_complete"] = field(default="task_complete", init=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskFailedEvent:
    """A task failed; `cause` is the exception."""

    task_description: str
    agent_role: str
    cause: BaseException
    duration: timedelta
    task_index: int
    total_tasks: int
    ensemble_id: str = ""
    """The run this event belongs to."""
    task_id: str = ""
    """The task execution this event belongs to."""
    parent_task_id: str | None = None
    """The delegating task's id when the task runs by delegation, else None."""
    timestamp: datetime = field(default_factory=_now)
    """When the event happened (UTC)."""
    type: Literal["task_failed"] = field(default="task_failed", init=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class LlmIterationStartedEvent:
    """A model call is about to be made. `iteration_index` is 0-based within the task."""

    agent_role: str
    task_description: str
    task_index: int
    iteration_index: int
    messages: tuple[Message, ...]
    model_name: str
    ensemble_id: str = ""
    """The run this event belongs to."""
    task_id: str = ""
    """The task execution this event belongs to."""
    parent_task_id: str | None = None
    """The delegating task's id when the task runs by delegation, else None."""
    timestamp: datetime = field(default_factory=_now)
    """When the event happened (UTC)."""
    type: Literal["llm_iteration_started"] = field(default="llm_iteration_started", init=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class LlmIterationCompletedEvent:
    """A model call returned. Token counts are -1 when the provider reported none."""

    agent_role: str
    task_description: str
    task_index: int
    iteration_index: int
    response_type: Literal["TOOL_CALLS", "FINAL_ANSWER"]
    response_text: str | None
    tool_requests: tuple[ToolCall, ...]
    input_tokens: int
    output_tokens: int
    latency: timedelta
    model_name: str
    ensemble_id: str = ""
    """The run this event belongs to."""
    task_id: str = ""
    """The task execution this event belongs to."""
    parent_task_id: str | None = None
    """The delegating task's id when the task runs by delegation, else None."""
    timestamp: datetime = field(default_factory=_now)
    """When the event happened (UTC)."""
    type: Literal["llm_iteration_completed"] = field(default="llm_iteration_completed", init=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallEvent:
    """A tool call finished. `tool_result` is the full text, never truncated."""

    tool_name: str
    tool_arguments: str
    tool_result: str
    structured_result: Any
    agent_role: str
    duration: timedelta
    task_index: int
    outcome: Literal["SUCCESS", "FAILURE"]
    tool_call_id: str = ""
    ensemble_id: str = ""
    """The run this event belongs to."""
    task_id: str = ""
    """The task execution this event belongs to."""
    parent_task_id: str | None = None
    """The delegating task's id when the task runs by delegation, else None."""
    timestamp: datetime = field(default_factory=_now)
    """When the event happened (UTC)."""
    type: Literal["tool_call"] = field(default="tool_call", init=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class TokenEvent:
    """A piece of a streamed answer. The pieces of one model call concatenate to its text."""

    token: str
    agent_role: str
    task_description: str
    task_index: int
    ensemble_id: str = ""
    """The run this event belongs to."""
    task_id: str = ""
    """The task execution this event belongs to."""
    parent_task_id: str | None = None
    """The delegating task's id when the task runs by delegation, else None."""
    timestamp: datetime = field(default_factory=_now)
    """When the event happened (UTC)."""
    type: Literal["token"] = field(default="token", init=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class DelegationStartedEvent:
    """An agent handed a subtask to another agent."""

    delegation_id: str
    delegating_agent_role: str
    worker_role: str
    task_description: str
    delegation_depth: int
    request: Any
    ensemble_id: str = ""
    """The run this event belongs to."""
    task_id: str = ""
    """The delegating task's id (the worker's task events have it as `parent_task_id`)."""
    tool_call_id: str | None = None
    """The tool call that asked for the delegation (None when made outside a tool call)."""
    timestamp: datetime = field(default_factory=_now)
    """When the event happened (UTC)."""
    type: Literal["delegation_started"] = field(default="delegation_started", init=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class DelegationCompletedEvent:
    """A delegated subtask completed."""

    delegation_id: str
    delegating_agent_role: str
    worker_role: str
    response: Any
    duration: timedelta
    ensemble_id: str = ""
    """The run this event belongs to."""
    task_id: str = ""
    """The delegating task's id (the worker's task events have it as `parent_task_id`)."""
    timestamp: datetime = field(default_factory=_now)
    """When the event happened (UTC)."""
    type: Literal["delegation_completed"] = field(default="delegation_completed", init=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class DelegationFailedEvent:
    """A delegation was refused or the worker failed."""

    delegation_id: str
    delegating_agent_role: str
    worker_role: str
    failure_reason: str
    cause: BaseException | None
    response: Any
    duration: timedelta
    ensemble_id: str = ""
    """The run this event belongs to."""
    task_id: str = ""
    """The delegating task's id (the worker's task events have it as `parent_task_id`)."""
    timestamp: datetime = field(default_factory=_now)
    """When the event happened (UTC)."""
    type: Literal["delegation_failed"] = field(default="delegation_failed", init=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class ReviewRequestedEvent:
    """A review gate (or a tool asking for approval or input) is waiting for a decision."""

    review_id: str
    """Unique per review in the run; the decision's event carries it too."""
    task_description: str
    task_output: str | None
    """What is under review (None before a task starts)."""
    timing: str
    """``BEFORE_EXECUTION``, ``DURING_EXECUTION`` or ``AFTER_EXECUTION``."""
    timeout: timedelta
    """How long the run waits (0: forever)."""
    on_timeout: str
    """``CONTINUE``, ``EXIT_EARLY`` or ``FAIL``."""
    prompt: str | None = None
    required_role: str | None = None
    tool_name: str | None = None
    """The tool asking, for reviews during a task."""
    ensemble_id: str = ""
    """The run this event belongs to."""
    task_id: str = ""
    """The task execution under review."""
    parent_task_id: str | None = None
    """The delegating task's id when the task under review runs by delegation."""
    timestamp: datetime = field(default_factory=_now)
    """When the event happened (UTC)."""
    type: Literal["review_requested"] = field(default="review_requested", init=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class ReviewDecidedEvent:
    """A reviewer decided."""

    review_id: str
    decision: str
    """``CONTINUE``, ``EDIT`` or ``EXIT_EARLY``; ``NONE`` when the review ended without a
    decision (the run or task was cancelled, or the handler failed)."""
    revised_output: str | None
    """The edited text, for ``EDIT``."""
    duration: timedelta
    """How long the decision took."""
    ensemble_id: str = ""
    """The run this event belongs to."""
    task_id: str = ""
    """The task execution under review."""
    parent_task_id: str | None = None
    """The delegating task's id when the task under review runs by delegation."""
    timestamp: datetime = field(default_factory=_now)
    """When the event happened (UTC)."""
    type: Literal["review_decided"] = field(default="review_decided", init=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class ReviewTimedOutEvent:
    """Nobody decided in time; `action` (the review's on-timeout action) applies."""

    review_id: str
    action: str
    """``CONTINUE``, ``EXIT_EARLY`` or ``FAIL``."""
    duration: timedelta
    ensemble_id: str = ""
    """The run this event belongs to."""
    task_id: str = ""
    """The task execution under review."""
    parent_task_id: str | None = None
    """The delegating task's id when the task under review runs by delegation."""
    timestamp: datetime = field(default_factory=_now)
    """When the event happened (UTC)."""
    type: Literal["review_timed_out"] = field(default="review_timed_out", init=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryOperationEvent:
    """A task read or wrote memory: `operation` is ``retrieve`` or ``store`` (a scope of the
    memory store, or a `MemoryTool` call), ``evict`` (a scope's eviction after a store),
    ``short_term`` (earlier outputs of the run) or ``entity_lookup`` (entity facts)."""

    operation: str
    scope: str | None
    """The memory scope (None for short-term memory and entity lookups)."""
    entry_count: int
    """Entries found (retrieve, short_term, entity_lookup), stored (1) or evicted."""
    duration: timedelta
    agent_role: str = ""
    task_index: int = 0
    ensemble_id: str = ""
    """The run this event belongs to."""
    task_id: str = ""
    """The task execution that used memory."""
    parent_task_id: str | None = None
    """The delegating task's id, for a task run by delegation."""
    timestamp: datetime = field(default_factory=_now)
    """When the operation finished (UTC)."""
    type: Literal["memory_operation"] = field(default="memory_operation", init=False)


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
)
"""Any lifecycle event."""
