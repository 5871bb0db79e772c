"""The wire form of events: one pydantic adapter over the `Event` union writes and reads it.

A message is the event's fields under camelCase names (a duration in milliseconds, as
``durationMs``; the instants the dashboard protocol names otherwise, such as ``startedAt``,
under that name), ISO-8601 instants, top-level fields that are None left out. Nothing is
summarized: ``parse_event(serialize_event(event)) == event`` for every event.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from agentensemble.errors import ValidationError
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
            TaskTrace,
        )

        _ADAPTER = TypeAdapter(Annotated[Event, Field(discriminator="type")])
    return _ADAPTER


def serialize_event(event: Event) -> dict[str, Any]:
    """The wire message of `event`: a dict that `json.dumps` accepts as it is. Raises
    `TypeError` for anything that is not an event."""
    from agentensemble.observability._events import EVENT_TYPES

    if not isinstance(event, EVENT_TYPES):
        raise TypeError(f"serialize_event takes an event, got: {type(event).__name__}")
    data = event_adapter().dump_python(event, mode="json", by_alias=True, fallback=repr)
    return {key: value for key, value in data.items() if value is not None}


def parse_event(data: Mapping[str, Any]) -> Event:
    """The event a wire message (from `serialize_event`, parsed from its JSON) stands for.

    Every field `serialize_event` writes must be there (only those that were None may be
    left out): a message that lost one is an error, not an event with made-up values.
    Raises `agentensemble.ValidationError` naming the type, the field and the problem.
    """
    import pydantic

    kind = _kind_of(data)
    missing = [
        wire for wire, name in _required_names(kind) if wire not in data and name not in data
    ]
    if missing:
        raise ValidationError(
            f"{data['type']} message is missing {', '.join(missing)}, got: {_short(data)}"
        )
    try:
        return event_adapter().validate_python(data)
    except pydantic.ValidationError as error:
        first = error.errors(include_url=False)[0]
        where = ".".join(str(part) for part in first["loc"][1:]) or "message"
        raise ValidationError(
            f"{data['type']} message field {where}: {first['msg']}, got: {first['input']!r}"
        ) from None


def _kind_of(data: object) -> type[Any]:
    from agentensemble.observability._events import EVENT_TYPES

    if not isinstance(data, Mapping):
        raise ValidationError(
            f"an event message must be a mapping (a dict parsed from JSON), got: "
            f"{type(data).__name__}"
        )
    kinds: dict[object, type[Any]] = {
        kind.__dataclass_fields__["type"].default: kind for kind in EVENT_TYPES
    }
    name = data.get("type")
    kind = kinds.get(name) if isinstance(name, str) else None
    if kind is None:
        raise ValidationError(
            f"event message type must be one of {', '.join(map(str, kinds))}, got: "
            f"{data.get('type')!r}"
        )
    return kind


def _required_names(kind: type[Any]) -> list[tuple[str, str]]:
    """The fields `serialize_event` always writes (those not None by default), as (wire name,
    Python name): a message may use either."""
    wire_name = kind.__pydantic_config__["alias_generator"]
    return [
        (wire_name(item.name), item.name)
        for item in dataclasses.fields(kind)
        if item.init and item.default is not None
    ]


def _short(data: Mapping[str, Any]) -> str:
    text = repr(dict(data))
    return text if len(text) <= 200 else f"{text[:200]}..."


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
