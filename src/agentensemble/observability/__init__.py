"""Observability: events, listeners, metrics, traces, capture mode, exporters, OpenTelemetry.

The event classes, the trace types (`ExecutionTrace`, `TaskTrace`, ...), `ConsoleProgress`,
`OpenTelemetryListener`, `load_trace` and `summarize_trace` load on first access.
"""

from typing import TYPE_CHECKING, Any

from agentensemble.observability._capture import CaptureMode
from agentensemble.observability._cost import CostConfiguration
from agentensemble.observability._exporters import JsonTraceExporter, TraceExporter
from agentensemble.observability._listeners import EnsembleListener, QueuedListener
from agentensemble.observability._metrics import ExecutionMetrics, TaskMetrics
from agentensemble.observability._wire import parse_event, serialize_event

if TYPE_CHECKING:
    from agentensemble.observability._console import ConsoleProgress
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
        PlanNode,
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
    from agentensemble.observability._otel import OpenTelemetryListener
    from agentensemble.observability._summary import summarize_trace
    from agentensemble.observability._trace import (
        SCHEMA_VERSION,
        AgentSummary,
        CapturedMessage,
        CapturedToolCall,
        DelegationTrace,
        ErrorTrace,
        ExecutionTrace,
        GraphStepTrace,
        LlmInteraction,
        LoopIterationTrace,
        MapReduceLevelSummary,
        MemoryOperationTrace,
        PromptTrace,
        TaskTrace,
        ToolCallTrace,
        load_trace,
    )

_TRACE_NAMES = frozenset(
    {
        "SCHEMA_VERSION",
        "AgentSummary",
        "CapturedMessage",
        "CapturedToolCall",
        "DelegationTrace",
        "ErrorTrace",
        "ExecutionTrace",
        "GraphStepTrace",
        "LoopIterationTrace",
        "LlmInteraction",
        "MapReduceLevelSummary",
        "MemoryOperationTrace",
        "PromptTrace",
        "TaskTrace",
        "ToolCallTrace",
        "load_trace",
    }
)


_LAZY_CLASSES = {
    "ConsoleProgress": "_console",
    "OpenTelemetryListener": "_otel",
    "PlanNode": "_events",
}
"""What loads on first access besides the trace types, by module: the event classes (every
name of `__all__` ending in ``Event``), `PlanNode`, `ConsoleProgress` and
`OpenTelemetryListener` (``import agentensemble`` stays light)."""


def _module_of(name: str) -> str | None:
    if name.endswith("Event") and name in __all__:
        return "_events"
    return _LAZY_CLASSES.get(name)


def __getattr__(name: str) -> Any:
    module = _module_of(name)
    if module is not None:
        import importlib

        return getattr(importlib.import_module(f"agentensemble.observability.{module}"), name)
    if name in _TRACE_NAMES:
        from agentensemble.observability import _trace

        return getattr(_trace, name)
    if name == "summarize_trace":
        from agentensemble.observability._summary import summarize_trace

        return summarize_trace
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "SCHEMA_VERSION",
    "AgentSummary",
    "CaptureMode",
    "CapturedMessage",
    "CapturedToolCall",
    "ConsoleProgress",
    "CostConfiguration",
    "DelegationCompletedEvent",
    "DelegationFailedEvent",
    "DelegationStartedEvent",
    "DelegationTrace",
    "EnsembleCompletedEvent",
    "EnsembleListener",
    "EnsembleStartedEvent",
    "ErrorTrace",
    "Event",
    "ExecutionMetrics",
    "ExecutionTrace",
    "GraphStateCompletedEvent",
    "GraphStepTrace",
    "GuardrailCheckedEvent",
    "JsonTraceExporter",
    "LlmInteraction",
    "LlmIterationCompletedEvent",
    "LlmIterationStartedEvent",
    "LoopIterationCompletedEvent",
    "LoopIterationTrace",
    "MapReduceLevelSummary",
    "MemoryOperationEvent",
    "MemoryOperationTrace",
    "OpenTelemetryListener",
    "PlanNode",
    "PromptTrace",
    "QueuedListener",
    "ReviewDecidedEvent",
    "ReviewRequestedEvent",
    "ReviewTimedOutEvent",
    "RunWarningEvent",
    "TaskCompleteEvent",
    "TaskFailedEvent",
    "TaskInputEvent",
    "TaskMetrics",
    "TaskStartEvent",
    "TaskTrace",
    "TokenEvent",
    "ToolCallEvent",
    "ToolCallTrace",
    "TraceExporter",
    "load_trace",
    "parse_event",
    "serialize_event",
    "summarize_trace",
]
