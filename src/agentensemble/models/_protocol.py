"""The one protocol every model implements."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Protocol, runtime_checkable

from agentensemble.models._messages import ChatResponse, Message, ToolSpec

__all__ = ["ChatModel", "StreamingChatModel"]


@runtime_checkable
class ChatModel(Protocol):
    """A chat model: one async method from a conversation (and offered tools) to a response."""

    async def chat(
        self, messages: Sequence[Message], *, tools: Sequence[ToolSpec] = ()
    ) -> ChatResponse:
        """Return the model's next turn for `messages`, optionally calling one of `tools`."""
        ...


@runtime_checkable
class StreamingChatModel(ChatModel, Protocol):
    """A chat model that can also stream its answer.

    `stream` yields text deltas (`str`) as they arrive and ends with exactly one
    `ChatResponse` holding the whole turn (text, tool calls and usage).
    """

    def stream(
        self, messages: Sequence[Message], *, tools: Sequence[ToolSpec] = ()
    ) -> AsyncIterator[str | ChatResponse]:
        """Stream the model's next turn: text deltas, then the complete `ChatResponse`."""
        ...
