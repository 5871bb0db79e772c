"""Small builders of trace records: captured messages and parsed tool inputs."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from agentensemble.models import (
    AssistantMessage,
    Message,
    SystemMessage,
    UserMessage,
)
from agentensemble.observability._trace import CapturedMessage, CapturedToolCall

__all__ = ["capture_messages", "parse_input"]


def capture_messages(messages: Sequence[Message]) -> tuple[CapturedMessage, ...]:
    """The conversation as trace records."""
    return tuple(_capture(message) for message in messages)


def _capture(message: Message) -> CapturedMessage:
    if isinstance(message, SystemMessage):
        return CapturedMessage(role="system", content=message.text)
    if isinstance(message, UserMessage):
        return CapturedMessage(role="user", content=message.text)
    if isinstance(message, AssistantMessage):
        calls = tuple(
            CapturedToolCall(id=call.id, name=call.name, arguments=call.arguments)
            for call in message.tool_calls
        )
        return CapturedMessage(role="assistant", content=message.text, tool_calls=calls)
    return CapturedMessage(
        role="tool",
        content=message.text,
        tool_name=message.tool_name,
        tool_call_id=message.tool_call_id,
    )


def parse_input(arguments: str) -> dict[str, Any]:
    """Tool arguments as a dict; ``{}`` when they are not a JSON object."""
    try:
        parsed = json.loads(arguments)
    except (json.JSONDecodeError, TypeError):
        return {}
    return parsed if isinstance(parsed, dict) else {}
