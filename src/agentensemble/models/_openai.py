"""`OpenAIChatModel`: OpenAI and every OpenAI-compatible server, through the official SDK."""

from __future__ import annotations

import contextlib
import copy
import functools
import json
import os
import re
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from agentensemble._calling import import_off_loop
from agentensemble._extras import require, require_installed
from agentensemble.errors import ValidationError
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
from agentensemble.models._per_loop import PerLoop
from agentensemble.models._settings import ModelSettings

__all__ = ["OpenAIChatModel", "post_for_json", "unreadable"]


class OpenAIChatModel:
    """A chat model served over the OpenAI chat-completions API.

    Works with OpenAI, Azure OpenAI and OpenAI-compatible servers (vLLM, Ollama, llama.cpp,
    LM Studio) through `base_url`. `ModelSettings.output_schema` is sent as a
    ``response_format`` JSON Schema, strict when the schema allows it (typed tasks send
    one when `supports_output_schema` is on). Retries of
    408/409/429/5xx responses, with backoff that honours ``retry-after``, are the SDK's
    (`max_retries`). The SDK client is created on first use, so building an ensemble never
    needs credentials.
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = 60.0,
        max_retries: int = 2,
        temperature: float | None = None,
        extra_body: dict[str, Any] | None = None,
        supports_output_schema: bool | None = None,
    ) -> None:
        require_installed("openai", "openai")  # imported by the first call
        if base_url is not None and not base_url.startswith(("http://", "https://")):
            raise ValidationError(
                f"OpenAIChatModel base_url must start with http:// or https://, got: {base_url!r}"
            )
        self.model = model
        self.model_name = model
        """The model id sent with every request; events, traces and spans show it."""
        self.base_url = base_url
        self._api_key = api_key
        self.timeout = timeout
        self.max_retries = max_retries
        self.temperature = temperature
        self._extra_body = dict(extra_body or {})
        self.supports_output_schema = (
            base_url is None if supports_output_schema is None else supports_output_schema
        )
        """Whether tasks with an object ``output_type`` send their JSON Schema as
        ``response_format``. By default only for OpenAI itself (no `base_url`): many
        compatible servers accept it (vLLM, llama.cpp, Ollama, LM Studio) but not all, and
        one that does not would fail every typed task. Pass True to turn it on."""
        make = functools.partial(_new_client, model, base_url, api_key, timeout, max_retries)
        self._clients: PerLoop[Any] = PerLoop(make, _close_client)
        """One SDK client per event loop: pooled connections belong to the loop that opened
        them. A client is closed when its loop shuts down."""

    def __repr__(self) -> str:
        return f"OpenAIChatModel(model={self.model!r}, base_url={self.base_url!r})"

    async def aclose(self) -> None:
        """Close the SDK client of the running event loop now. Clients are also closed when
        their loop shuts down, so this is only needed to release connections early."""
        await self._clients.aclose()

    async def __aenter__(self) -> OpenAIChatModel:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def _request(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        settings: ModelSettings | None,
    ) -> dict[str, Any]:
        request: dict[str, Any] = {
            "model": self.model,
            "messages": [_to_wire(message) for message in messages],
        }
        if tools:
            request["tools"] = [_tool_to_wire(spec) for spec in tools]
        settings = settings or _NO_SETTINGS
        temperature = settings.temperature if settings.temperature is not None else self.temperature
        if temperature is not None:
            request["temperature"] = temperature
        if settings.max_tokens is not None:
            request["max_tokens"] = settings.max_tokens
        if settings.timeout is not None:
            request["timeout"] = settings.timeout_seconds
        if settings.output_schema is not None:
            request["response_format"] = _response_format(settings.output_schema)
        extra_body = {**self._extra_body, **settings.extra}
        if extra_body:
            request["extra_body"] = extra_body
        if self._keyless():
            import openai

            request["extra_headers"] = {"Authorization": openai.Omit()}
        return request

    def _keyless(self) -> bool:
        """A local server without a key: the SDK needs a key to start, but the server
        should not be sent a made-up one (no ``Authorization`` header at all)."""
        return not self._api_key and not os.environ.get("OPENAI_API_KEY") and bool(self.base_url)

    async def _client(self) -> Any:
        """This loop's SDK client (the SDK imported off the loop the first time)."""
        await import_off_loop("openai")
        return await self._clients.get()

    async def chat(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSpec] = (),
        settings: ModelSettings | None = None,
    ) -> ChatResponse:
        """Send one chat-completions request and convert the reply.

        Sent with the client's generic ``post`` (the SDK's retries, authentication, timeouts
        and errors, documented for endpoints it has no method for): ``create()`` would also
        check the request against its typed parameters and build typed objects for the reply,
        more CPU per call than the rest of a task costs the engine."""
        client = await self._client()
        body, options = _post_arguments(self._request(messages, tools, settings))
        with self._naming_the_server():
            try:
                completion = await post_for_json(client, "/chat/completions", body, options)
            except json.JSONDecodeError as error:
                raise RuntimeError(
                    f"the server's chat completion for model {self.model!r} is not JSON: {error}"
                ) from None
        return _chat_response(self.model, completion)

    async def stream(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSpec] = (),
        settings: ModelSettings | None = None,
    ) -> AsyncIterator[str | ChatResponse]:
        """Stream a chat completion: text deltas as they arrive, then the whole turn.

        Posted like `chat`; the SDK's server-sent-events reader hands over each chunk as
        plain JSON (typed chunks cost about 80 µs each, 10 µs this way)."""
        import openai

        body, options = _post_arguments(self._request(messages, tools, settings))
        body.update(stream=True, stream_options={"include_usage": True})
        client = await self._client()
        assembly = _StreamAssembly(self.model)
        with self._naming_the_server():
            chunks = await post_for_json(
                client, "/chat/completions", body, options, stream_cls=openai.AsyncStream[object]
            )
            try:
                async for chunk in chunks:
                    delta = assembly.add(chunk)
                    if delta:
                        yield delta
            finally:
                await chunks.close()
        if not assembly.finished:
            where = self.base_url or "https://api.openai.com/v1"
            raise ConnectionError(
                f"The answer streamed from {where} for model {self.model!r} stopped before "
                f"it was finished (no finish_reason, {len(''.join(assembly.text))} characters "
                "received): the connection was cut"
            )
        yield assembly.response()

    @contextlib.contextmanager
    def _naming_the_server(self) -> Iterator[None]:
        """A connection that fails says which server it tried (the SDK says only
        "Connection error.")."""
        import openai

        try:
            yield
        except openai.APITimeoutError:
            raise  # reached, but too slow: the SDK's own error says so
        except openai.APIConnectionError as error:
            where = self.base_url or "https://api.openai.com/v1"
            raise ConnectionError(
                f"Could not reach {where} for model {self.model!r}: {error}"
            ) from error


