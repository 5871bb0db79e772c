"""Tools: `@tool` functions and methods, `AgentTool` objects, `ToolResult`, and the built-in
tools (`HumanInputTool`)."""

from agentensemble.tools._agent_tool import AgentTool
from agentensemble.tools._base import Tool
from agentensemble.tools._context import ToolContext
from agentensemble.tools._function import FunctionTool, tool
from agentensemble.tools._human_input import HumanInputTool
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
