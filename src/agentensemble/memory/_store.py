"""`MemoryStore`: where scoped memory lives, and the factories of the built-in stores."""

from __future__ import annotations

import abc
import os
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentensemble.memory._embeddings import Embedder, EmbeddingMemoryStore, VectorIndex
    from agentensemble.memory._in_memory import InMemoryStore
    from agentensemble.memory._model import EvictionPolicy, MemoryEntry
    from agentensemble.memory._sqlite import SqliteMemoryStore

__all__ = ["MemoryStore"]


class MemoryStore(abc.ABC):
    """Keeps `MemoryEntry` items per scope and finds the ones relevant to a query.

    Every method is async and never blocks the event loop. Any object with these four
    methods is accepted; subclassing is optional. Stores that hold resources (a database
    connection, a worker thread) release them in `aclose` (or ``async with store:``).
    """

    @abc.abstractmethod
    async def store(self, scope: str, entry: MemoryEntry) -> None:
        """Add `entry` to `scope`."""

    @abc.abstractmethod
    async def retrieve(self, scope: str, query: str, max_results: int) -> list[MemoryEntry]:
        """Up to `max_results` entries of `scope` relevant to `query` ([] for an unknown
        scope)."""

    @abc.abstractmethod
    async def evict(self, scope: str, policy: EvictionPolicy) -> int:
        """Remove the entries of `scope` that `policy` does not keep; how many went."""

    @abc.abstractmethod
    async def clear(self, scope: str) -> None:
        """Remove every entry of `scope`."""

    async def aclose(self) -> None:  # noqa: B027 (optional: most stores hold nothing)
        """Release what the store holds (nothing, unless the store says otherwise)."""

    async def __aenter__(self) -> MemoryStore:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    @classmethod
    def __subclasshook__(cls, candidate: type) -> Any:
        if cls is MemoryStore:
            methods = ("store", "retrieve", "evict", "clear")
            return all(callable(getattr(candidate, name, None)) for name in methods)
        return NotImplemented

    @staticmethod
    def in_memory() -> InMemoryStore:
        """Entries in this process only: `retrieve` ignores the query and returns the most
        recent entries, oldest first (BEHAVIOUR 11)."""
        from agentensemble.memory._in_memory import InMemoryStore

        return InMemoryStore()

    @staticmethod
    def sqlite(
        path: str | os.PathLike[str], *, busy_timeout: float = 5.0, inline: bool = True
    ) -> SqliteMemoryStore:
        """One SQLite file (WAL mode) that several tasks and processes can share; keyword
        retrieval with FTS5, by relevance then recency, topped up with the most recent
        entries. `busy_timeout`: seconds to wait for another process's write. `inline`: run
        an operation on the calling event loop's thread unless it would wait for a lock or
        its SQL runs past 1 ms (False: always on the store's worker thread)."""
        from agentensemble.memory._sqlite import SqliteMemoryStore

        return SqliteMemoryStore(path, busy_timeout=busy_timeout, inline=inline)

    @staticmethod
    def embeddings(
        embedder: Embedder,
        vector_index: VectorIndex | str | os.PathLike[str] | None = None,
    ) -> EmbeddingMemoryStore:
        """Semantic retrieval: entries are embedded by `embedder` and found by cosine
        similarity in `vector_index` (a path: exact search over vectors kept in that SQLite
        file; None: in this process only)."""
        from agentensemble.memory._embeddings import EmbeddingMemoryStore

        return EmbeddingMemoryStore(embedder, vector_index)
