"""The resolved form of a tool, as the agent loop sees it."""

from __future__ import annotations

from typing import Protocol

from agentensemble.models import ToolSpec
from agentensemble.tools._result import ToolResult

__all__ = ["Tool"]


class Tool(Protocol):
    """A tool ready to be offered to a model and invoked with JSON arguments."""

    @property
    def spec(self) -> ToolSpec:
        """Name, description and JSON Schema shown to the model."""
        ...

    async def invoke(self, arguments: str) -> ToolResult:
        """Run the tool with the model's raw JSON `arguments`. Never raises for tool errors."""
        ...
