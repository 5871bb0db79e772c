"""The in-process store of BEHAVIOUR 11: insertion order, most recent entries first served."""

from __future__ import annotations

import threading

from agentensemble.errors import ValidationError
from agentensemble.memory._model import (
    EvictionPolicy,
    MemoryEntry,
    check_max_results,
    check_query,
    check_scope,
)
from agentensemble.memory._store import MemoryStore

__all__ = ["InMemoryStore", "check_entry"]


def check_entry(entry: object) -> MemoryEntry:
    """`entry` if it is a `MemoryEntry`, else a ValidationError."""
    if not isinstance(entry, MemoryEntry):
        raise ValidationError(f"entry must be a MemoryEntry, got: {entry!r}")
    return entry


class InMemoryStore(MemoryStore):
    """Entries in a list per scope, in this process. `retrieve` ignores the query: it
    returns the `max_results` most recent entries, oldest first. Safe to share between
    tasks, runs and threads."""

    def __init__(self) -> None:
        self._scopes: dict[str, list[MemoryEntry]] = {}
        self._lock = threading.Lock()

    async def store(self, scope: str, entry: MemoryEntry) -> None:
        check_scope(scope)
        check_entry(entry)
        with self._lock:
            self._scopes.setdefault(scope, []).append(entry)

    async def retrieve(self, scope: str, query: str, max_results: int) -> list[MemoryEntry]:
        check_scope(scope)
        check_query(query)
        check_max_results(max_results)
        with self._lock:
            return list(self._scopes.get(scope, ())[-max_results:])

    async def evict(self, scope: str, policy: EvictionPolicy) -> int:
        check_scope(scope)
        with self._lock:
            entries = self._scopes.get(scope)
            if not entries:
                return 0
            kept = policy.keep(entries)
            self._scopes[scope] = kept
            return len(entries) - len(kept)

    async def clear(self, scope: str) -> None:
        check_scope(scope)
        with self._lock:
            self._scopes.pop(scope, None)

    def scopes(self) -> list[str]:
        """The scopes that hold entries."""
        with self._lock:
            return [name for name, entries in self._scopes.items() if entries]
