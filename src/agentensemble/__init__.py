"""agentensemble: orchestrate teams of LLM agents."""

import typing as _typing

from agentensemble._quick import arun, run
from agentensemble._stream import EventStream
from agentensemble._version import __version__ as __version__
from agentensemble.agent import Agent
from agentensemble.delegation import (
    DefaultManagerPromptStrategy,
    DelegationPolicy,
    DelegationPolicyContext,
    DelegationPolicyResult,
    DelegationPriority,
    DelegationRequest,
    DelegationResponse,
    DelegationStatus,
    HierarchicalConstraints,
    ManagerPromptContext,
    ManagerPromptStrategy,
)
from agentensemble.ensemble import Ensemble
from agentensemble.enums import (
    ContextFormat,
    ExitReason,
    GuardrailType,
    LoopMemoryMode,
    LoopOutputMode,
    MaxIterationsAction,
    ParallelErrorStrategy,
    Workflow,
)
from agentensemble.errors import (
    AgentEnsembleError,
    AgentExecutionError,
    BudgetExceededError,
    CheckpointError,
    ConstraintViolationError,
    EnsembleFileError,
    FileProblem,
    GraphNoEdgeMatchedError,
    GuardrailViolationError,
    HookVetoError,
    MaxGraphStepsExceededError,
    MaxIterationsExceededError,
    MaxLoopIterationsExceededError,
    OutputParsingError,
    ParallelExecutionError,
    PromptTemplateError,
    RateLimitTimeoutError,
    ReviewTimeoutError,
    TaskExecutionError,
    ToolConfigurationError,
    ToolExecutionError,
    UnknownKeywordError,
    ValidationError,
)
from agentensemble.execution import (
    AgentSynthesizer,
    HandlerContext,
    LLMAgentSynthesizer,
    Persona,
    TaskContextFilter,
    TemplateAgentSynthesizer,
)
from agentensemble.execution._templates import escape_template
from agentensemble.graph import Edge, Graph, GraphStep
from agentensemble.guardrails import (
    GuardrailInput,
    GuardrailOutput,
    GuardrailResult,
    InputGuardrail,
    OutputGuardrail,
)
from agentensemble.loop import Loop, LoopContext
from agentensemble.models import (
    AssistantMessage,
    ChatModel,
    ChatResponse,
    FunctionModel,
    ModelSettings,
    OpenAIChatModel,
    RateLimit,
    RateLimitedChatModel,
    RateLimiter,
    ScriptedModel,
    SystemMessage,
    ToolCall,
    ToolResultMessage,
    ToolSpec,
    Usage,
    UserMessage,
    tool_call,
)
from agentensemble.observability import (
    CaptureMode,
    CostConfiguration,
    EnsembleListener,
    ExecutionMetrics,
    JsonTraceExporter,
    QueuedListener,
    TaskMetrics,
    TraceExporter,
)
from agentensemble.options import RunOptions, limit_sync_threads
from agentensemble.outputs import EnsembleOutput, TaskOutput
from agentensemble.phase import Phase
from agentensemble.review import (
    ExitEarlyRequested,
    OnTimeoutAction,
    PendingReview,
    Review,
    ReviewDecision,
    ReviewHandler,
    ReviewPolicy,
    ReviewRequest,
    ReviewTiming,
)
from agentensemble.task import Task
from agentensemble.tools import AgentTool, ToolContext, ToolResult, tool

if _typing.TYPE_CHECKING:
    from agentensemble.checkpoints import CheckpointInfo, CheckpointStore
    from agentensemble.hooks import HookDecision, PendingModelCall, PendingToolCall, UsageSoFar
    from agentensemble.mapreduce import MapReduceEnsemble
    from agentensemble.observability import (
        ConsoleProgress,
        DelegationCompletedEvent,
        DelegationFailedEvent,
        DelegationStartedEvent,
        EnsembleCompletedEvent,
        EnsembleStartedEvent,
        GuardrailCheckedEvent,
        LlmIterationCompletedEvent,
        LlmIterationStartedEvent,
        MemoryOperationEvent,
        OpenTelemetryListener,
        ReviewDecidedEvent,
        ReviewRequestedEvent,
        ReviewTimedOutEvent,
        TaskCompleteEvent,
        TaskFailedEvent,
        TaskInputEvent,
        TaskStartEvent,
        TokenEvent,
        ToolCallEvent,
    )
    from agentensemble.replay import ReplayError, ReplayModel
    from agentensemble.tools import HumanInputTool


_HOOK_NAMES = frozenset({"HookDecision", "PendingModelCall", "PendingToolCall", "UsageSoFar"})
_OBSERVABILITY_CLASSES = frozenset({"ConsoleProgress", "OpenTelemetryListener"})
"""These and the event classes (every name of `__all__` ending in ``Event``) load on first
use, from `agentensemble.observability`."""