@dataclass(slots=True)
class _PartialCall:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


@dataclass(slots=True)
class _StreamAssembly:
    """Accumulates streamed chunks (JSON) into one `ChatResponse`."""

    model: str
    text: list[str] = field(default_factory=list)
    calls: dict[int, _PartialCall] = field(default_factory=dict)
    usage: Usage | None = None
    finished: bool = False
    """Whether a chunk said why the answer ended (``finish_reason``): a stream cut short
    never does."""

    def add(self, chunk: Any) -> str:
        """Take in one chunk; the text it adds."""
        try:
            return self._add(chunk)
        except (KeyError, IndexError, TypeError, AttributeError) as error:
            raise RuntimeError(
                f"a chunk of the server's streamed chat completion for model {self.model!r} "
                f"is malformed {unreadable(error, chunk)}"
            ) from None

    def _add(self, chunk: dict[str, Any]) -> str:
        usage = chunk.get("usage")
        if usage is not None:
            self.usage = _usage_of(usage)
        choices = chunk.get("choices")
        if not choices:
            return ""
        self.finished = self.finished or choices[0].get("finish_reason") is not None
        delta = choices[0].get("delta") or {}
        for part in delta.get("tool_calls") or ():
            call = self.calls.setdefault(self._index_of(part), _PartialCall())
            call.id = part.get("id") or call.id
            function = part.get("function")
            if function is not None:
                call.name = function.get("name") or call.name
                call.arguments.append(function.get("arguments") or "")
        content = delta.get("content")
        if content:
            self.text.append(content)
            return str(content)
        return ""

    def _index_of(self, part: dict[str, Any]) -> int:
        """The call a streamed tool-call part belongs to: its ``index``; without one (Gemini's
        compatible endpoint sends none), the last call while the part has its id or none,
        else a new call."""
        index = part.get("index")
        if index is not None:
            return int(index)
        if not self.calls:
            return 0
        last = max(self.calls)
        same = part.get("id") in (None, "", self.calls[last].id)
        return last if same else last + 1

    def response(self) -> ChatResponse:
        calls = tuple(
            ToolCall(id=call.id, name=call.name, arguments="".join(call.arguments))
            for _, call in sorted(self.calls.items())
        )
        text = "".join(self.text) if self.text else None
        return ChatResponse(message=AssistantMessage(text=text, tool_calls=calls), usage=self.usage)


