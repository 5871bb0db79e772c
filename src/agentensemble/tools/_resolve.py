"""Validation and resolution of the objects users pass as tools."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from agentensemble._checks import as_tuple
from agentensemble.errors import ValidationError
from agentensemble.models import ToolSpec
from agentensemble.tools._agent_tool import AgentTool, AgentToolAdapter
from agentensemble.tools._base import Tool
from agentensemble.tools._function import FunctionTool, check_tool_name
from agentensemble.tools._langchain import langchain_tool

__all__ = ["NO_TOOLS", "ToolSet", "check_tools", "expand_tool", "tool_methods"]


def tool_methods(obj: object) -> list[FunctionTool]:
    """The `@tool` methods of `obj`, bound to it, in definition order."""
    found: dict[str, FunctionTool] = {}
    for klass in reversed(type(obj).__mro__):
        for attribute, value in vars(klass).items():
            if isinstance(value, FunctionTool) and value.is_method:
                found[attribute] = value.__get__(obj, type(obj))
    return list(found.values())


def expand_tool(entry: object) -> list[Tool]:
    """The tools one entry provides, or an empty list if it provides none."""
    if isinstance(entry, FunctionTool):
        return [entry]
    if isinstance(entry, AgentTool) and not isinstance(entry, type):
        return [AgentToolAdapter(entry)]
    from_mcp = _mcp_tools(entry)
    if from_mcp is not None:
        return from_mcp
    from_langchain = langchain_tool(entry)
    if from_langchain is not None:
        return [from_langchain]
    return list(tool_methods(entry))


def _mcp_tools(entry: object) -> list[Tool] | None:
    """The tools of a connected `McpTools` (or one `McpTool`); None for anything else. The
    MCP module is not imported: an object can only be one of these once it is loaded."""
    module = sys.modules.get("agentensemble.tools._mcp")
    if module is None:
        return None
    if isinstance(entry, module.McpTools):
        return list(entry.tools)  # raises, naming the server, when it is not connected
    if isinstance(entry, module.McpTool):
        return [entry]
    return None


def check_tools(tools: Sequence[object], *, owner: str) -> tuple[tuple[object, ...], ToolSet]:
    """Validate a tools list and resolve it in the same pass.

    `owner` is ``"Tool"`` (agents) or ``"Task tool"`` (tasks), as the messages say.
    """
    entries = as_tuple(tools, f"{owner}s")
    by_name: dict[str, Tool] = {}
    for index, entry in enumerate(entries):
        if entry is None:
            raise ValidationError(f"{owner} at index {index} must not be null")
        provided = expand_tool(entry)
        if not provided:
            raise ValidationError(
                f"{owner} at index {index} ({type(entry).__name__}) is neither an AgentTool, "
                "a LangChain tool, nor has @tool-annotated methods"
            )
        for item in provided:
            name = check_tool_name(item.spec.name, f"{owner} at index {index}")
            if name in by_name:
                raise ValidationError(
                    f"{owner} at index {index} reuses tool name '{name}'; tool names must be unique"
                )
            by_name[name] = item
    if not by_name:  # most tasks and agents: one shared empty set, not one each
        return entries, NO_TOOLS
    return entries, ToolSet(tuple(t.spec for t in by_name.values()), by_name)


@dataclass(frozen=True, slots=True)
class ToolSet:
    """Tools resolved for one agent run: specs to offer and a lookup by name."""

    specs: tuple[ToolSpec, ...]
    by_name: Mapping[str, Tool]
    """Read only: one set may serve many agents and calls (`NO_TOOLS` serves all without;
    a plain dict, not a read-only proxy, so that an agent still pickles)."""

    @classmethod
    def of(cls, *groups: Iterable[object]) -> ToolSet:
        """Resolve every entry of every group (later duplicates replace earlier ones)."""
        by_name: dict[str, Tool] = {}
        for group in groups:
            for entry in group:
                for resolved in expand_tool(entry):
                    by_name[resolved.spec.name] = resolved
        return cls(tuple(t.spec for t in by_name.values()), by_name)

    def __bool__(self) -> bool:
        return bool(self.by_name)


NO_TOOLS = ToolSet((), {})
"""No tools: the set of every task and agent without any, and of a model call that offers
none."""
