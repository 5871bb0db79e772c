"""The message types exchanged with a chat model. Provider wire formats stay in their adapters."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from agentensemble._frozen import direct_init

__all__ = [
    "AssistantMessage",
    "ChatResponse",
    "Message",
    "SystemMessage",
    "ToolCall",
    "ToolResultMessage",
    "ToolSpec",
    "Usage",
    "UserMessage",
]


@direct_init
@dataclass(frozen=True, slots=True)
class ToolCall:
    """A tool invocation requested by the model."""

    id: str
    """Provider-assigned call id; echoed back in the matching `ToolResultMessage`."""
    name: str
    """Name of the tool to call."""
    arguments: str
    """The arguments as JSON text, exactly as the model produced it (possibly malformed)."""


@direct_init
@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A tool offered to the model."""

    name: str
    description: str
    parameters: Mapping[str, Any]
    """A JSON Schema object describing the arguments."""


@direct_init
@dataclass(frozen=True, slots=True)
class SystemMessage:
    """Instructions for the model."""

    text: str
    type: Literal["system"] = field(default="system", init=False)


@direct_init
@dataclass(frozen=True, slots=True)
class UserMessage:
    """A user turn."""

    text: str
    type: Literal["user"] = field(default="user", init=False)


@direct_init
@dataclass(frozen=True, slots=True)
class AssistantMessage:
    """A model turn: final text, tool calls, or both."""

    text: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    type: Literal["assistant"] = field(default="assistant", init=False)


@direct_init
@dataclass(frozen=True, slots=True)
class ToolResultMessage:
    """The result of one tool call, sent back to the model."""

    tool_call_id: str
    tool_name: str
    text: str
    type: Literal["tool_result"] = field(default="tool_result", init=False)


Message = SystemMessage | UserMessage | AssistantMessage | ToolResultMessage
"""Any message in a conversation."""


@direct_init
@dataclass(frozen=True, slots=True)
class Usage:
    """Token usage of one model call; `None` where the provider reported none."""

    input_tokens: int | None = None
    output_tokens: int | None = None


@direct_init
@dataclass(frozen=True, slots=True)
class ChatResponse:
    """What a model returns for one request."""

    message: AssistantMessage
    usage: Usage | None = field(default=None)