_NO_SETTINGS = ModelSettings()


def _response_format(schema: Any) -> dict[str, Any]:
    """A ``json_schema`` response format; strict (the server then guarantees the shape)
    unless the schema has a free-form mapping, which strict mode cannot express. The
    caller's schema is copied, never sent (or changed) as it is."""
    plain = copy.deepcopy(dict(schema))
    root = _inline_root(plain)
    strict = _strict_schema(root, root)
    return {
        "type": "json_schema",
        "json_schema": {
            "name": re.sub(r"[^A-Za-z0-9_-]", "_", str(root.get("title") or "output"))[:64],
            "schema": strict if strict is not None else plain,
            "strict": strict is not None,
        },
    }


def _inline_root(schema: dict[str, Any]) -> dict[str, Any]:
    """A schema whose root is a ``$ref`` (a recursive model) with that definition inlined:
    strict mode wants an object at the root."""
    target = _definition(schema.get("$ref"), schema)
    if target is None:
        return schema
    return {**target, **{k: v for k, v in schema.items() if k != "$ref"}}


def _definition(ref: object, root: dict[str, Any]) -> dict[str, Any] | None:
    if not isinstance(ref, str) or not ref.startswith("#/$defs/"):
        return None
    found = root.get("$defs", {}).get(ref.removeprefix("#/$defs/"))
    return found if isinstance(found, dict) else None


def _strict_schema(schema: Any, root: dict[str, Any], depth: int = 0) -> dict[str, Any] | None:
    """`schema` as OpenAI's strict mode wants it: every object closed
    (``additionalProperties: false``) with all its properties required, no defaults, no
    ``$ref`` with keywords beside it (the definition is inlined), ``anyOf`` for ``oneOf``.
    None when strict mode cannot express it (a ``dict[str, X]`` field)."""
    if not isinstance(schema, dict) or depth > _MAX_SCHEMA_DEPTH:
        return None
    target = _definition(schema.get("$ref"), root)
    if target is not None and len(schema) > 1:  # {"$ref": ..., "description": ...}
        schema = {**target, **{k: v for k, v in schema.items() if k != "$ref"}}
    strict: dict[str, Any] = {}
    for key, value in schema.items():
        if key in _DROPPED:
            continue
        if key in _SCHEMA_MAPS and isinstance(value, dict):
            converted: Any = {n: _strict_schema(sub, root, depth + 1) for n, sub in value.items()}
            if any(sub is None for sub in converted.values()):
                return None
        elif key in _SCHEMA_LISTS and isinstance(value, list):
            converted = [_strict_schema(sub, root, depth + 1) for sub in value]
            if any(sub is None for sub in converted):
                return None
        elif key == "items" and isinstance(value, dict):
            converted = _strict_schema(value, root, depth + 1)
            if converted is None:
                return None
        else:
            converted = value
        strict["anyOf" if key == "oneOf" else key] = converted
    if strict.get("type") == "object" or "properties" in strict:
        if strict.get("additionalProperties") not in (None, False):
            return None
        strict["additionalProperties"] = False
        strict["required"] = list(strict.get("properties", {}))
    return strict


_DROPPED = frozenset({"default", "discriminator"})
_SCHEMA_MAPS = frozenset({"properties", "$defs", "definitions"})
_SCHEMA_LISTS = frozenset({"anyOf", "allOf", "oneOf", "prefixItems"})
_MAX_SCHEMA_DEPTH = 64


def _new_client(
    model: str, base_url: str | None, api_key: str | None, timeout: float, max_retries: int
) -> Any:
    """An SDK client (it must not refer back to the model: see `PerLoop`)."""
    openai = require("openai", "openai")
    key = api_key or os.environ.get("OPENAI_API_KEY")
    if key is None:
        if base_url is None:
            raise ValidationError(
                f"OpenAIChatModel {model!r} has no API key: set OPENAI_API_KEY or pass "
                "api_key=... (for an OpenAI-compatible server, pass base_url=...)"
            )
        key = "not-needed"  # local OpenAI-compatible servers take any key
    return openai.AsyncOpenAI(
        api_key=key, base_url=base_url, timeout=timeout, max_retries=max_retries
    )


