"""Adapter that lets any LangChain chat model serve as a `ChatModel`."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator, Coroutine, Sequence
from typing import Any, TypeVar

from agentensemble._extras import require
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
from agentensemble.models._settings import ModelSettings

__all__ = ["LangChainChatModel", "is_langchain_chat_model"]

T = TypeVar("T")


def is_langchain_chat_model(obj: object) -> bool:
    """True when `obj` is a LangChain `BaseChatModel` (never imports LangChain itself)."""
    module = sys.modules.get("langchain_core.language_models.chat_models")
    if module is None:
        return False
    return isinstance(obj, module.BaseChatModel)


class LangChainChatModel:
    """Wraps a LangChain `BaseChatModel`. Passing one where a model is expected wraps it.

    Tools are bound with `bind_tools` only when a request offers tools, because several
    LangChain models (the fake ones among them) do not implement `bind_tools`.
    """

    def __init__(self, model: Any) -> None:
        require("langchain_core", "langchain")
        self.model = model
        self.model_name: str = _name_of(model)
        """The wrapped model's ``model_name`` (or ``model``), else its class name."""

    def __repr__(self) -> str:
        return f"LangChainChatModel({type(self.model).__name__})"

    async def chat(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSpec] = (),
        settings: ModelSettings | None = None,
    ) -> ChatResponse:
        """Invoke the wrapped model and convert its `AIMessage`.

        `temperature`, `max_tokens` and `extra` settings are passed as call keywords, which
        LangChain's provider models (ChatOpenAI, ChatAnthropic...) put in their request.
        """
        runnable = self._runnable(tools, settings)
        reply = await _on_the_library_loop(
            runnable.ainvoke([_to_langchain(message) for message in messages])
        )
        return _from_langchain(reply)

    async def stream(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSpec] = (),
        settings: ModelSettings | None = None,
    ) -> AsyncIterator[str | ChatResponse]:
        """Stream through the wrapped model's ``astream``: text deltas as they arrive, then
        the whole turn (chunks merged, tool calls included). A model that cannot stream
        answers in one chunk."""
        import asyncio

        from agentensemble._sync import background_loop

        runnable = self._runnable(tools, settings)
        sent = [_to_langchain(message) for message in messages]
        queue: asyncio.Queue[Any] = asyncio.Queue()
        here = asyncio.get_running_loop()

        async def produce() -> None:
            merged = None
            try:
                async for chunk in runnable.astream(sent):
                    merged = chunk if merged is None else merged + chunk
                    text = _text_of(chunk.content)
                    if text:
                        here.call_soon_threadsafe(queue.put_nowait, text)
                _check_finished(merged, self.model)
                here.call_soon_threadsafe(queue.put_nowait, _Done(merged))
            except BaseException as error:  # handed to the consumer, even a cancellation
                here.call_soon_threadsafe(queue.put_nowait, _Failed(error))

        producer = asyncio.run_coroutine_threadsafe(produce(), background_loop())
        try:
            while True:
                item = await queue.get()
                if isinstance(item, _Failed):
                    raise item.error
                if isinstance(item, _Done):
                    merged = item.merged
                    yield (
                        _from_langchain(merged)
                        if merged is not None
                        else ChatResponse(message=AssistantMessage())
                    )
                    return
                yield item
        finally:
            producer.cancel()

    def _runnable(self, tools: Sequence[ToolSpec], settings: ModelSettings | None) -> Any:
        runnable = self.model
        if tools:
            runnable = runnable.bind_tools([_tool_to_openai(spec) for spec in tools])
        keywords = _call_keywords(settings)
        if keywords:
            runnable = runnable.bind(**keywords)
        return runnable


_FINISH_KEYS = {
    "openai": "finish_reason",
    "azure": "finish_reason",
    "anthropic": "stop_reason",
    "ollama": "done_reason",
    "google_genai": "finish_reason",
    "mistralai": "finish_reason",
    "groq": "finish_reason",
}
"""Where each LangChain provider says why an answer ended (``model_provider`` in the
chunks' ``response_metadata``); a stream that ends without it was cut short."""


