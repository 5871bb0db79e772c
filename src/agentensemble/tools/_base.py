"""The resolved form of a tool, as the agent loop sees it."""

from __future__ import annotations

from typing import Protocol

from agentensemble.models import ToolSpec
from agentensemble.tools._context import ToolContext
from agentensemble.tools._result import ToolResult

__all__ = ["Tool"]


class Tool(Protocol):
    """A tool ready to be offered to a model and invoked with JSON arguments."""

    @property
    def spec(self) -> ToolSpec:
        """Name, description and JSON Schema shown to the model."""
        ...

    async def invoke(self, arguments: str, context: ToolContext | None = None) -> ToolResult:
        """Run the tool with the model's raw JSON `arguments` for the task in `context`
        (the engine always passes one; tests of a tool alone may leave it out).

        Never raises for tool errors: they come back as a failed `ToolResult`.
        """
        ...
