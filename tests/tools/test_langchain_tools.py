"""LangChain `BaseTool`s in `tools=[...]`: schema, calls, errors."""

from __future__ import annotations

import pytest

pytest.importorskip("langchain_core")

from langchain_core.tools import StructuredTool, tool

from agentensemble import Agent, Ensemble, ScriptedModel, Task, tool_call
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
