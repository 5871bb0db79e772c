"""Entries, scopes, eviction policies and the in-process store (BEHAVIOUR 11)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from agentensemble.errors import ValidationError
from agentensemble.memory import (
    EntityMemory,
    EvictionPolicy,
    InMemoryStore,
    MemoryEntry,
    MemoryScope,
    MemoryStore,
)

NOW = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)


def entry(content: str, minutes_ago: float = 0) -> MemoryEntry:
    return MemoryEntry(content, stored_at=NOW - timedelta(minutes=minutes_ago))


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: MemoryScope.of("  "), "MemoryScope name must not be blank, got: '  '"),
        (lambda: MemoryScope.of("notes").keep_last_entries(0), "n must be > 0, got: 0"),
        (lambda: EvictionPolicy.keep_last_entries(-3), "keep_last_entries n must be > 0, got: -3"),
        (lambda: EvictionPolicy.keep_last_entries(True), "must be an integer"),
        (
            lambda: EvictionPolicy.keep_entries_within(None),  # type: ignore[arg-type]
            "keep_entries_within duration must not be None",
        ),
        (
            lambda: EvictionPolicy.keep_entries_within(timedelta(0)),
            "keep_entries_within duration must be positive, got: datetime.timedelta(0)",
        ),
        (lambda: EvictionPolicy.keep_entries_within(-5), "must be positive, got: -5"),
        (lambda: EvictionPolicy.keep_entries_within(float("nan")), "must be positive, got: nan"),
        (lambda: MemoryEntry(None), "MemoryEntry content must be a string"),  # type: ignore[arg-type]
        (
            lambda: MemoryEntry("x", stored_at=datetime(2026, 1, 1)),
            "stored_at must be a timezone-aware datetime",
        ),
    ],
)
def test_bad_configuration_names_the_field_and_value(build: object, message: str) -> None:
    with pytest.raises(ValidationError, match=message.replace("(", r"\(").replace(")", r"\)")):
        build()  # type: ignore[operator]


def test_a_scope_keeps_the_last_eviction_set() -> None:
    scope = MemoryScope.of("notes").keep_last_entries(3).keep_entries_within(60)
    assert scope.eviction == EvictionPolicy(max_age=timedelta(seconds=60))


def test_entry_metadata_is_read_only_and_looked_up_by_key() -> None:
    stored = MemoryEntry("x", metadata={MemoryEntry.AGENT_ROLE: "Writer"})
    assert stored.get_meta("agent_role") == "Writer"
    assert stored.get_meta("missing") is None
    with pytest.raises(TypeError):
        stored.metadata["agent_role"] = "other"  # type: ignore[index]


async def test_retrieve_returns_the_most_recent_entries_oldest_first() -> None:
    store = MemoryStore.in_memory()
    for number in range(7):
        await store.store("notes", MemoryEntry(f"note {number}"))
    found = await store.retrieve("notes", "the query is ignored", 3)
    assert [item.content for item in found] == ["note 4", "note 5", "note 6"]
    assert await store.retrieve("unknown", "q", 5) == []


async def test_scopes_are_isolated_and_clear_removes_one_scope() -> None:
    store = InMemoryStore()
    await store.store("a", MemoryEntry("in a"))
    await store.store("b", MemoryEntry("in b"))
    await store.clear("a")
    await store.clear("never used")
    assert await store.retrieve("a", "q", 5) == []
    assert [item.content for item in await store.retrieve("b", "q", 5)] == ["in b"]
    assert store.scopes() == ["b"]


async def test_evict_keep_last_entries() -> None:
    store = InMemoryStore()
    for number in range(5):
        await store.store("s", MemoryEntry(str(number)))
    assert await store.evict("s", EvictionPolicy.keep_last_entries(2)) == 3
    assert [item.content for item in await store.retrieve("s", "q", 10)] == ["3", "4"]
    assert await store.evict("unknown", EvictionPolicy.keep_last_entries(2)) == 0


async def test_evict_keep_entries_within_keeps_entries_strictly_after_the_cutoff() -> None:
    store = InMemoryStore()
    policy = EvictionPolicy.keep_entries_within(timedelta(minutes=10))
    for item in (entry("old", 30), entry("edge", 10), entry("fresh", 1)):
        await store.store("s", item)
    kept = policy.keep(await store.retrieve("s", "q", 10), now=NOW)
    assert [item.content for item in kept] == ["fresh"]
    # against the real clock the two older entries (stored long ago) go
    old_store = InMemoryStore()
    await old_store.store("s", MemoryEntry("ancient", stored_at=NOW - timedelta(days=3650)))
    await old_store.store("s", MemoryEntry("now"))
    assert await old_store.evict("s", policy) == 1


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda s: s.store(" ", MemoryEntry("x")), "scope must not be blank, got: ' '"),
        (lambda s: s.store("a", None), "entry must be a MemoryEntry, got: None"),
        (lambda s: s.retrieve("", "q", 5), "scope must not be blank, got: ''"),
        (lambda s: s.retrieve("a", "q", 0), "max_results must be > 0, got: 0"),
        (lambda s: s.evict(" ", EvictionPolicy.keep_last_entries(1)), "scope must not be blank"),
        (lambda s: s.clear(""), "scope must not be blank"),
    ],
)
async def test_store_arguments_are_checked(call: object, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        await call(MemoryStore.in_memory())  # type: ignore[operator]


def test_any_object_with_the_four_methods_is_a_memory_store() -> None:
    class Custom:
        async def store(self, scope: str, entry: MemoryEntry) -> None: ...
        async def retrieve(self, scope: str, query: str, max_results: int) -> list[MemoryEntry]:
            return []

        async def evict(self, scope: str, policy: EvictionPolicy) -> int:
            return 0

        async def clear(self, scope: str) -> None: ...

    assert isinstance(Custom(), MemoryStore)
    assert not isinstance(object(), MemoryStore)


def test_entity_memory_trims_names_and_replaces_facts() -> None:
    entities = EntityMemory({" Acme ": "a rocket company"})
    entities.put("Acme", "a rocket and satellite company")
    entities.put("Bob", "the CEO")
    assert entities.facts() == {"Acme": "a rocket and satellite company", "Bob": "the CEO"}
    assert entities.get("  Bob") == "the CEO"
    assert entities.remove("Bob")
    assert not entities.remove("Bob")
    assert len(entities) == 1


@pytest.mark.parametrize(
    ("name", "fact", "message"),
    [
        ("  ", "x", "entity_name must not be blank, got: '  '"),
        (None, "x", "entity_name must not be blank, got: None"),
        ("Acme", None, "fact about 'Acme' must be a non-blank string, got: None"),
        ("Acme", "", "fact about 'Acme' must be a non-blank string, got: ''"),
    ],
)
def test_entity_memory_rejects_blank_names_and_missing_facts(
    name: object, fact: object, message: str
) -> None:
    with pytest.raises(ValidationError, match=message):
        EntityMemory().put(name, fact)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({}, "EvictionPolicy needs max_entries or max_age"),
        ({"max_entries": 0}, "keep_last_entries n must be > 0, got: 0"),
        ({"max_entries": -2}, "keep_last_entries n must be > 0, got: -2"),
        ({"max_age": timedelta(seconds=-1)}, "keep_entries_within duration must be positive"),
    ],
)
def test_a_policy_built_directly_is_checked_too(fields: dict[str, object], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        EvictionPolicy(**fields)  # type: ignore[arg-type]
