"""Memory across tasks and runs: scoped stores, semantic retrieval, entity facts.

A `MemoryStore` on the ensemble (``Ensemble(memory_store=MemoryStore.sqlite("memory.db"))``)
and scopes declared per task (``Task(memory=["research"])``): before a task, up to 5
entries of each declared scope go into its prompt; after it, its output is stored in each.
The same store across `run()` calls, or processes sharing the SQLite file, gives memory
across runs. The SQLite and embedding stores load on first use.
"""

from typing import TYPE_CHECKING, Any

from agentensemble.memory._entities import EntityMemory
from agentensemble.memory._in_memory import InMemoryStore
from agentensemble.memory._model import EvictionPolicy, MemoryEntry, MemoryScope
from agentensemble.memory._store import MemoryStore

__all__ = [
    "Embedder",
    "EmbeddingMemoryStore",
    "EntityMemory",
    "EvictionPolicy",
    "InMemoryStore",
    "MemoryEntry",
    "MemoryScope",
    "MemoryStore",
    "MemoryTool",
    "SqliteMemoryStore",
    "VectorIndex",
]

_LAZY = {
    "Embedder": "agentensemble.memory._embeddings",
    "EmbeddingMemoryStore": "agentensemble.memory._embeddings",
    "VectorIndex": "agentensemble.memory._embeddings",
    "SqliteMemoryStore": "agentensemble.memory._sqlite",
    "MemoryTool": "agentensemble.memory._tool",
}

if TYPE_CHECKING:
    from agentensemble.memory._embeddings import Embedder, EmbeddingMemoryStore, VectorIndex
    from agentensemble.memory._sqlite import SqliteMemoryStore
    from agentensemble.memory._tool import MemoryTool


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'agentensemble.memory' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
