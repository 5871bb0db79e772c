import pytest

from agentensemble import ValidationError
from agentensemble.models import OpenAIChatModel, ScriptedModel, resolve_model


def test_a_chat_model_is_returned_as_is() -> None:
    model = ScriptedModel([])
    assert resolve_model(model, field="llm") is model


def test_openai_string() -> None:
    model = resolve_model("openai:gpt-4o-mini", field="llm")
    assert isinstance(model, OpenAIChatModel)
    assert (model.model, model.base_url) == ("gpt-4o-mini", None)


def test_ollama_string_uses_its_openai_compatible_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OLLAMA_BASE_URL", raising=False)
    model = resolve_model("ollama:llama3.2", field="llm")
    assert isinstance(model, OpenAIChatModel)
    assert (model.model, model.base_url) == ("llama3.2", "http://localhost:11434/v1")


def test_openai_compatible_with_inline_base_url() -> None:
    model = resolve_model("openai-compatible:qwen2.5@http://127.0.0.1:8000/v1", field="llm")
    assert isinstance(model, OpenAIChatModel)
    assert (model.model, model.base_url) == ("qwen2.5", "http://127.0.0.1:8000/v1")


def test_openai_compatible_takes_base_url_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    model = resolve_model("openai-compatible:m", field="llm")
    assert isinstance(model, OpenAIChatModel)
    assert model.base_url == "http://127.0.0.1:9/v1"


def test_openai_compatible_without_base_url_is_an_error() -> None:
    with pytest.raises(ValidationError, match="'openai-compatible:m' needs a base URL"):
        resolve_model("openai-compatible:m", field="Agent llm")


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("gpt-4o", "Agent llm string must look like 'provider:model'.*got: 'gpt-4o'"),
        ("openai:", "got: 'openai:'"),
        ("anthropix:claude", r"unknown provider 'anthropix' in 'anthropix:claude'"),
    ],
)
def test_bad_model_strings(spec: str, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        resolve_model(spec, field="Agent llm")


def test_an_object_that_is_no_model() -> None:
    with pytest.raises(ValidationError, match=r"Agent llm must be a ChatModel.*got: int"):
        resolve_model(42, field="Agent llm")
