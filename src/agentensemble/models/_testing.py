"""Test doubles: models that answer from a script or a function, with no network."""

from __future__ import annotations

import itertools
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

from agentensemble._calling import is_awaitable
from agentensemble._frozen import direct_init
from agentensemble.models._messages import (
    AssistantMessage,
    ChatResponse,
    Message,
    ToolCall,
    ToolSpec,
    Usage,
)
from agentensemble.models._settings import ModelSettings

__all__ = [
    "FunctionModel",
    "ModelRequest",
    "Reply",
    "ScriptExhaustedError",
    "ScriptedModel",
    "tool_call",
]

Reply: TypeAlias = str | ToolCall | Sequence[ToolCall] | AssistantMessage | ChatResponse
"""What a test double may answer: final text, one or more tool calls, or a full message."""

_call_ids = itertools.count(1)


def tool_call(name: str, /, **arguments: Any) -> ToolCall:
    """Build a `ToolCall` with a fresh id and `arguments` encoded as JSON."""
    return ToolCall(id=f"call_{next(_call_ids)}", name=name, arguments=json.dumps(arguments))


class ScriptExhaustedError(RuntimeError):
    """A `ScriptedModel` received more requests than it has replies."""


@direct_init
@dataclass(frozen=True, slots=True)
class ModelRequest:
    """One request a test double received."""

    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...]
    settings: ModelSettings | None = None
    """The request options the engine sent (None when neither agent nor task set any)."""


def to_response(reply: Reply, usage: Usage | None = None) -> ChatResponse:
    """Normalise any `Reply` form into a `ChatResponse`."""
    if isinstance(reply, ChatResponse):
        return reply
    if isinstance(reply, AssistantMessage):
        return ChatResponse(message=reply, usage=usage)
    if isinstance(reply, str):
        return ChatResponse(message=AssistantMessage(text=reply), usage=usage)
    if isinstance(reply, ToolCall):
        return ChatResponse(message=AssistantMessage(tool_calls=(reply,)), usage=usage)
    items = tuple(reply) if isinstance(reply, Sequence) else ()
    calls = tuple(item for item in items if isinstance(item, ToolCall))
    if not calls or len(calls) != len(items):
        raise TypeError(
            f"A test model's reply must be a str (the answer), a ToolCall or a list of them, "
            f"an AssistantMessage or a ChatResponse, got: {type(reply).__name__} {reply!r:.80}"
        )
    return ChatResponse(message=AssistantMessage(tool_calls=calls), usage=usage)


async def _stream_words(pending: Awaitable[ChatResponse]) -> AsyncIterator[str | ChatResponse]:
    """A test double's answer streamed word by word, then the whole response."""
    response = await pending
    text = response.message.text
    if text and not response.message.tool_calls:
        for piece in _split_keeping_spaces(text):
            yield piece
    yield response


def _split_keeping_spaces(text: str) -> Iterable[str]:
    """Split text into word-sized deltas that concatenate back to the original exactly."""
    start = 0
    for index in range(1, len(text)):
        if text[index] == " " and text[index - 1] != " ":
            yield text[start:index]
            start = index
    yield text[start:]


class ScriptedModel:
    """A model that returns scripted replies in order and records every request.

    Each reply is a string (a final answer), a `ToolCall` or a list of them, an
    `AssistantMessage` or a `ChatResponse`. `usage` is attached to replies that carry none.
    Supports streaming: text answers are streamed word by word.
    """

    def __init__(
        self,
        replies: Iterable[Reply],
        *,
        usage: Usage | None = None,
        model_name: str = "ScriptedModel",
        supports_output_schema: bool = False,
    ) -> None:
        self._replies: list[Reply] = list(replies)
        self._usage = usage
        self.model_name = model_name
        """The name events, traces and spans show."""
        self.supports_output_schema = supports_output_schema
        """Act as a native structured-output model: typed tasks then send their JSON Schema
        in ``ModelSettings.output_schema`` (see `requests`)."""
        self._next = 0
        self.requests: list[ModelRequest] = []
        """Every request received, in order."""

    @property
    def remaining(self) -> int:
        """How many scripted replies have not been used yet."""
        return len(self._replies) - self._next

    async def chat(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSpec] = (),
        settings: ModelSettings | None = None,
    ) -> ChatResponse:
        """Record the request and return the next scripted reply."""
        self.requests.append(ModelRequest(tuple(messages), tuple(tools), settings))
        if self._next >= len(self._replies):
            raise ScriptExhaustedError(
                f"ScriptedModel has no reply left: it was given {len(self._replies)} "
                f"replies and received request {len(self.requests)}"
            )
        reply = self._replies[self._next]
        self._next += 1
        return to_response(reply, self._usage)

    def stream(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSpec] = (),
        settings: ModelSettings | None = None,
    ) -> AsyncIterator[str | ChatResponse]:
        """Stream the next answer word by word, then the whole response."""
        return _stream_words(self.chat(messages, tools=tools, settings=settings))


ModelFunction: TypeAlias = Callable[
    [Sequence[Message], Sequence[ToolSpec]], Reply | Awaitable[Reply]
]


class FunctionModel:
    """A model whose replies come from `fn(messages, tools)`, sync or async.

    A sync function is called directly on the event loop, so keep it instant (it is meant
    for tests and simulations); make it `async` if it has to wait. Every request stays in
    `requests` for a test's assertions: a simulation making many runs with one model
    should clear it between them.
    """

    def __init__(
        self,
        fn: ModelFunction,
        *,
        usage: Usage | None = None,
        model_name: str = "FunctionModel",
        supports_output_schema: bool = False,
    ) -> None:
        self._fn = fn
        self._usage = usage
        self.model_name = model_name
        """The name events, traces and spans show."""
        self.supports_output_schema = supports_output_schema
        """Act as a native structured-output model (see `ScriptedModel`)."""
        self.requests: list[ModelRequest] = []
        """Every request received, in order."""

    async def chat(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSpec] = (),
        settings: ModelSettings | None = None,
    ) -> ChatResponse:
        """Record the request and return whatever the function answers."""
        self.requests.append(ModelRequest(tuple(messages), tuple(tools), settings))
        reply = self._fn(messages, tools)
        if is_awaitable(reply):
            reply = await reply
        return to_response(reply, self._usage)

    def stream(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSpec] = (),
        settings: ModelSettings | None = None,
    ) -> AsyncIterator[str | ChatResponse]:
        """Stream the next answer word by word, then the whole response."""
        return _stream_words(self.chat(messages, tools=tools, settings=settings))
