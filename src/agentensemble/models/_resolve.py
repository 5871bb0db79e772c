"""Turn whatever the user passed as `llm` into a `ChatModel`."""

from __future__ import annotations

import os
from typing import cast

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
    if _is_chat_model(llm):
        return cast(ChatModel, llm)
    raise ValidationError(
        f"{field} must be a ChatModel, a 'provider:model' string or a LangChain chat model, "
        f"got: {type(llm).__name__}"
    )


_CHAT_MODEL_CLASSES: dict[type, bool] = {}
"""A memo of protocol checks by class (a runtime protocol check costs ~20 us)."""


def _is_chat_model(obj: object) -> bool:
    cls = type(obj)
    known = _CHAT_MODEL_CLASSES.get(cls)
    if known is None:
        known = _CHAT_MODEL_CLASSES[cls] = issubclass(cls, ChatModel)
    return known


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
    base_url = os.environ.get("OPENAI_BASE_URL")
    if base_url is None:
        raise ValidationError(
            f"{field} '{spec}' needs a base URL: write 'openai-compatible:MODEL@http://host/v1' "
            "or set OPENAI_BASE_URL"
        )
    return OpenAIChatModel(model, base_url=base_url)
