"""Turn whatever the user passed as `llm` into a `ChatModel`."""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable
from typing import Any, cast

from agentensemble.errors import ValidationError
from agentensemble.models._langchain import LangChainChatModel, is_langchain_chat_model
from agentensemble.models._protocol import ChatModel

__all__ = ["resolve_model"]

_PROVIDERS = ("openai", "ollama", "openai-compatible")
_OLLAMA_DEFAULT_URL = "http://localhost:11434/v1"


def resolve_model(llm: object, *, field: str) -> ChatModel:
    """Return `llm` as a `ChatModel`; `field` names the setting in error messages."""
    if isinstance(llm, str):
        return _from_string(llm, field=field)
    if is_langchain_chat_model(llm):
        return LangChainChatModel(llm)
    problem = _chat_model_problem(type(llm))
    if problem is None:
        return cast(ChatModel, llm)
    raise ValidationError(f"{field} {problem}")


_CHECKED_CLASSES: dict[type, str | None] = {}
"""What is wrong with each class checked so far (None: nothing); a check costs ~20 us."""


def _chat_model_problem(cls: type) -> str | None:
    if cls not in _CHECKED_CLASSES:
        _CHECKED_CLASSES[cls] = _describe_problem(cls)
    return _CHECKED_CLASSES[cls]


def _describe_problem(cls: type) -> str | None:
    chat = getattr(cls, "chat", None)
    if chat is None or not callable(chat):
        return (
            "must be a ChatModel, a 'provider:model' string or a LangChain chat model, "
            f"got: {cls.__name__}"
        )
    if not inspect.iscoroutinefunction(chat):
        return (
            f"must be a ChatModel whose chat() is async (async def chat(self, messages, *, "
            f"tools=(), settings=None)); {cls.__name__}.chat is not"
        )
    if not _accepts_keyword(chat, "settings"):
        return (
            f"must be a ChatModel whose chat() accepts settings: {cls.__name__}.chat has no "
            "'settings' parameter (async def chat(self, messages, *, tools=(), settings=None))"
        )
    return None


def _accepts_keyword(function: Callable[..., Any], name: str) -> bool:
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return True  # not introspectable (a C extension): take it on trust
    return any(
        parameter.kind is parameter.VAR_KEYWORD
        or (parameter.name == name and parameter.kind is not parameter.POSITIONAL_ONLY)
        for parameter in parameters
    )


def _from_string(spec: str, *, field: str) -> ChatModel:
    from agentensemble.models._openai import OpenAIChatModel

    provider, sep, model = spec.partition(":")
    if not sep or not model.strip():
        raise ValidationError(
            f"{field} string must look like 'provider:model' (e.g. 'openai:gpt-4o-mini'), "
            f"got: '{spec}'"
        )
    if provider == "openai":
        return OpenAIChatModel(model)
    if provider == "ollama":
        return OpenAIChatModel(
            model, base_url=os.environ.get("OLLAMA_BASE_URL", _OLLAMA_DEFAULT_URL), api_key="ollama"
        )
    if provider == "openai-compatible":
        return _openai_compatible(model, spec=spec, field=field)
    known = ", ".join(_PROVIDERS)
    raise ValidationError(
        f"{field} names unknown provider '{provider}' in '{spec}'. Known: [{known}]"
    )


def _openai_compatible(model: str, *, spec: str, field: str) -> ChatModel:
    from agentensemble.models._openai import OpenAIChatModel

    name, at, url = model.rpartition("@")
    if at and url.startswith(("http://", "https://")):
        return OpenAIChatModel(name, base_url=url)
    if at:
        raise ValidationError(
            f"{field} '{spec}': the base URL after '@' must start with http:// or https://, "
            f"got: '{url}'"
        )
    base_url = os.environ.get("OPENAI_BASE_URL")
    if base_url is None:
        raise ValidationError(
            f"{field} '{spec}' needs a base URL: write 'openai-compatible:MODEL@http://host/v1' "
            "or set OPENAI_BASE_URL"
        )
    return OpenAIChatModel(model, base_url=base_url)
