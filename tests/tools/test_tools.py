"""@tool functions and methods, AgentTool objects and ToolResult (BEHAVIOUR §7.1-7.4)."""

import asyncio
import json
from enum import Enum
from typing import Annotated

import pytest
from pydantic import BaseModel, Field

from agentensemble import ToolResult, tool
from agentensemble.tools import FunctionTool
from agentensemble.tools._resolve import ToolSet, tool_methods


class Unit(Enum):
    C = "C"
    F = "F"


class Point(BaseModel):
    x: int
    y: int


@tool
def weather(
    city: Annotated[str, Field(description="City name")], unit: Unit = Unit.C, days: int = 1
) -> str:
    """Forecast the weather for a city."""
    return f"{city}:{unit.value}:{days}"


def test_schema_and_description_come_from_the_signature_and_docstring() -> None:
    assert weather.spec.name == "weather"
    assert weather.spec.description == "Forecast the weather for a city."
    assert weather.spec.parameters == {
        "type": "object",
        "properties": {
            "city": {"type": "string", "description": "City name"},
            "unit": {"$ref": "#/$defs/Unit", "default": "C"},
            "days": {"type": "integer", "default": 1},
        },
        "required": ["city"],
        "$defs": {"Unit": {"enum": ["C", "F"], "title": "Unit", "type": "string"}},
    }


async def test_arguments_are_validated_and_converted() -> None:
    result = await weather.invoke('{"city": "Oslo", "unit": "F", "days": "3"}')
    assert result == ToolResult.success("Oslo:F:3")
    bad = await weather.invoke('{"city": "Oslo", "unit": "K"}')
    assert not bad.is_success
    assert bad.error_message is not None
    assert bad.error_message.startswith(
        "Invalid arguments for tool 'weather': unit: Input should be"
    )


async def test_empty_arguments_mean_no_arguments() -> None:
    @tool
    def ping() -> str:
        """Ping."""
        return "pong"

    assert (await ping.invoke("")).output == "pong"
    assert ping.spec.parameters == {"type": "object", "properties": {}}


def test_decorated_functions_stay_callable() -> None:
    assert weather("Rome") == "Rome:C:1"


async def test_name_and_description_overrides_and_async_functions() -> None:
    @tool(name="area", description="Area of a rectangle.")
    async def compute(width: float, height: float) -> float:
        await asyncio.sleep(0)
        return width * height

    assert (compute.spec.name, compute.spec.description) == ("area", "Area of a rectangle.")
    assert (await compute.invoke('{"width": 2, "height": 2.5}')).output == "5.0"


@pytest.mark.parametrize(
    ("returned", "expected"),
    [
        (None, ToolResult.success("")),
        ("text", ToolResult.success("text")),
        (ToolResult.failure("nope"), ToolResult.failure("nope")),
        ({"a": [1, 2]}, ToolResult.success('{"a":[1,2]}', structured={"a": [1, 2]})),
        (Point(x=1, y=2), ToolResult.success('{"x":1,"y":2}', structured=Point(x=1, y=2))),
    ],
)
async def test_return_values_become_results(returned: object, expected: ToolResult) -> None:
    @tool
    def give() -> object:
        """Return something."""
        return returned

    assert await give.invoke("{}") == expected


async def test_a_returned_string_is_a_success_whatever_it_says() -> None:
    @tool
    def report() -> str:
        """Report the last log line."""
        return "Error: disk 3 is degraded"  # the tool worked: this is what it found

    result = await report.invoke("{}")
    assert (result.is_success, result.text_for_model) == (True, "Error: disk 3 is degraded")


async def test_a_tool_says_it_failed_with_tool_result_failure() -> None:
    @tool
    def refuse() -> ToolResult:
        """Refuse."""
        return ToolResult.failure("not allowed")

    result = await refuse.invoke("{}")
    assert (result.is_success, result.text_for_model) == (False, "Error: not allowed")


async def test_exceptions_become_failures_with_the_real_message() -> None:
    @tool
    async def explode() -> str:
        """Explode."""
        raise ValueError("bad state")

    @tool
    def silent() -> str:
        """Raise with no message."""
        raise KeyError

    assert (await explode.invoke("{}")).text_for_model == "Error: bad state"
    assert (await silent.invoke("{}")).text_for_model == "Error: KeyError"


def test_tool_result_constructors() -> None:
    assert ToolResult.success("x", structured=[1]).structured_output == [1]
    assert ToolResult.failure(None).error_message == "Tool execution failed with no message"
    assert ToolResult.failure("why").text_for_model == "Error: why"