async def _close_client(client: Any) -> None:
    await client.close()


_POST_OPTIONS = {"extra_body": "extra_json", "extra_headers": "headers", "timeout": "timeout"}
"""``create()``'s request options and their names among ``post``'s options."""


def _post_arguments(request: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The body and options of ``client.post`` for the ``create()`` arguments `request`."""
    body = {name: value for name, value in request.items() if name not in _POST_OPTIONS}
    options = {_POST_OPTIONS[name]: request[name] for name in _POST_OPTIONS if name in request}
    return body, options


async def post_for_json(
    client: Any,
    path: str,
    body: dict[str, Any],
    options: dict[str, Any] | None = None,
    *,
    stream_cls: Any = None,
) -> Any:
    """POST `body` to `path` with the SDK client's generic ``post`` and return the reply as
    JSON data (text when the server answered with something else); a reply that says it is
    JSON and is not raises `json.JSONDecodeError`. With `stream_cls` (an SDK stream class),
    the reply is that stream, of JSON chunks. Authenticated as the SDK's own methods are
    (bearer key only), on SDK versions that let a request say so."""
    return await client.post(
        path,
        body=body,
        options=_bearer_auth(options or {}),
        cast_to=object,
        stream=stream_cls is not None,
        stream_cls=stream_cls,
    )


def _bearer_auth(options: dict[str, Any]) -> dict[str, Any]:
    """`options` with the bearer key as the only authentication, as ``create()`` asks for
    (a generic ``post`` would also send an admin key), where the SDK has the option."""
    return {**options, "security": {"bearer_auth": True}} if _has_security_option() else options


@functools.cache
def _has_security_option() -> bool:
    import openai

    return "security" in getattr(openai.RequestOptions, "__annotations__", {})


def _chat_response(model: str, completion: Any) -> ChatResponse:
    """The `ChatResponse` of a chat completion (JSON data, as the SDK's typed
    ``ChatCompletion`` holds it: the first choice's message, and the usage)."""
    if not isinstance(completion, dict):
        raise RuntimeError(
            f"the server's chat completion for model {model!r} is not a JSON object: "
            f"{_start_of(completion)}"
        )
    choices = completion.get("choices")
    if not choices:
        error = completion.get("error")  # some servers answer 200 with an error object
        said = error.get("message", error) if isinstance(error, dict) else error
        raise RuntimeError(
            f"the server's chat completion for model {model!r} has no choices"
            + ("" if said is None else f" (the server said: {said})")
        )
    try:
        message = choices[0]["message"]
        calls = tuple(
            ToolCall(
                id=call.get("id") or "",
                name=call["function"].get("name") or "",
                arguments=call["function"].get("arguments") or "",
            )
            for call in message.get("tool_calls") or ()
        )
        return ChatResponse(
            message=AssistantMessage(text=message.get("content"), tool_calls=calls),
            usage=_usage_of(completion.get("usage")),
        )
    except (KeyError, IndexError, TypeError, AttributeError) as error:
        raise RuntimeError(
            f"the server's chat completion for model {model!r} is malformed "
            f"{unreadable(error, completion)}"
        ) from None


def unreadable(error: Exception, reply: object) -> str:
    """Why a server's reply could not be read, for an error message: the error, then how
    the reply starts."""
    return f"({type(error).__name__}: {error}): {_start_of(reply)}"


def _start_of(reply: object) -> str:
    return repr(str(reply)[:200])


def _usage_of(usage: Any) -> Usage | None:
    """The usage of a chat completion (JSON)."""
    if not isinstance(usage, dict):
        return None
    return Usage(
        input_tokens=usage.get("prompt_tokens"), output_tokens=usage.get("completion_tokens")
    )


def _tool_to_wire(spec: ToolSpec) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": spec.name,
            "description": spec.description,
            "parameters": dict(spec.parameters),
        },
    }


def _to_wire(message: Message) -> dict[str, Any]:
    if isinstance(message, SystemMessage):
        return {"role": "system", "content": message.text}
    if isinstance(message, UserMessage):
        return {"role": "user", "content": message.text}
    if isinstance(message, ToolResultMessage):
        return {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.text}
    # "" rather than null for a turn that only called tools: the spec allows either, and
    # some servers (llama.cpp's) answer 500 to null
    wire: dict[str, Any] = {"role": "assistant", "content": message.text or ""}
    if message.tool_calls:
        wire["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments},
            }
            for call in message.tool_calls
        ]
    return wire
