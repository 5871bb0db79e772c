"""The model layer: message types, the `ChatModel` protocol, adapters and test doubles."""

from agentensemble.models._langchain import LangChainChatModel
from agentensemble.models._messages import (
    AssistantMessage,
    ChatResponse,
    Message,
    SystemMessage,
    ToolCall,
    ToolResultMessage,
    ToolSpec,
    Usage,
    UserMessage,
)
from agentensemble.models._openai import OpenAIChatModel
from agentensemble.models._protocol import ChatModel, StreamingChatModel, model_name_of
from agentensemble.models._rate_limit import (
    Clock,
    RateLimit,
    RateLimitedChatModel,
    RateLimiter,
    SystemClock,
)
from agentensemble.models._resolve import resolve_model
from agentensemble.models._settings import ModelSettings
from agentensemble.models._testing import (
    FunctionModel,
    ModelRequest,
    Reply,
    ScriptedModel,
    ScriptExhaustedError,
    tool_call,
)

__all__ = [
    "AssistantMessage",
    "ChatModel",
    "ChatResponse",
    "Clock",
    "FunctionModel",
    "LangChainChatModel",
    "Message",
    "ModelRequest",
    "ModelSettings",
    "OpenAIChatModel",
    "RateLimit",
    "RateLimitedChatModel",
    "RateLimiter",
    "Reply",
    "ScriptExhaustedError",
    "ScriptedModel",
    "StreamingChatModel",
    "SystemClock",
    "SystemMessage",
    "ToolCall",
    "ToolResultMessage",
    "ToolSpec",
    "Usage",
    "UserMessage",
    "model_name_of",
    "resolve_model",
    "tool_call",
]
