"""Tools: `@tool` functions and methods, `AgentTool` objects, `ToolResult`, `ToolContext`,
and the built-in tools. The built-in tools load on first use (their schemas are built when
their module is imported)."""

from typing import TYPE_CHECKING, Any

from agentensemble.tools._agent_tool import AgentTool
from agentensemble.tools._base import Tool
from agentensemble.tools._context import ToolContext
from agentensemble.tools._function import FunctionTool, tool
from agentensemble.tools._result import ToolResult

__all__ = [
    "AgentTool",
    "BraveSearch",
    "CalculatorTool",
    "DateTimeTool",
    "FileReadTool",
    "FileWriteTool",
    "FunctionTool",
    "HttpTool",
    "HumanInputTool",
    "JsonParserTool",
    "McpTool",
    "McpTools",
    "PipelineErrorStrategy",
    "PipelineStep",
    "SearchResult",
    "SerpApiSearch",
    "TavilySearch",
    "Tool",
    "ToolContext",
    "ToolPipeline",
    "ToolResult",
    "WebScraperTool",
    "WebSearchProvider",
    "WebSearchTool",
    "tool",
]

_LAZY = {
    "BraveSearch": "agentensemble.tools._web",
    "HttpTool": "agentensemble.tools._http",
    "SearchResult": "agentensemble.tools._web",
    "SerpApiSearch": "agentensemble.tools._web",
    "TavilySearch": "agentensemble.tools._web",
    "WebScraperTool": "agentensemble.tools._web",
    "WebSearchProvider": "agentensemble.tools._web",
    "WebSearchTool": "agentensemble.tools._web",
    "CalculatorTool": "agentensemble.tools._calculator",
    "DateTimeTool": "agentensemble.tools._datetime",
    "FileReadTool": "agentensemble.tools._files",
    "FileWriteTool": "agentensemble.tools._files",
    "HumanInputTool": "agentensemble.tools._human_input",
    "JsonParserTool": "agentensemble.tools._json_parser",
    "McpTool": "agentensemble.tools._mcp",
    "McpTools": "agentensemble.tools._mcp",
    "PipelineErrorStrategy": "agentensemble.tools._pipeline",
    "PipelineStep": "agentensemble.tools._pipeline",
    "ToolPipeline": "agentensemble.tools._pipeline",
}

if TYPE_CHECKING:
    from agentensemble.tools._calculator import CalculatorTool
    from agentensemble.tools._datetime import DateTimeTool
    from agentensemble.tools._files import FileReadTool, FileWriteTool
    from agentensemble.tools._http import HttpTool
    from agentensemble.tools._human_input import HumanInputTool
    from agentensemble.tools._json_parser import JsonParserTool
    from agentensemble.tools._mcp import McpTool, McpTools
    from agentensemble.tools._pipeline import PipelineErrorStrategy, PipelineStep, ToolPipeline
    from agentensemble.tools._web import (
        BraveSearch,
        SearchResult,
        SerpApiSearch,
        TavilySearch,
        WebScraperTool,
        WebSearchProvider,
        WebSearchTool,
    )


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