def __getattr__(name: str) -> _typing.Any:
    if name in _OBSERVABILITY_CLASSES or (name.endswith("Event") and name in __all__):
        from agentensemble import observability

        return getattr(observability, name)
    if name == "HumanInputTool":  # loads on first use
        from agentensemble.tools import _human_input

        return _human_input.HumanInputTool
    if name in _HOOK_NAMES:  # loads on first use
        from agentensemble import hooks

        return getattr(hooks, name)
    if name == "MapReduceEnsemble":  # loads on first use
        from agentensemble import mapreduce

        return mapreduce.MapReduceEnsemble
    if name in ("CheckpointStore", "CheckpointInfo"):  # loads on first use
        from agentensemble import checkpoints

        return getattr(checkpoints, name)
    if name in ("ReplayModel", "ReplayError"):  # loads on first use (the trace types)
        from agentensemble import replay

        return getattr(replay, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "Agent",
    "AgentEnsembleError",
    "AgentExecutionError",
    "AgentSynthesizer",
    "AgentTool",
    "AssistantMessage",
    "BudgetExceededError",
    "CaptureMode",
    "ChatModel",
    "ChatResponse",
    "CheckpointError",
    "CheckpointInfo",
    "CheckpointStore",
    "ConsoleProgress",
    "ConstraintViolationError",
    "ContextFormat",
    "CostConfiguration",
    "DefaultManagerPromptStrategy",
    "DelegationCompletedEvent",
    "DelegationFailedEvent",
    "DelegationPolicy",
    "DelegationPolicyContext",
    "DelegationPolicyResult",
    "DelegationPriority",
    "DelegationRequest",
    "DelegationResponse",
    "DelegationStartedEvent",
    "DelegationStatus",
    "Edge",
    "Ensemble",
    "EnsembleCompletedEvent",
    "EnsembleFileError",
    "EnsembleListener",
    "EnsembleOutput",
    "EnsembleStartedEvent",
    "EventStream",
    "ExecutionMetrics",
    "ExitEarlyRequested",
    "ExitReason",
    "FileProblem",
    "FunctionModel",
    "Graph",
    "GraphNoEdgeMatchedError",
    "GraphStep",
    "GuardrailCheckedEvent",
    "GuardrailInput",
    "GuardrailOutput",
    "GuardrailResult",
    "GuardrailType",
    "GuardrailViolationError",
    "HandlerContext",
    "HierarchicalConstraints",
    "HookDecision",
    "HookVetoError",
    "HumanInputTool",
    "InputGuardrail",
    "JsonTraceExporter",
    "LLMAgentSynthesizer",
    "LlmIterationCompletedEvent",
    "LlmIterationStartedEvent",
    "Loop",
    "LoopContext",
    "LoopMemoryMode",
    "LoopOutputMode",
    "ManagerPromptContext",
    "ManagerPromptStrategy",
    "MapReduceEnsemble",
    "MaxGraphStepsExceededError",
    "MaxIterationsAction",
    "MaxIterationsExceededError",
    "MaxLoopIterationsExceededError",
    "MemoryOperationEvent",
    "ModelSettings",
    "OnTimeoutAction",
    "OpenAIChatModel",
    "OpenTelemetryListener",
    "OutputGuardrail",
    "OutputParsingError",
    "ParallelErrorStrategy",
    "ParallelExecutionError",
    "PendingModelCall",
    "PendingReview",
    "PendingToolCall",
    "Persona",
    "Phase",
    "PromptTemplateError",
    "QueuedListener",
    "RateLimit",
    "RateLimitTimeoutError",
    "RateLimitedChatModel",
    "RateLimiter",
    "ReplayError",
    "ReplayModel",
    "Review",
    "ReviewDecidedEvent",
    "ReviewDecision",
    "ReviewHandler",
    "ReviewPolicy",
    "ReviewRequest",
    "ReviewRequestedEvent",
    "ReviewTimedOutEvent",
    "ReviewTimeoutError",
    "ReviewTiming",
    "RunOptions",
    "ScriptedModel",
    "SystemMessage",
    "Task",
    "TaskCompleteEvent",
    "TaskContextFilter",
    "TaskExecutionError",
    "TaskFailedEvent",
    "TaskInputEvent",
    "TaskMetrics",
    "TaskOutput",
    "TaskStartEvent",
    "TemplateAgentSynthesizer",
    "TokenEvent",
    "ToolCall",
    "ToolCallEvent",
    "ToolConfigurationError",
    "ToolContext",
    "ToolExecutionError",
    "ToolResult",
    "ToolResultMessage",
    "ToolSpec",
    "TraceExporter",
    "UnknownKeywordError",
    "Usage",
    "UsageSoFar",
    "UserMessage",
    "ValidationError",
    "Workflow",
    "arun",
    "escape_template",
    "limit_sync_threads",
    "run",
    "tool",
    "tool_call",
]
