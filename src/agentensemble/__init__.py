"""agentensemble: orchestrate teams of LLM agents."""

from agentensemble._quick import arun, run
from agentensemble.agent import Agent
from agentensemble.ensemble import Ensemble
from agentensemble.enums import ExitReason, ParallelErrorStrategy, Workflow
from agentensemble.errors import (
    AgentEnsembleError,
    AgentExecutionError,
    MaxIterationsExceededError,
    ParallelExecutionError,
    PromptTemplateError,
    RateLimitTimeoutError,
    TaskExecutionError,
    ToolExecutionError,
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
from agentensemble.models import (
    AssistantMessage,
    ChatModel,
    ChatResponse,
    FunctionModel,
    OpenAIChatModel,
    RateLimit,
    RateLimitedChatModel,
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
    EnsembleListener,
    ExecutionMetrics,
    TaskCompleteEvent,
    TaskFailedEvent,
    TaskMetrics,
    TaskStartEvent,
    ToolCallEvent,
)
from agentensemble.options import RunOptions
from agentensemble.outputs import EnsembleOutput, TaskOutput
from agentensemble.phase import Phase
from agentensemble.task import Task
from agentensemble.tools import AgentTool, ToolResult, tool

__all__ = [
    "Agent",
    "AgentEnsembleError",
    "AgentExecutionError",
    "AgentSynthesizer",
    "AgentTool",
    "AssistantMessage",
    "ChatModel",
    "ChatResponse",
    "Ensemble",
    "EnsembleListener",
    "EnsembleOutput",
    "ExecutionMetrics",
    "ExitReason",
    "FunctionModel",
    "HandlerContext",
    "LLMAgentSynthesizer",
    "MaxIterationsExceededError",
    "OpenAIChatModel",
    "ParallelErrorStrategy",
    "ParallelExecutionError",
    "Persona",
    "Phase",
    "PromptTemplateError",
    "RateLimit",
    "RateLimitTimeoutError",
    "RateLimitedChatModel",
    "RunOptions",
    "ScriptedModel",
    "SystemMessage",
    "Task",
    "TaskCompleteEvent",
    "TaskContextFilter",
    "TaskExecutionError",
    "TaskFailedEvent",
    "TaskMetrics",
    "TaskOutput",
    "TaskStartEvent",
    "TemplateAgentSynthesizer",
    "ToolCall",
    "ToolCallEvent",
    "ToolExecutionError",
    "ToolResult",
    "ToolResultMessage",
    "ToolSpec",
    "Usage",
    "UserMessage",
    "ValidationError",
    "Workflow",
    "arun",
    "run",
    "tool",
    "tool_call",
]
