"""Lifecycle events: small frozen dataclasses with a literal `type` discriminator."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from agentensemble.outputs import TaskOutput

__all__ = [
    "Event",
    "TaskCompleteEvent",
    "TaskFailedEvent",
    "TaskStartEvent",
    "ToolCallEvent",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskStartEvent:
    """A task is about to run. `task_index` is 1-based."""

    task_description: str
    agent_role: str
    task_index: int
    total_tasks: int
    type: Literal["task_start"] = "task_start"


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskCompleteEvent:
    """A task finished successfully."""

    task_description: str
    agent_role: str
    task_output: TaskOutput
    duration: timedelta
    task_index: int
    total_tasks: int
    type: Literal["task_complete"] = "task_complete"


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskFailedEvent:
    """A task failed; `cause` is the exception."""

    task_description: str
    agent_role: str
    cause: BaseException
    duration: timedelta
    task_index: int
    total_tasks: int
    type: Literal["task_failed"] = "task_failed"


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
    type: Literal["tool_call"] = "tool_call"


Event = TaskStartEvent | TaskCompleteEvent | TaskFailedEvent | ToolCallEvent
