"""The one protocol every model implements."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from agentensemble.models._messages import ChatResponse, Message, ToolSpec

if TYPE_CHECKING:
    from agentensemble.models._settings import ModelSettings

__all__ = ["ChatModel", "StreamingChatModel", "model_name_of", "supports_output_schema"]


@runtime_checkable
class ChatModel(Protocol):
    """A chat model: one async method from a conversation (and offered tools) to a response.

    A model may also expose ``model_name: str``; events, traces and spans show it. A model
    whose provider constrains answers to a JSON Schema (`ModelSettings.output_schema`)
    says so with ``supports_output_schema = True``; tasks with an ``output_type`` then send
    their schema natively.
    """

    async def chat(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSpec] = (),
        settings: ModelSettings | None = None,
    ) -> ChatResponse:
        """Return the model's next turn for `messages`, optionally calling one of `tools`.

        `settings` are the request options (temperature, max tokens, timeout...); a model
        ignores those it cannot honour.
        """
        ...


@runtime_checkable
class StreamingChatModel(ChatModel, Protocol):
    """A chat model that can also stream its answer.

    `stream` yields text deltas (`str`) as they arrive and ends with exactly one
    `ChatResponse` holding the whole turn (text, tool calls and usage).
    """

    def stream(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSpec] = (),
        settings: ModelSettings | None = None,
    ) -> AsyncIterator[str | ChatResponse]:
        """Stream the model's next turn: text deltas, then the complete `ChatResponse`."""
        ...


def model_name_of(model: object) -> str:
    """The model's ``model_name`` attribute when it has a text one, else its class name."""
    name = getattr(model, "model_name", None)
    return name if isinstance(name, str) and name else type(model).__name__


def supports_output_schema(model: object) -> bool:
    """True when the model honours `ModelSettings.output_schema` (its
    ``supports_output_schema`` attribute is True)."""
    return getattr(model, "supports_output_schema", False) is True
