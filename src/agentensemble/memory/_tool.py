"""`MemoryTool`: an agent stores and looks up facts in one memory scope while it works."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from agentensemble._logging import get_logger
from agentensemble.errors import ValidationError
from agentensemble.memory._model import MemoryEntry, MemoryScope
from agentensemble.memory._store import MemoryStore
from agentensemble.tools import ToolContext, ToolResult, tool

__all__ = ["MemoryTool"]

logger = get_logger("agentensemble.memory")

RETRIEVE_MAX = 5
"""Entries `retrieve_memory` returns at most."""


class MemoryTool:
    """Two tools bound to one scope: ``store_memory(key, value)`` and
    ``retrieve_memory(query)`` (BEHAVIOUR 11).

    Without a `store` the tools use the ensemble's `memory_store` (a run without one is a
    `ValidationError` before any model call), and their operations count in the task's
    metrics, events and trace. Sharing the ensemble's store unifies what tasks remember
    automatically with what agents store explicitly. `store_memory` appends: a key stored
    twice is retrieved twice, newest last. Give an agent one `MemoryTool`: the tool names are
    fixed.
    """

    def __init__(self, scope: str | MemoryScope, store: MemoryStore | None = None) -> None:
        name = scope.name if isinstance(scope, MemoryScope) else scope
        if not isinstance(name, str) or not name.strip():
            raise ValidationError(f"MemoryTool scope must not be blank, got: {scope!r}")
        if store is not None and not isinstance(store, MemoryStore):
            raise ValidationError(f"MemoryTool store must be a MemoryStore, got: {store!r}")
        self.scope = name
        self.memory_store = store

    @classmethod
    def of(cls, scope: str | MemoryScope, store: MemoryStore | None = None) -> MemoryTool:
        """A memory tool for `scope`, on `store` (or on the ensemble's store)."""
        return cls(scope, store)

    def __repr__(self) -> str:
        return f"MemoryTool(scope={self.scope!r})"

    def _store_for(self, context: ToolContext) -> MemoryStore | None:
        return self.memory_store if self.memory_store is not None else context.memory_store

    @tool(name="store_memory")
    async def store_memory(
        self,
        context: ToolContext,
        key: Annotated[str, Field(description="A short key or label for the information")],
        value: Annotated[str, Field(description="The information or fact to remember")],
    ) -> ToolResult | str:
        """Store a fact or piece of information in memory for future reference."""
        if not key.strip():
            return ToolResult.failure("key must not be blank")
        if not value.strip():
            return ToolResult.failure("value must not be blank")
        store = self._store_for(context)
        if store is None:
            return ToolResult.failure("No memory store is configured for this run")
        entry = MemoryEntry(f"{key}: {value}", metadata={"key": key, "source": "MemoryTool"})
        await store.store(self.scope, entry)
        logger.debug("MemoryTool stored entry | scope: '%s' | key: '%s'", self.scope, key)
        return f"Stored: {key}"

    @tool(name="retrieve_memory")
    async def retrieve_memory(
        self,
        context: ToolContext,
        query: Annotated[str, Field(description="The search query to find relevant memories")],
    ) -> ToolResult | str:
        """Retrieve relevant information from memory using a search query."""
        if not query.strip():
            return "No query provided"
        store = self._store_for(context)
        if store is None:
            return ToolResult.failure("No memory store is configured for this run")
        entries = await store.retrieve(self.scope, query, RETRIEVE_MAX)
        if not entries:
            return f"No relevant memories found for: {query}"
        return "Retrieved memories:\n" + "\n".join(f"- {entry.content}" for entry in entries)
