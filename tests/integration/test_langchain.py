"""Any LangChain chat model works where a model is expected."""

from typing import Any, ClassVar

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from agentensemble import Agent, Ensemble, Task, tool
from agentensemble.models import LangChainChatModel

pytestmark = pytest.mark.integration


class RecordingFakeModel(GenericFakeChatModel):
    """The fake model, recording what it receives and accepting bound tools."""

    seen: ClassVar[list[list[BaseMessage]]] = []
    bound: ClassVar[list[list[dict[str, Any]]]] = []

    def bind_tools(self, tools: Any, **kwargs: Any) -> "RecordingFakeModel":
        self.bound.append(list(tools))
        return self

    async def ainvoke(self, input: Any, *args: Any, **kwargs: Any) -> Any:
        self.seen.append(list(input))
        return await super().ainvoke(input, *args, **kwargs)


@tool
def shout(text: str) -> str:
    """Upper-case the text."""
    return text.upper()


def test_a_langchain_model_passed_as_llm_is_wrapped_and_runs() -> None:
    usage = {"input_tokens": 5, "output_tokens": 3, "total_tokens": 8}
    model = GenericFakeChatModel(messages=iter([AIMessage(content="Paris.", usage_metadata=usage)]))
    ensemble = Ensemble(tasks=[Task("Find the capital of France")], llm=model)
    assert isinstance(ensemble._model, LangChainChatModel)

    output = ensemble.run()

    assert output.raw == "Paris."
    assert output.task_outputs[0].agent_role == "Researcher"
    assert (output.metrics.total_input_tokens, output.metrics.total_output_tokens) == (5, 3)


def test_tool_calls_through_the_adapter() -> None:
    replies = iter(
        [
            AIMessage(
                content="", tool_calls=[{"id": "t1", "name": "shout", "args": {"text": "hi"}}]
            ),
            AIMessage(content=[{"type": "text", "text": "Done: HI"}]),
        ]
    )
    model = RecordingFakeModel(messages=replies)
    RecordingFakeModel.seen, RecordingFakeModel.bound = [], []
    agent = Agent("Shouter", "Shout", llm=model, tools=[shout])

    output = Ensemble(tasks=[Task("Shout hi", agent=agent)]).run()

    assert output.raw == "Done: HI"
    assert output.task_outputs[0].tool_call_count == 1
    assert output.metrics.total_input_tokens == -1  # the fake model reports no usage
    assert RecordingFakeModel.bound[0][0]["function"]["name"] == "shout"
    second = RecordingFakeModel.seen[1]
    assert [type(m) for m in second] == [SystemMessage, HumanMessage, AIMessage, ToolMessage]
    assistant, tool_result = second[2], second[3]
    assert isinstance(assistant, AIMessage)
    assert isinstance(tool_result, ToolMessage)
    assert assistant.tool_calls[0]["args"] == {"text": "hi"}
    assert (tool_result.content, tool_result.tool_call_id) == ("HI", "t1")


def test_models_without_bind_tools_are_not_bound_when_no_tools_are_offered() -> None:
    model = GenericFakeChatModel(messages=iter(["plain"]))
    output = Ensemble(tasks=[Task("Say something")], llm=model).run()
    assert output.raw == "plain"


@pytest.mark.integration
def test_chat_openai_works_across_asyncio_runs_and_sync_callers() -> None:
    """langchain-openai caches its async HTTP client per process, bound to the first loop:
    the adapter runs every call on the library's one loop, so a second ``asyncio.run()`` and
    a sync ``run()`` after async ones all work."""
    import asyncio

    from langchain_openai import ChatOpenAI
    from pydantic import SecretStr

    from .openai_server import OpenAIServer, OpenAIStub

    stub = OpenAIStub(["one", "two", "three", "four"])
    with OpenAIServer(stub) as server:
        answers = []
        for _ in range(3):
            key = SecretStr("t")
            llm = ChatOpenAI(model="m", base_url=server.base_url, api_key=key, max_retries=0)
            ensemble = Ensemble(tasks=[Task("Say a number")], llm=llm)
            answers.append(asyncio.run(ensemble.arun()).raw)
        answers.append(ensemble.run().raw)
    assert answers == ["one", "two", "three", "four"]


def test_a_langchain_model_streams_tokens_to_listeners() -> None:
    tokens: list[str] = []

    class Tokens:
        async def on_token(self, event: Any) -> None:
            tokens.append(event.token)

    model = GenericFakeChatModel(messages=iter([AIMessage(content="Bees dance to talk")]))
    output = Ensemble(tasks=[Task("Say something")], llm=model, listeners=[Tokens()]).run()
    assert output.raw == "Bees dance to talk"
    assert len(tokens) > 1  # streamed in pieces, not handed over whole
    assert "".join(tokens) == "Bees dance to talk"
