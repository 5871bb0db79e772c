"""What memory holds and how long it keeps it: `MemoryEntry`, `EvictionPolicy`, `MemoryScope`."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from types import MappingProxyType
from typing import Any

from agentensemble.errors import ValidationError

__all__ = [
    "EvictionPolicy",
    "MemoryEntry",
    "MemoryScope",
    "check_max_results",
    "check_query",
    "check_scope",
]


def _now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True, slots=True)
class MemoryEntry:
    """One remembered item: its text, an optional structured value, when it was stored, and
    string metadata (the engine sets ``agent_role`` and ``task_description``)."""

    AGENT_ROLE = "agent_role"
    """Metadata key of the role of the agent whose output this is."""
    TASK_DESCRIPTION = "task_description"
    """Metadata key of the description of the task whose output this is."""

    content: str
    structured_content: Any = None
    """The task's parsed output, when it had an `output_type` (JSON-serialisable for the
    SQLite store, which keeps it as JSON)."""
    stored_at: datetime = field(default_factory=_now)
    metadata: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.content, str):
            raise ValidationError(
                f"MemoryEntry content must be a string, got: {type(self.content).__name__}"
            )
        if not isinstance(self.stored_at, datetime) or self.stored_at.tzinfo is None:
            raise ValidationError(
                f"MemoryEntry stored_at must be a timezone-aware datetime, got: {self.stored_at!r}"
            )
        object.__setattr__(self, "metadata", MappingProxyType(dict(self.metadata)))

    def get_meta(self, key: str) -> str | None:
        """The metadata value under `key`, if any."""
        return self.metadata.get(key)


@dataclass(frozen=True, slots=True)
class EvictionPolicy:
    """Which entries of a scope to keep after each store: the last `n`
    (`keep_last_entries`) or those stored within a period (`keep_entries_within`)."""

    max_entries: int | None = None
    max_age: timedelta | None = None

    def __post_init__(self) -> None:
        if self.max_entries is None and self.max_age is None:
            raise ValidationError(
                "EvictionPolicy needs max_entries or max_age: use "
                "EvictionPolicy.keep_last_entries(n) or EvictionPolicy.keep_entries_within(d)"
            )
        if self.max_entries is not None:
            _check_count(self.max_entries)
        if self.max_age is not None and (
            not isinstance(self.max_age, timedelta) or self.max_age <= timedelta(0)
        ):
            raise ValidationError(
                f"keep_entries_within duration must be positive, got: {self.max_age!r}"
            )

    @classmethod
    def keep_last_entries(cls, n: int) -> EvictionPolicy:
        """Keep the `n` most recent entries."""
        return cls(max_entries=n)

    @classmethod
    def keep_entries_within(cls, duration: timedelta | float) -> EvictionPolicy:
        """Keep entries stored strictly after ``now - duration`` (a timedelta or seconds)."""
        if duration is None:
            raise ValidationError("keep_entries_within duration must not be None")
        seconds = duration.total_seconds() if isinstance(duration, timedelta) else duration
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
            raise ValidationError(
                f"keep_entries_within duration must be a timedelta or seconds, got: {duration!r}"
            )
        if not seconds > 0 or not math.isfinite(seconds):
            raise ValidationError(
                f"keep_entries_within duration must be positive, got: {duration!r}"
            )
        return cls(max_age=timedelta(seconds=seconds))

    def cutoff(self, now: datetime | None = None) -> datetime | None:
        """Entries stored at or before this instant are evicted (None: no age limit)."""
        if self.max_age is None:
            return None
        return (now or _now()) - self.max_age

    def keep(self, entries: list[MemoryEntry], now: datetime | None = None) -> list[MemoryEntry]:
        """The entries this policy keeps, of `entries` in storage order."""
        cutoff = self.cutoff(now)
        if cutoff is not None:
            entries = [entry for entry in entries if entry.stored_at > cutoff]
        if self.max_entries is not None:
            entries = entries[-self.max_entries :]
        return entries


def _check_count(n: object) -> None:
    if isinstance(n, bool) or not isinstance(n, int):
        raise ValidationError(f"keep_last_entries n must be an integer, got: {n!r}")
    if n <= 0:
        raise ValidationError(f"keep_last_entries n must be > 0, got: {n}")


@dataclass(frozen=True, slots=True)
class MemoryScope:
    """A named partition of a memory store that tasks declare
    (``Task(memory=["research", MemoryScope.of("notes").keep_last_entries(50)])``): a task
    reads and writes only the scopes it declares. `eviction` runs after every store."""

    name: str
    eviction: EvictionPolicy | None = None

    def __post_init__(self) -> None:
        check_scope(self.name, "MemoryScope name")
        if self.eviction is not None and not isinstance(self.eviction, EvictionPolicy):
            raise ValidationError(
                f"MemoryScope eviction must be an EvictionPolicy, got: {self.eviction!r}"
            )

    @classmethod
    def of(cls, name: str) -> MemoryScope:
        """A scope without eviction."""
        return cls(name)

    def keep_last_entries(self, n: int) -> MemoryScope:
        """This scope, keeping only its `n` most recent entries."""
        return MemoryScope(self.name, EvictionPolicy.keep_last_entries(n))

    def keep_entries_within(self, duration: timedelta | float) -> MemoryScope:
        """This scope, keeping only entries stored within `duration`."""
        return MemoryScope(self.name, EvictionPolicy.keep_entries_within(duration))


def check_scope(scope: object, field_name: str = "scope") -> str:
    """`scope` if it is a non-blank string, else a ValidationError naming `field_name`."""
    if not isinstance(scope, str) or not scope.strip():
        raise ValidationError(f"{field_name} must not be blank, got: {scope!r}")
    return scope


def check_max_results(max_results: object) -> int:
    """`max_results` if it is a positive integer, else a ValidationError."""
    if isinstance(max_results, bool) or not isinstance(max_results, int):
        raise ValidationError(f"max_results must be an integer, got: {max_results!r}")
    if max_results <= 0:
        raise ValidationError(f"max_results must be > 0, got: {max_results}")
    return max_results


def check_query(query: object) -> str:
    """`query` if it is a string (blank is allowed: it matches nothing), else a
    ValidationError."""
    if not isinstance(query, str):
        raise ValidationError(f"query must be a string, got: {query!r}")
    return query
