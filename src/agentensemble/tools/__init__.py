"""Tools: `@tool` functions and methods, `AgentTool` objects, `ToolResult`, and the built-in
tools (`HumanInputTool`)."""

from typing import TYPE_CHECKING, Any

from agentensemble.tools._agent_tool import AgentTool
from agentensemble.tools._base import Tool
from agentensemble.tools._context import ToolContext
from agentensemble.tools._function import FunctionTool, tool
from agentensemble.tools._result import ToolResult

__all__ = [
    "AgentTool",
    "FunctionTool",
    "HumanInputTool",
    "Tool",
    "ToolContext",
    "ToolResult",
    "tool",
]

if TYPE_CHECKING:
    from agentensemble.tools._human_input import HumanInputTool


def __getattr__(name: str) -> Any:
    if name == "HumanInputTool":  # loads on first use: its tool schema is built at import
        from agentensemble.tools._human_input import HumanInputTool

        return HumanInputTool
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
