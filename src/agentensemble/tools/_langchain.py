"""LangChain tools (`langchain_core.tools.BaseTool`) in `tools=[...]`, schema included."""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from agentensemble.errors import ToolConfigurationError, describe_error
from agentensemble.models import ToolSpec
from agentensemble.tools._context import ToolContext
from agentensemble.tools._result import ToolResult, coerce_result

__all__ = ["LangChainTool", "langchain_tool"]


def langchain_tool(entry: object) -> LangChainTool | None:
    """`entry` as a tool if it is a LangChain `BaseTool`, else None. Nothing is imported: an
    object can only be a `BaseTool` once LangChain is loaded."""
    tools_module = sys.modules.get("langchain_core.tools")
    if tools_module is None or not isinstance(entry, tools_module.BaseTool):
        return None
    return LangChainTool(entry)


class LangChainTool:
    """A LangChain `BaseTool` as the agent loop sees it: its name, description and argument
    schema, called with ``ainvoke`` (LangChain runs a sync tool in a thread)."""

    def __init__(self, tool: Any) -> None:
        from langchain_core.utils.function_calling import convert_to_openai_tool

        function = convert_to_openai_tool(tool)["function"]
        self.tool = tool
        self._spec = ToolSpec(
            function["name"],
            function.get("description") or function["name"],
            function.get("parameters") or {"type": "object", "properties": {}},
        )

    @property
    def spec(self) -> ToolSpec:
        """The tool's name, description and JSON Schema, as LangChain describes them."""
        return self._spec

    async def invoke(self, arguments: str, context: ToolContext | None = None) -> ToolResult:
        """Call the tool with the model's arguments; its errors go back to the model."""
        try:
            parsed = json.loads(arguments) if arguments.strip() else {}
        except json.JSONDecodeError as error:
            return ToolResult.failure(f"Invalid JSON arguments: {error}")
        if not isinstance(parsed, dict):
            return ToolResult.failure("Tool arguments must be a JSON object")
        call = {  # a whole tool call: tools that inject the call id get one
            "name": self.tool.name,
            "args": parsed,
            "id": (context.tool_call_id if context else None) or f"call_{os.urandom(8).hex()}",
            "type": "tool_call",
        }
        try:
            message = await self.tool.ainvoke(call)
        except ToolConfigurationError:
            raise
        except Exception as error:  # LangChain's validation and the tool's own errors
            return ToolResult.failure(describe_error(error))
        return _result_of(message)


def _result_of(message: Any) -> ToolResult:
    """A LangChain `ToolMessage` (what a tool call returns) as a `ToolResult`: its content
    as text, its artifact as the structured output, an error status as a failure."""
    content = getattr(message, "content", message)
    if not isinstance(content, str):
        content = coerce_result(content).output
    if getattr(message, "status", "success") == "error":  # handle_tool_error=True
        return ToolResult.failure(content)
    artifact = getattr(message, "artifact", None)
    return ToolResult.success(content, structured=artifact)
