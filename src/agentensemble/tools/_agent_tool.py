"""The `AgentTool` protocol: a named tool taking one string input."""

from __future__ import annotations

import inspect
import json
from collections.abc import Awaitable
from typing import Protocol, runtime_checkable

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
    """Presents an `AgentTool` to the agent loop with a single ``input`` string parameter."""

    def __init__(self, agent_tool: AgentTool) -> None:
        self.agent_tool = agent_tool
        self._spec = ToolSpec(agent_tool.name, agent_tool.description, _INPUT_SCHEMA)
        self._is_async = inspect.iscoroutinefunction(agent_tool.execute)

    @property
    def spec(self) -> ToolSpec:
        """The tool's name, description and one-string-parameter schema."""
        return self._spec

    async def invoke(self, arguments: str, context: ToolContext | None = None) -> ToolResult:
        """Extract ``input`` from the JSON arguments (or pass them raw) and execute.

        An `AgentTool` takes one string, so `context` is not passed on."""
        text = extract_input(arguments)
        try:
            value = await call_user_code(self.agent_tool.execute, text, is_async=self._is_async)
        except ToolConfigurationError:
            raise
        except Exception as error:
            return ToolResult.failure(describe_error(error))
        return coerce_result(value)


def extract_input(arguments: str) -> str:
    """The ``input`` argument as text; the raw arguments when they are not such an object."""
    try:
        parsed = json.loads(arguments)
    except (json.JSONDecodeError, TypeError):
        return arguments
    if not isinstance(parsed, dict) or "input" not in parsed:
        return arguments
    value = parsed["input"]
    return value if isinstance(value, str) else json.dumps(value)