def _check_finished(merged: Any, model: Any) -> None:
    """A stream from a provider that reports why an answer ended, and did not, was cut
    (a reset connection, a truncated stream): LangChain ends it quietly, so say so."""
    metadata = getattr(merged, "response_metadata", None) or {}
    key = _FINISH_KEYS.get(metadata.get("model_provider", ""))
    if key is None or metadata.get(key):
        return
    received = len(_text_of(merged.content)) if merged is not None else 0
    raise ConnectionError(
        f"The answer streamed by {type(model).__name__} ({metadata['model_provider']}) "
        f"stopped before it was finished (no {key}, {received} characters received): the "
        "connection was cut"
    )


class _Done:
    """The end of a stream: every chunk merged (None when there was none)."""

    def __init__(self, merged: Any) -> None:
        self.merged = merged


class _Failed:
    def __init__(self, error: BaseException) -> None:
        self.error = error


async def _on_the_library_loop(call: Coroutine[Any, Any, T]) -> T:
    """Await `call` on the library's one long-lived event loop.

    LangChain's provider models (``ChatOpenAI``...) cache their async HTTP client per
    process, bound to the first loop that used it: a second ``asyncio.run()``, or a web
    server's sync and async endpoints sharing one model, would find it bound to a loop that
    is closed or is not theirs. On one loop for every call, the cached client always works.
    Cancelling the caller cancels the call there.
    """
    import asyncio

    from agentensemble._sync import background_loop

    loop = background_loop()
    if asyncio.get_running_loop() is loop:
        return await call
    return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(call, loop))


def _name_of(model: Any) -> str:
    for attribute in ("model_name", "model"):
        value = getattr(model, attribute, None)
        if isinstance(value, str) and value:
            return value
    return type(model).__name__


def _call_keywords(settings: ModelSettings | None) -> dict[str, Any]:
    if settings is None:
        return {}
    keywords: dict[str, Any] = dict(settings.extra)
    if settings.temperature is not None:
        keywords["temperature"] = settings.temperature
    if settings.max_tokens is not None:
        keywords["max_tokens"] = settings.max_tokens
    return keywords


def _tool_to_openai(spec: ToolSpec) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": spec.name,
            "description": spec.description,
            "parameters": dict(spec.parameters),
        },
    }


def _to_langchain(message: Message) -> Any:
    lc = require("langchain_core.messages", "langchain")
    if isinstance(message, SystemMessage):
        return lc.SystemMessage(content=message.text)
    if isinstance(message, UserMessage):
        return lc.HumanMessage(content=message.text)
    if isinstance(message, ToolResultMessage):
        return lc.ToolMessage(
            content=message.text, tool_call_id=message.tool_call_id, name=message.tool_name
        )
    calls = [
        {"id": call.id, "name": call.name, "args": _arguments_dict(call.arguments)}
        for call in message.tool_calls
    ]
    return lc.AIMessage(content=message.text or "", tool_calls=calls)


def _arguments_dict(arguments: str) -> dict[str, Any]:
    try:
        parsed = json.loads(arguments) if arguments else {}
    except json.JSONDecodeError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts = [
        part if isinstance(part, str) else str(part.get("text", ""))
        for part in content
        if isinstance(part, str) or (isinstance(part, dict) and part.get("type") == "text")
    ]
    return "".join(parts)


def _from_langchain(reply: Any) -> ChatResponse:
    calls = tuple(
        ToolCall(
            id=call.get("id") or f"lc_{index}",
            name=call["name"],
            arguments=json.dumps(call["args"]),
        )
        for index, call in enumerate(getattr(reply, "tool_calls", None) or ())
    )
    # Calls LangChain could not parse go to the tool loop as they are: it answers the model
    # with the error (bad arguments, unknown tool) so that it can correct itself.
    broken = tuple(
        ToolCall(
            id=call.get("id") or f"lc_invalid_{index}",
            name=call.get("name") or "",
            arguments=call.get("args") or "",
        )
        for index, call in enumerate(getattr(reply, "invalid_tool_calls", None) or ())
    )
    calls = (*calls, *broken)
    text = _text_of(reply.content) or None
    metadata = getattr(reply, "usage_metadata", None)
    usage = None
    if metadata:
        usage = Usage(metadata.get("input_tokens"), metadata.get("output_tokens"))
    return ChatResponse(message=AssistantMessage(text=text, tool_calls=calls), usage=usage)
