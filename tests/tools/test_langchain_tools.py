"""LangChain `BaseTool`s in `tools=[...]`: schema, calls, errors."""

from __future__ import annotations

from typing import Annotated

import pytest
from langchain_core.tools import InjectedToolCallId, StructuredTool, ToolException, tool

from agentensemble import Agent, Ensemble, ScriptedModel, Task, ToolContext, tool_call
from agentensemble.tools._resolve import expand_tool


@tool
def multiply(a: int, b: int) -> int:
    """Multiply two integers."""
    return a * b


def _fail(city: str) -> str:
    raise ValueError(f"no weather for {city}")


weather = StructuredTool.from_function(_fail, name="weather", description="The weather in a city.")


def test_the_schema_is_langchains() -> None:
    (resolved,) = expand_tool(multiply)
    assert resolved.spec.name == "multiply"
    assert resolved.spec.description == "Multiply two integers."
    assert resolved.spec.parameters["properties"] == {
        "a": {"type": "integer"},
        "b": {"type": "integer"},
    }
    assert resolved.spec.parameters["required"] == ["a", "b"]


async def test_an_agent_calls_a_langchain_tool_and_sees_its_result() -> None:
    llm = ScriptedModel([tool_call("multiply", a=6, b=7), "42"])
    agent = Agent("Mathematician", "Multiply", llm=llm, tools=[multiply])
    output = await Ensemble(tasks=[Task("What is 6 times 7?", agent=agent)]).arun()
    assert output.raw == "42"
    tool_message = llm.requests[1].messages[-1]
    assert tool_message.text == "42"


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ('{"city": "Oslo"}', "no weather for Oslo"),
        ("{not json", "Invalid JSON arguments"),
        ("[1, 2]", "Tool arguments must be a JSON object"),
        ("{}", "city"),  # LangChain's own validation: the missing field is named
    ],
)
async def test_errors_go_back_to_the_model(arguments: str, message: str) -> None:
    (resolved,) = expand_tool(weather)
    result = await resolved.invoke(arguments)
    assert not result.is_success
    assert message in (result.error_message or "")


@tool
def ticket(title: str, call_id: Annotated[str, InjectedToolCallId]) -> str:
    """Open a ticket."""
    return f"{title} opened by {call_id}"


@tool(response_format="content_and_artifact")
def search(query: str) -> tuple[str, list[int]]:
    """Search."""
    return f"2 hits for {query}", [1, 2]


def _refuse(reason: str) -> str:
    raise ToolException(f"refused: {reason}")


handled = StructuredTool.from_function(
    _refuse, name="refuse", description="Refuse.", handle_tool_error=True
)


async def test_injected_call_ids_artifacts_and_handled_errors() -> None:
    context = ToolContext(
        run_id="r", task_id="t", agent_role="A", task_description="d", tool_call_id="call_7"
    )
    (opened,) = expand_tool(ticket)
    assert (await opened.invoke('{"title": "Bug"}', context)).output == "Bug opened by call_7"
    assert "call_id" not in opened.spec.parameters["properties"]
    (found,) = expand_tool(search)
    result = await found.invoke('{"query": "x"}')
    assert (result.output, result.structured_output) == ("2 hits for x", [1, 2])
    (refused,) = expand_tool(handled)
    result = await refused.invoke('{"reason": "no"}')
    assert not result.is_success
    assert result.error_message == "refused: no"