class Calculator:
    def __init__(self, offset: int) -> None:
        self.offset = offset

    @tool
    def add(self, a: int, b: int) -> int:
        """Add two numbers plus the offset."""
        return a + b + self.offset

    @tool
    async def negate(self, a: int) -> int:
        """Negate."""
        return -a

    def not_a_tool(self) -> None:
        """Plain method."""


async def test_methods_are_bound_to_their_object() -> None:
    calc = Calculator(offset=10)
    methods = tool_methods(calc)
    assert [m.spec.name for m in methods] == ["add", "negate"]
    assert "self" not in methods[0].spec.parameters["properties"]
    assert (await methods[0].invoke('{"a": 1, "b": 2}')).output == "13"
    assert (await calc.negate.invoke('{"a": 4}')).output == "-4"
    assert calc.add(1, 1) == 12
    assert isinstance(Calculator.add, FunctionTool)


class Echo:
    name = "echo"
    description = "Echo the input back."

    def __init__(self) -> None:
        self.inputs: list[str] = []

    def execute(self, input: str) -> str:
        self.inputs.append(input)
        return f"echo: {input}"


class AsyncEcho:
    name = "aecho"
    description = "Echo asynchronously."

    async def execute(self, input: str) -> ToolResult:
        return ToolResult.success(input[::-1])


async def test_agent_tools_take_one_string_input() -> None:
    echo = Echo()
    tools = ToolSet.of([echo, AsyncEcho()])
    spec = tools.by_name["echo"].spec
    assert spec.parameters == {
        "type": "object",
        "properties": {"input": {"type": "string", "description": "The input to pass to the tool"}},
        "required": ["input"],
    }
    assert (await tools.by_name["echo"].invoke('{"input": "hi"}')).output == "echo: hi"
    assert (await tools.by_name["aecho"].invoke('{"input": "abc"}')).output == "cba"


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ("not json", "not valid JSON"),
        ('{"order_id": "A-1"}', "missing required parameter 'input'"),
        ("[1, 2]", "missing required parameter 'input'"),
        ("{}", "missing required parameter 'input'"),
    ],
)
async def test_agent_tool_arguments_without_input_go_back_to_the_model(
    raw: str, reason: str
) -> None:
    echo = Echo()
    result = await ToolSet.of([echo]).by_name["echo"].invoke(raw)
    assert not result.is_success
    assert f"Invalid arguments: {reason}" in result.text_for_model
    assert '{"input": "..."}' in result.text_for_model
    assert echo.inputs == []


async def test_a_bare_json_string_is_the_input() -> None:
    echo = Echo()
    await ToolSet.of([echo]).by_name["echo"].invoke('"hello"')
    assert echo.inputs == ["hello"]


async def test_non_string_input_is_passed_as_json() -> None:
    echo = Echo()
    await ToolSet.of([echo]).by_name["echo"].invoke('{"input": {"a": 1}}')
    assert json.loads(echo.inputs[0]) == {"a": 1}


async def test_agent_tool_exceptions_and_none_results() -> None:
    class Broken:
        name, description = "broken", "Breaks."

        def execute(self, input: str) -> None:
            raise OSError("disk full")

    class Quiet:
        name, description = "quiet", "Returns nothing."

        def execute(self, input: str) -> None:
            return None

    tools = ToolSet.of([Broken(), Quiet()])
    arguments = '{"input": "x"}'
    assert (await tools.by_name["broken"].invoke(arguments)).text_for_model == "Error: disk full"
    assert await tools.by_name["quiet"].invoke(arguments) == ToolResult.success("")


def test_later_duplicates_replace_earlier_ones_across_groups() -> None:
    @tool(name="echo")
    def other_echo(input: str) -> str:
        """Another echo."""
        return input

    tools = ToolSet.of([Echo()], [other_echo])
    assert tools.by_name["echo"] is other_echo
    assert len(tools.specs) == 1


def test_declaring_a_tool_does_not_import_pydantic_its_first_use_builds_the_schema() -> None:
    import subprocess
    import sys
    import textwrap

    child = textwrap.dedent(
        """
        import sys
        import agentensemble

        @agentensemble.tool
        def forecast(city: str, days: int = 1) -> str:
            '''Forecast the weather.'''
            return city

        print("pydantic" in sys.modules)
        print(sorted(forecast.spec.parameters["properties"]))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", child], capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout.split("\n")[:2] == ["False", "['city', 'days']"]


def test_a_method_tools_schema_is_built_once_for_every_bound_copy() -> None:
    from agentensemble import tool

    class Weather:
        @tool
        def forecast(self, city: str) -> str:
            """Forecast the weather."""
            return city

    first, second = Weather().forecast, Weather().forecast
    assert first is not second
    assert first.spec is second.spec  # one schema, built once, shared by the copies
    assert list(first.spec.parameters["properties"]) == ["city"]
