"""Small builders that turn what the agent loop saw into trace records and events."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from agentensemble.models import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    UserMessage,
)
from agentensemble.observability._trace import CapturedMessage, CapturedToolCall, ToolCallTrace
from agentensemble.tools._result import ToolResult

__all__ = ["capture_messages", "parse_input", "skipped_trace", "tool_trace"]


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


def tool_trace(
    call: ToolCall,
    result: ToolResult,
    started_at: datetime,
    seconds: float,
    *,
    full: bool,
) -> ToolCallTrace:
    """The trace of an executed tool call; `full` adds the parsed input."""
    return ToolCallTrace(
        tool_call_id=call.id,
        tool_name=call.name,
        arguments=call.arguments,
        parsed_input=parse_input(call.arguments) if full else None,
        result=result.text_for_model,
        structured_output=result.structured_output,
        started_at=started_at,
        completed_at=started_at + timedelta(seconds=seconds),
        duration=timedelta(seconds=seconds),
        outcome="SUCCESS" if result.is_success else "FAILURE",
    )


def skipped_trace(call: ToolCall, stop_text: str, at: datetime, *, full: bool) -> ToolCallTrace:
    """The trace of a call refused because the iteration limit was reached."""
    return ToolCallTrace(
        tool_call_id=call.id,
        tool_name=call.name,
        arguments=call.arguments,
        parsed_input=parse_input(call.arguments) if full else None,
        result=stop_text,
        started_at=at,
        completed_at=at,
        duration=timedelta(0),
        outcome="SKIPPED_MAX_ITERATIONS",
    )
