"""`ModelSettings`: checks, merging, and what each adapter makes of them."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from agentensemble import Agent, ModelSettings, ValidationError
from agentensemble.models import OpenAIChatModel, UserMessage
from agentensemble.models._settings import merge_settings


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: ModelSettings(temperature=-1), "ModelSettings temperature must be >= 0"),
        (
            lambda: ModelSettings(temperature="hot"),  # type: ignore[arg-type]
            "ModelSettings temperature must be a number",
        ),
        (lambda: ModelSettings(max_tokens=0), "ModelSettings max_tokens must be > 0, got: 0"),
        (lambda: ModelSettings(timeout=0), "ModelSettings timeout must be a positive number"),
        (
            lambda: ModelSettings(extra=[1]),  # type: ignore[arg-type]
            "ModelSettings extra must be a mapping",
        ),
        (
            lambda: Agent("A", "G", llm="openai:x", model_settings={}),  # type: ignore[arg-type]
            "Agent model_settings must",
        ),
    ],
)
def test_bad_settings_name_the_field(make: Any, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        make()


def test_merging_goes_from_general_to_specific() -> None:
    agent = ModelSettings(temperature=0.1, timeout=timedelta(seconds=30), extra={"a": 1})
    task = ModelSettings(temperature=0.7, extra={"b": 2})
    merged = merge_settings(agent, task)
    assert merged == ModelSettings(
        temperature=0.7, timeout=timedelta(seconds=30), extra={"a": 1, "b": 2}
    )
    assert merged is not None
    assert merged.timeout_seconds == 30.0
    assert merge_settings(None, None) is None
    assert merge_settings(None, task) is task


def test_the_openai_request_carries_every_setting() -> None:
    model = OpenAIChatModel("gpt-test", temperature=0.3, extra_body={"seed": 1})
    settings = ModelSettings(
        max_tokens=50,
        timeout=12,
        output_schema={"type": "object"},
        extra={"top_k": 4},
    )
    request = model._request([UserMessage("hi")], (), settings)
    assert request["temperature"] == 0.3  # the constructor's, since settings leave it unset
    assert request["max_tokens"] == 50
    assert request["timeout"] == 12.0
    assert request["response_format"]["json_schema"]["schema"] == {
        "type": "object",
        "additionalProperties": False,  # strict mode closes every object
        "required": [],
    }
    assert request["extra_body"] == {"seed": 1, "top_k": 4}
    assert "max_tokens" not in model._request([UserMessage("hi")], (), None)


class SyncChat:
    def chat(self, messages: Any, *, tools: Any = (), settings: Any = None) -> Any:
        return None


class OldChat:
    async def chat(self, messages: Any, *, tools: Any = ()) -> Any:
        return None


def test_models_that_cannot_work_are_rejected_at_construction() -> None:
    with pytest.raises(
        ValidationError, match=r"Agent llm must be a ChatModel whose chat\(\) is async"
    ):
        Agent("A", "G", llm=SyncChat())
    with pytest.raises(ValidationError, match=r"OldChat\.chat has no 'settings' parameter"):
        Agent("A", "G", llm=OldChat())
    with pytest.raises(ValidationError, match="Agent llm must be a ChatModel, a 'provider:model'"):
        Agent("A", "G", llm=42)
