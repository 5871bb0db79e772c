"""The wire form of events: one pydantic adapter over the `Event` union writes and reads it.

A message is the event's fields under camelCase names (a duration in milliseconds, as
``durationMs``; the instants the dashboard protocol names otherwise, such as ``startedAt``,
under that name), ISO-8601 instants, top-level fields that are None left out. Nothing is
summarized: ``parse_event(serialize_event(event)) == event`` for every event.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from agentensemble.models import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)

if TYPE_CHECKING:
    from pydantic import TypeAdapter

    from agentensemble.observability._events import Event

__all__ = [
    "event_adapter",
    "messages_from_wire",
    "messages_to_wire",
    "parse_event",
    "serialize_event",
]

_ADAPTER: TypeAdapter[Event] | None = None


def event_adapter() -> TypeAdapter[Event]:
    """The one adapter that writes and reads every event (built on first use)."""
    global _ADAPTER
    if _ADAPTER is None:
        from typing import Annotated

        from pydantic import Field, TypeAdapter

        from agentensemble.observability._events import Event

        # The trace types the events name only in annotations: pydantic resolves them from
        # this frame's names when it builds the adapter.
        from agentensemble.observability._trace import (  # noqa: F401
            AgentSummary,
            ErrorTrace,
            LlmInteraction,
            MapReduceLevelSummary,
        )

        _ADAPTER = TypeAdapter(Annotated[Event, Field(discriminator="type")])
    return _ADAPTER


def serialize_event(event: Event) -> dict[str, Any]:
    """The wire message of `event`: a dict that `json.dumps` accepts as it is."""
    data = event_adapter().dump_python(event, mode="json", by_alias=True, fallback=repr)
    return {key: value for key, value in data.items() if value is not None}


def parse_event(data: Mapping[str, Any]) -> Event:
    """The event a wire message (from `serialize_event`, or its JSON) stands for.

    Raises `pydantic.ValidationError` naming the field when the message is not an event.
    """
    return event_adapter().validate_python(data)


_ROLES = {"system": "system", "user": "user", "assistant": "assistant", "tool_result": "tool"}


def messages_to_wire(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """A conversation on the wire: ``{role, content, toolCalls, toolName, toolCallId}``."""
    return [_message_to_wire(message) for message in messages]


def _message_to_wire(message: Message) -> dict[str, Any]:
    wire: dict[str, Any] = {"role": _ROLES[message.type], "content": message.text}
    if isinstance(message, AssistantMessage) and message.tool_calls:
        wire["toolCalls"] = [
            {"id": call.id, "name": call.name, "arguments": call.arguments}
            for call in message.tool_calls
        ]
    if isinstance(message, ToolResultMessage):
        wire["toolName"] = message.tool_name
        wire["toolCallId"] = message.tool_call_id
    return wire


def messages_from_wire(value: Any) -> Any:
    """The messages a wire conversation stands for (messages pass through as they are)."""
    if not isinstance(value, (list, tuple)):
        return value
    return tuple(_message_from_wire(item) for item in value)


def _message_from_wire(item: Any) -> Any:
    if not isinstance(item, Mapping):
        return item
    role, content = item.get("role"), item.get("content")
    text = content if isinstance(content, str) else ""
    if role == "system":
        return SystemMessage(text)
    if role == "user":
        return UserMessage(text)
    if role == "assistant":
        calls = tuple(
            ToolCall(call["id"], call["name"], call["arguments"])
            for call in item.get("toolCalls", ())
        )
        return AssistantMessage(content, calls)
    if role == "tool":
        return ToolResultMessage(item.get("toolCallId", ""), item.get("toolName", ""), text)
    raise ValueError(f"unknown message role: {role!r}")
