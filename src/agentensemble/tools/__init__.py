"""Tools: `@tool` functions and methods, `AgentTool` objects and `ToolResult`."""

from agentensemble.tools._agent_tool import AgentTool
from agentensemble.tools._base import Tool
from agentensemble.tools._context import ToolContext
from agentensemble.tools._function import FunctionTool, tool
from agentensemble.tools._result import ToolResult

__all__ = ["AgentTool", "FunctionTool", "Tool", "ToolContext", "ToolResult", "tool"]
