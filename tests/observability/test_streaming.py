"""Token streaming: one path for streaming and non-streaming model calls."""

from collections.abc import AsyncIterator, Sequence

import pytest

from agentensemble import Agent, Ensemble, OpenAIChatModel, ScriptedModel, Task
from agentensemble.models import (
    AssistantMessage,
    ChatResponse,
    Message,
    ModelSettings,
    ToolSpec,
    Usage,
)

from ..integration.openai_server import OpenAIServer, OpenAIStub

ANSWER = "Streaming  keeps every space,\nnewline and  word exactly."


def test_tokens_reassemble_the_final_answer_exactly() -> None:
    tokens: list[str] = []
    output = Ensemble(
        tasks=[Task("Explain")],
        llm=ScriptedModel([ANSWER]),
        on_token=lambda event: tokens.append(event.token),
    ).run()
    assert len(tokens) > 5
    assert "".join(tokens) == ANSWER == output.raw


def test_without_token_listeners_the_model_is_not_asked_to_stream() -> None:
    class ChatOnly(ScriptedModel):
        async def stream(
            self,
            messages: Sequence[Message],
            *,
            tools: Sequence[ToolSpec] = (),
            settings: ModelSettings | None = None,
        ) -> AsyncIterator[str | ChatResponse]:
            raise AssertionError("stream() must not be used when nobody listens to tokens")
            yield  # pragma: no cover

    assert Ensemble(tasks=[Task("x")], llm=ChatOnly(["plain"])).run().raw == "plain"


def test_a_model_without_stream_works_when_tokens_are_wanted() -> None:
    class NoStream:
        async def chat(
            self,
            messages: Sequence[Message],
            *,
            tools: Sequence[ToolSpec] = (),
            settings: ModelSettings | None = None,
        ) -> ChatResponse:
            return ChatResponse(AssistantMessage(text="whole"), Usage(1, 1))

    tokens: list[str] = []
    output = Ensemble(
        tasks=[Task("x")], llm=NoStream(), on_token=lambda e: tokens.append(e.token)
    ).run()
    assert output.raw == "whole"
    assert tokens == []


def test_a_stream_that_ends_without_a_response_fails_the_task() -> None:
    class Truncated(ScriptedModel):
        async def stream(
            self,
            messages: Sequence[Message],
            *,
            tools: Sequence[ToolSpec] = (),
            settings: ModelSettings | None = None,
        ) -> AsyncIterator[str | ChatResponse]:
            yield "partial"

    from agentensemble import TaskExecutionError

    with pytest.raises(TaskExecutionError) as caught:
        Ensemble(tasks=[Task("x")], llm=Truncated([]), on_token=lambda e: None).run()
    assert "stream ended without a response" in str(caught.value.__cause__)


@pytest.mark.integration
def test_openai_model_streams_tokens_through_the_sdk() -> None:
    stub = OpenAIStub([ANSWER])
    tokens: list[str] = []
    with OpenAIServer(stub) as server:
        model = OpenAIChatModel("m", base_url=server.base_url, api_key="t")
        agent = Agent("Explainer", "Explain", llm=model)
        output = Ensemble(
            tasks=[Task("Explain", agent=agent)], on_token=lambda event: tokens.append(event.token)
        ).run()
    assert "".join(tokens) == ANSWER == output.raw
    assert len(tokens) == len(range(0, len(ANSWER), 4))
    assert stub.requests[0]["stream"] is True
    assert output.metrics.total_input_tokens == 11
