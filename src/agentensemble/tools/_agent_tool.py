"""The `AgentTool` protocol: a named tool taking one string input."""

from __future__ import annotations

import inspect
import json
from collections.abc import Awaitable
from typing import Any, Protocol, runtime_checkable

from agentensemble._calling import call_user_code
from agentensemble.errors import ToolConfigurationError, describe_error
from agentensemble.models import ToolSpec
from agentensemble.tools._context import ToolContext
from agentensemble.tools._result import ToolResult, coerce_result

__all__ = ["AgentTool", "AgentToolAdapter"]

_INPUT_SCHEMA = {
    "type": "object",
    "properties": {"input": {"type": "string", "description": "The input to pass to the tool"}},
    "required": ["input"],
}


@runtime_checkable
class AgentTool(Protocol):
    """A tool object with a `name`, a `description` and ``execute(input: str)``.

    `execute` may be sync or async and returns a `ToolResult` or a string. Sync
    implementations run in a worker thread, so they may block.
    """

    @property
    def name(self) -> str:
        """The tool name shown to the model."""
        ...

    @property
    def description(self) -> str:
        """What the tool does, shown to the model."""
        ...

    def execute(self, input: str) -> ToolResult | str | Awaitable[ToolResult | str]:
        """Run the tool on `input`."""
        ...


class AgentToolAdapter:
    """Presents an `AgentTool` to the agent loop with one string parameter: ``input``, or
    the one the tool advertises (`input_parameter`: a `ToolPipeline` advertises its first
    step's). Arguments that do not hold it go back to the model as the error, as for
    ``@tool`` functions."""

    def __init__(self, agent_tool: AgentTool) -> None:
        self.agent_tool = agent_tool
        self._parameter, schema = _advertised(agent_tool)
        self._spec = ToolSpec(agent_tool.name, agent_tool.description, schema)
        self._is_async = inspect.iscoroutinefunction(agent_tool.execute)

    @property
    def spec(self) -> ToolSpec:
        """The tool's name, description and one-string-parameter schema."""
        return self._spec

    async def invoke(self, arguments: str, context: ToolContext | None = None) -> ToolResult:
        """Read the string parameter from the JSON arguments and execute.

        An `AgentTool` takes one string, so `context` is not passed on."""
        text = read_input(arguments, self._parameter)
        if isinstance(text, ToolResult):
            return text
        try:
            value = await call_user_code(self.agent_tool.execute, text, is_async=self._is_async)
        except ToolConfigurationError:
            raise
        except Exception as error:
            return ToolResult.failure(describe_error(error))
        return coerce_result(value)


def _advertised(agent_tool: AgentTool) -> tuple[str, dict[str, Any]]:
    """The parameter an `AgentTool` takes, and the schema of its arguments."""
    advertised = getattr(agent_tool, "input_parameter", None)
    if advertised is None:
        return "input", _INPUT_SCHEMA
    name, schema = advertised
    return name, {"type": "object", "properties": {name: schema}, "required": [name]}


def read_input(arguments: str, parameter: str = "input") -> str | ToolResult:
    """The `parameter` argument as text; a failure for the model when the arguments are not
    a JSON object holding it (a bare JSON string is taken as the value itself)."""
    shape = f'{{"{parameter}": "..."}}'
    try:
        parsed = json.loads(arguments) if arguments.strip() else {}
    except (json.JSONDecodeError, TypeError):
        return ToolResult.failure(
            f"Invalid arguments: not valid JSON, expected an object like {shape}: {arguments[:200]}"
        )
    if isinstance(parsed, str):
        return parsed
    if not isinstance(parsed, dict) or parameter not in parsed:
        return ToolResult.failure(
            f"Invalid arguments: missing required parameter '{parameter}', expected an object "
            f"like {shape}"
        )
    value = parsed[parameter]
    return value if isinstance(value, str) else json.dumps(value)
