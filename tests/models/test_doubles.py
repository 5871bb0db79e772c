import json
from collections.abc import Sequence
from typing import Any

import pytest

from agentensemble.models import (
    AssistantMessage,
    ChatResponse,
    FunctionModel,
    Message,
    ScriptedModel,
    ScriptExhaustedError,
    SystemMessage,
    ToolCall,
    ToolSpec,
    Usage,
    UserMessage,
    tool_call,
)

MESSAGES = (SystemMessage("sys"), UserMessage("hi"))


async def test_scripted_model_replies_in_order_and_records_requests() -> None:
    call = ToolCall(id="c1", name="search", arguments='{"q": "x"}')
    model = ScriptedModel([call, "done"], usage=Usage(3, 4))
    spec = ToolSpec("search", "Search.", {"type": "object", "properties": {}})

    first = await model.chat(MESSAGES, tools=[spec])
    second = await model.chat(MESSAGES)

    assert first == ChatResponse(AssistantMessage(tool_calls=(call,)), Usage(3, 4))
    assert second.message.text == "done"
    assert [r.tools for r in model.requests] == [(spec,), ()]
    assert model.requests[0].messages == MESSAGES
    assert model.remaining == 0


async def test_scripted_model_says_clearly_when_it_runs_out() -> None:
    model = ScriptedModel(["only"])
    await model.chat(MESSAGES)
    with pytest.raises(ScriptExhaustedError, match="given 1 replies and received request 2"):
        await model.chat(MESSAGES)


async def test_scripted_model_accepts_every_reply_form() -> None:
    calls = [tool_call("a"), tool_call("b", x=1)]
    full = ChatResponse(AssistantMessage(text="t"), Usage(1, 2))
    model = ScriptedModel([calls, AssistantMessage(text="m"), full])
    assert (await model.chat(MESSAGES)).message.tool_calls == tuple(calls)
    assert (await model.chat(MESSAGES)).message.text == "m"
    assert await model.chat(MESSAGES) is full


async def test_unsupported_reply_is_a_type_error() -> None:
    model = ScriptedModel([[]])
    with pytest.raises(
        TypeError, match=r"must be a str \(the answer\), a ToolCall or a list of them"
    ):
        await model.chat(MESSAGES)


async def test_streaming_reassembles_the_exact_answer() -> None:
    text = "Hello  wide world, with  double spaces "
    model = ScriptedModel([text])
    pieces = [item async for item in model.stream(MESSAGES)]
    deltas, final = pieces[:-1], pieces[-1]
    assert len(deltas) > 3
    assert "".join(str(d) for d in deltas) == text
    assert isinstance(final, ChatResponse)
    assert final.message.text == text


async def test_function_model_sync_and_async() -> None:
    def sync_fn(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
        return f"{len(messages)} messages"

    async def async_fn(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ToolCall:
        return tool_call("lookup", key="k")

    assert (await FunctionModel(sync_fn).chat(MESSAGES)).message.text == "2 messages"
    reply = await FunctionModel(async_fn).chat(MESSAGES)
    assert reply.message.tool_calls[0].name == "lookup"
    assert json.loads(reply.message.tool_calls[0].arguments) == {"key": "k"}


def test_tool_call_ids_are_unique() -> None:
    assert tool_call("x").id != tool_call("x").id


@pytest.mark.parametrize("reply", [42, None, {"text": "hi"}], ids=["int", "none", "dict"])
def test_a_reply_of_the_wrong_kind_says_what_it_was_and_what_it_must_be(reply: object) -> None:
    from agentensemble import Ensemble, Task, TaskExecutionError

    wrong: Any = reply  # what a typo in a user's test double returns
    ensemble = Ensemble(tasks=[Task("Answer")], llm=FunctionModel(lambda m, t: wrong))
    with pytest.raises(TaskExecutionError) as raised:
        ensemble.run()
    message = str(raised.value)
    assert (
        "A test model's reply must be a str (the answer), a ToolCall or a list of them" in message
    )
    assert f"got: {type(reply).__name__} {reply!r}" in message
