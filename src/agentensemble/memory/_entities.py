"""`EntityMemory`: known facts about named entities, shown to every task of a run."""

from __future__ import annotations

import threading
from collections.abc import Mapping

from agentensemble.errors import ValidationError

__all__ = ["EntityMemory"]


class EntityMemory:
    """One fact per entity name (names are trimmed; a later `put` replaces the fact).

    Give it to ``Ensemble(entity_memory=...)``: a task's prompt then has an
    ``## Entity Knowledge`` section with the facts about the entities it names (in its
    description, expected output or context, as whole words in any case; BEHAVIOUR 3.2
    lists every fact, which grows every prompt with every entity). Safe to share between
    runs and threads.
    """

    def __init__(self, facts: Mapping[str, str] | None = None) -> None:
        self._facts: dict[str, str] = {}
        self._lock = threading.Lock()
        if facts is not None and not isinstance(facts, Mapping):
            raise ValidationError(
                f"EntityMemory facts must be a mapping of entity name to fact, got: {facts!r}"
            )
        for name, fact in (facts or {}).items():
            self.put(name, fact)

    def put(self, entity_name: str, fact: str) -> str | None:
        """Record `fact` about `entity_name`; returns the fact it replaced (None for a new
        entity)."""
        if not isinstance(entity_name, str) or not entity_name.strip():
            raise ValidationError(f"entity_name must not be blank, got: {entity_name!r}")
        if not isinstance(fact, str) or not fact.strip():
            raise ValidationError(
                f"fact about {entity_name!r} must be a non-blank string, got: {fact!r}"
            )
        name = entity_name.strip()
        with self._lock:
            replaced = self._facts.get(name)
            self._facts[name] = fact
        return replaced

    def get(self, entity_name: str) -> str | None:
        """The fact about `entity_name` (trimmed), if any."""
        with self._lock:
            return self._facts.get(entity_name.strip())

    def remove(self, entity_name: str) -> bool:
        """Forget `entity_name`; whether it was known."""
        with self._lock:
            return self._facts.pop(entity_name.strip(), None) is not None

    def facts(self) -> dict[str, str]:
        """Every fact, by entity name, in the order the names were first recorded."""
        with self._lock:
            return dict(self._facts)

    def __len__(self) -> int:
        with self._lock:
            return len(self._facts)

    def __repr__(self) -> str:
        return f"EntityMemory({len(self)} entities)"
