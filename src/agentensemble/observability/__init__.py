"""Observability: events, listeners and metrics."""

from agentensemble.observability._events import (
    Event,
    TaskCompleteEvent,
    TaskFailedEvent,
    TaskStartEvent,
    ToolCallEvent,
)
from agentensemble.observability._listeners import EnsembleListener
from agentensemble.observability._metrics import ExecutionMetrics, TaskMetrics

__all__ = [
    "EnsembleListener",
    "Event",
    "ExecutionMetrics",
    "TaskCompleteEvent",
    "TaskFailedEvent",
    "TaskMetrics",
    "TaskStartEvent",
    "ToolCallEvent",
]
