"""The SQLite store: BEHAVIOUR 11 semantics, keyword ranking, persistence, concurrency
within and across processes, crash safety, and closing."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import signal
import sqlite3
import sys
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pydantic
import pytest

from agentensemble.errors import AgentEnsembleError, ValidationError
from agentensemble.memory import (
    EvictionPolicy,
    InMemoryStore,
    MemoryEntry,
    MemoryStore,
    _model,
    _sqlite,
)
from agentensemble.memory._sqlite import SqliteMemoryStore

SRC = Path(__file__).resolve().parents[2] / "src"
NOW = datetime.now(UTC)
NOT_A_STRING: Any = None
NOT_AN_ENTRY: Any = "just text"
NOT_AN_INT: Any = 2.5


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "memory.db"


@pytest.fixture
async def store(path: Path) -> AsyncIterator[SqliteMemoryStore]:
    async with SqliteMemoryStore(path) as opened:
        yield opened


def entry(content: str, **fields: Any) -> MemoryEntry:
    return MemoryEntry(content, **fields)


async def contents(store: MemoryStore, scope: str, query: str = "", n: int = 1000) -> list[str]:
    return [found.content for found in await store.retrieve(scope, query, n)]


async def store_all(store: MemoryStore, scope: str, texts: list[str]) -> None:
    for text in texts:
        await store.store(scope, entry(text))


def fts_integrity(path: Path) -> None:
    """FTS5's own check that its index matches the entries (raises if not)."""
    with sqlite3.connect(path) as connection:
        connection.execute("INSERT INTO memory_fts (memory_fts) VALUES ('integrity-check')")


def sqlite_worker_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name.startswith("agentensemble-sqlite")}


# --- BEHAVIOUR 11 semantics, as the in-memory store ---------------------------------------

Call = Callable[[MemoryStore], Awaitable[object]]
INVALID_CALLS: list[tuple[str, Call]] = [
    ("store blank scope", lambda s: s.store("", entry("x"))),
    ("store spaces scope", lambda s: s.store("   ", entry("x"))),
    ("store None scope", lambda s: s.store(NOT_A_STRING, entry("x"))),
    ("store non-entry", lambda s: s.store("notes", NOT_AN_ENTRY)),
    ("retrieve blank scope", lambda s: s.retrieve(" ", "q", 5)),
    ("retrieve zero results", lambda s: s.retrieve("notes", "q", 0)),
    ("retrieve negative results", lambda s: s.retrieve("notes", "q", -1)),
    ("retrieve bool results", lambda s: s.retrieve("notes", "q", True)),
    ("retrieve float results", lambda s: s.retrieve("notes", "q", NOT_AN_INT)),
    ("evict blank scope", lambda s: s.evict("", EvictionPolicy.keep_last_entries(1))),
    ("clear blank scope", lambda s: s.clear("\t")),
]


@pytest.mark.parametrize(("name", "call"), INVALID_CALLS, ids=[n for n, _ in INVALID_CALLS])
async def test_invalid_arguments_fail_as_in_the_in_memory_store(
    tmp_path: Path, name: str, call: Call
) -> None:
    with pytest.raises(ValidationError) as in_memory:
        await call(InMemoryStore())
    async with SqliteMemoryStore(tmp_path / "memory.db") as store:
        with pytest.raises(ValidationError) as sqlite:
            await call(store)
    assert str(sqlite.value) == str(in_memory.value)
    assert not (tmp_path / "memory.db").exists()  # checked before the file is opened


def test_a_path_in_a_missing_directory_is_refused_when_the_store_is_made(tmp_path: Path) -> None:
    missing = tmp_path / "missing" / "memory.db"
    with pytest.raises(ValidationError, match="is in a directory that does not exist"):
        SqliteMemoryStore(missing)


async def test_plurals_find_their_singular_and_back(store: SqliteMemoryStore) -> None:
    await store.store("k", entry("Refunds over 500 EUR need a manager."))
    for number in range(3):
        await store.store("k", entry(f"unrelated note {number}"))
    await store.store("k", entry("The policy on boxes changed."))
    assert (await contents(store, "k", query="refund", n=1)) == [
        "Refunds over 500 EUR need a manager."
    ]
    assert (await contents(store, "k", query="policies for a box", n=1)) == [
        "The policy on boxes changed."
    ]


async def test_a_sync_close_ends_the_store(path: Path) -> None:
    store = SqliteMemoryStore(path)
    await store.store("k", entry("x"))
    store.close()
    with pytest.raises(RuntimeError, match="closed"):
        await store.retrieve("k", "x", 1)


async def test_an_unknown_scope_is_empty(store: SqliteMemoryStore) -> None:
    await store.store("known", entry("something"))
    assert await store.retrieve("unknown", "something", 5) == []
    assert await store.evict("unknown", EvictionPolicy.keep_last_entries(1)) == 0
    await store.clear("unknown")
    assert await contents(store, "known") == ["something"]


async def test_clear_removes_only_its_scope(store: SqliteMemoryStore, path: Path) -> None:
    await store_all(store, "notes", ["zebra one", "zebra two"])
    await store_all(store, "other", ["zebra three"])
    await store.clear("notes")
    assert await store.retrieve("notes", "zebra", 5) == []
    assert await contents(store, "other", "zebra") == ["zebra three"]
    await store_all(store, "notes", ["after clearing"])
    assert await contents(store, "notes", "zebra") == ["after clearing"]
    fts_integrity(path)


async def test_keep_last_entries_removes_the_oldest(store: SqliteMemoryStore, path: Path) -> None:
    await store_all(store, "notes", [f"note {n} zebra" for n in range(5)])
    await store_all(store, "other", ["note other zebra"])
    assert await store.evict("notes", EvictionPolicy.keep_last_entries(2)) == 3
    assert await contents(store, "notes", "zebra") == ["note 4 zebra", "note 3 zebra"]
    assert await store.evict("notes", EvictionPolicy.keep_last_entries(2)) == 0
    assert await contents(store, "other") == ["note other zebra"]
    fts_integrity(path)


async def test_keep_entries_within_removes_entries_stored_before_the_cutoff(
    store: SqliteMemoryStore, path: Path
) -> None:
    for content, age in [("old", timedelta(days=3)), ("recent", timedelta(minutes=5))]:
        await store.store("notes", entry(content, stored_at=NOW - age))
    await store.store("notes", entry("stored later but older", stored_at=NOW - timedelta(days=9)))
    assert await store.evict("notes", EvictionPolicy.keep_entries_within(timedelta(hours=1))) == 2
    assert await contents(store, "notes") == ["recent"]
    fts_integrity(path)


async def test_an_entry_stored_exactly_at_the_cutoff_is_evicted(
    store: SqliteMemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_model, "_now", lambda: NOW)
    policy = EvictionPolicy.keep_entries_within(timedelta(hours=1))
    at_cutoff = entry("at the cutoff", stored_at=NOW - timedelta(hours=1))
    just_after = entry("just after", stored_at=NOW - timedelta(hours=1) + timedelta(microseconds=1))
    reference = InMemoryStore()
    for memory in (store, reference):
        await memory.store("notes", at_cutoff)
        await memory.store("notes", just_after)
        assert await memory.evict("notes", policy) == 1
    assert await contents(store, "notes") == await contents(reference, "notes") == ["just after"]


async def test_an_entry_round_trips(store: SqliteMemoryStore) -> None:
    stored_at = datetime(2026, 3, 4, 5, 6, 7, 891011, tzinfo=timezone(timedelta(hours=-7)))
    original = entry(
        "Findings: ünïcode 日本語 and \"quotes\" 'too'",
        structured_content={"items": [1, 2.5, None, True], "nested": {"k": "v"}},
        stored_at=stored_at,
        metadata={MemoryEntry.AGENT_ROLE: "Researcher", MemoryEntry.TASK_DESCRIPTION: "Dig"},
    )
    await store.store("notes", original)
    [found] = await store.retrieve("notes", "findings", 5)
    assert found == original
    assert found.stored_at.utcoffset() == timedelta(0)
    assert found.stored_at == stored_at  # the same instant, to the microsecond


async def test_structured_content_none_and_lists_round_trip(store: SqliteMemoryStore) -> None:
    await store.store("notes", entry("plain"))
    await store.store("notes", entry("listed", structured_content=["a", 1]))
    listed, plain = await store.retrieve("notes", "", 5)
    assert plain.structured_content is None
    assert plain.metadata == {}
    assert listed.structured_content == ["a", 1]


class Finding(pydantic.BaseModel):
    title: str
    when: datetime


@dataclasses.dataclass
class Point:
    x: int
    tags: set[str]


async def test_structured_content_json_cannot_encode_is_stored_converted(
    store: SqliteMemoryStore,
) -> None:
    when = datetime(2026, 1, 2, tzinfo=UTC)
    await store.store("notes", entry("model", structured_content=Finding(title="t", when=when)))
    await store.store("notes", entry("dataclass", structured_content=Point(1, {"only"})))
    await store.store("notes", entry("object", structured_content=object()))
    unknown, point, finding = await store.retrieve("notes", "", 5)
    assert finding.structured_content == {"title": "t", "when": "2026-01-02T00:00:00Z"}
    assert point.structured_content == {"x": 1, "tags": ["only"]}
    assert isinstance(unknown.structured_content, str)
    assert unknown.structured_content.startswith("<object object at")


# --- keyword retrieval --------------------------------------------------------------------


async def test_the_entry_with_the_rare_words_of_the_query_comes_first(
    store: SqliteMemoryStore,
) -> None:
    await store_all(
        store,
        "notes",
        [
            "Zebra migration patterns across the Serengeti plains",
            "Quarterly report on sales in the northern region",
            "Report on the market and its competitors",
            "Minutes of the weekly team meeting",
        ],
    )
    found = await contents(store, "notes", "Write a report on the zebra migration", 4)
    assert found[0] == "Zebra migration patterns across the Serengeti plains"
    assert found[-1] == "Minutes of the weekly team meeting"  # no word of the query


async def test_more_matching_words_rank_higher(store: SqliteMemoryStore) -> None:
    await store_all(store, "notes", ["lion habitat survey", "lion zebra habitat survey"])
    await store_all(store, "notes", ["unrelated entry about weather"])
    found = await contents(store, "notes", "zebra lion habitat", 3)
    assert found == [
        "lion zebra habitat survey",
        "lion habitat survey",
        "unrelated entry about weather",
    ]


async def test_equally_relevant_entries_come_newest_first(store: SqliteMemoryStore) -> None:
    for n in range(3):
        await store.store("notes", entry("zebra sighting", metadata={"n": str(n)}))
    await store.store("notes", entry("a later entry about weather"))
    found = await store.retrieve("notes", "zebra", 2)
    assert [e.metadata.get("n") for e in found] == ["2", "1"]


async def test_the_most_recent_non_matching_entries_fill_the_remaining_places(
    store: SqliteMemoryStore,
) -> None:
    await store_all(store, "notes", ["first filler", "zebra sighting", "second filler"])
    await store_all(store, "notes", ["third filler", "zebra crossing", "fourth filler"])
    found = await contents(store, "notes", "zebra", 5)
    assert found[:2] == ["zebra crossing", "zebra sighting"]
    assert found[2:] == ["fourth filler", "third filler", "second filler"]
    assert len(set(found)) == len(found)


async def test_no_matching_word_returns_the_most_recent_entries(
    store: SqliteMemoryStore,
) -> None:
    await store_all(store, "notes", [f"note {n}" for n in range(6)])
    assert await contents(store, "notes", "giraffe", 3) == ["note 5", "note 4", "note 3"]
    assert await contents(store, "notes", "", 2) == ["note 5", "note 4"]


async def test_recent_entries_longer_together_than_sqlite_allows_are_still_returned(
    store: SqliteMemoryStore,
) -> None:
    # the recent entries come back as one JSON text, which must fit SQLite's longest string
    # (1e9 bytes unless lowered, as here): past that, they are read row by row
    await store._worker.read(
        lambda connection: connection.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, 20_000)
    )
    texts = [f"note {n} " + "\x01" * 3_000 for n in range(3)]  # 6 bytes each as JSON
    await store_all(store, "notes", texts)
    assert await contents(store, "notes", "giraffe", 3) == texts[::-1]
    assert await contents(store, "notes", "note", 2) == texts[:0:-1]


@pytest.mark.parametrize(
    "query",
    [
        '"',
        '"unbalanced',
        "AND OR NOT",
        "NEAR(a b, 3)",
        "* : ^ - + () {} [] ;",
        "col : value",
        "''; DROP TABLE memory_entries; --",
        "\x00\u200b\ufeff",
        "…—“”«»",
    ],
)
async def test_any_query_text_is_searched_literally(store: SqliteMemoryStore, query: str) -> None:
    await store_all(store, "notes", ["older note", "newer note"])
    assert await contents(store, "notes", query, 2) == ["newer note", "older note"]


async def test_fts_operator_words_in_a_query_are_plain_words(store: SqliteMemoryStore) -> None:
    await store_all(store, "notes", ["zebra facts", "near the river", "something else"])
    found = await contents(store, "notes", 'NOT zebra OR "NEAR(river* AND col:x', 3)
    assert set(found[:2]) == {"zebra facts", "near the river"}
    assert found[2] == "something else"


async def test_case_and_diacritics_do_not_matter(store: SqliteMemoryStore) -> None:
    await store_all(store, "notes", ["Le CAFÉ crème de Zoë", "something else"])
    assert (await contents(store, "notes", "cafe zoe", 1)) == ["Le CAFÉ crème de Zoë"]
    assert (await contents(store, "notes", "Café", 1)) == ["Le CAFÉ crème de Zoë"]


async def test_a_query_finds_entries_of_its_scope_only(store: SqliteMemoryStore) -> None:
    await store_all(store, "mine", ["plain note", "another note"])
    await store_all(store, "theirs", ["zebra note"])
    assert await contents(store, "mine", "zebra", 5) == ["another note", "plain note"]


async def test_a_rare_word_is_found_in_old_entries_even_next_to_a_common_one(
    store: SqliteMemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_sqlite, "MATCH_BUDGET", 3)
    await store_all(store, "notes", ["common okapi"])
    await store_all(store, "notes", [f"common {n}" for n in range(10)])
    assert (await contents(store, "notes", "common okapi", 1)) == ["common okapi"]


async def test_a_word_commoner_than_the_budget_ranks_its_most_recent_matches(
    store: SqliteMemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_sqlite, "MATCH_BUDGET", 3)
    await store_all(store, "notes", ["common common common common"])  # best, but old
    await store_all(store, "notes", [f"common {n}" for n in range(5)] + ["other"])
    found = await contents(store, "notes", "common", 4)
    assert found == ["common 4", "common 3", "common 2", "other"]


# --- persistence and schema ---------------------------------------------------------------


async def test_another_store_on_the_same_file_sees_the_entries(path: Path) -> None:
    async with SqliteMemoryStore(path) as first, SqliteMemoryStore(path) as second:
        await first.store("notes", entry("written by the first"))
        assert await contents(second, "notes") == ["written by the first"]
    async with MemoryStore.sqlite(path) as reopened:
        assert isinstance(reopened, SqliteMemoryStore)
        assert await contents(reopened, "notes", "first") == ["written by the first"]


async def test_the_file_is_in_wal_mode_with_a_schema_version(
    store: SqliteMemoryStore, path: Path
) -> None:
    await store.store("notes", entry("x"))
    with sqlite3.connect(path) as connection:
        assert connection.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        assert connection.execute("PRAGMA user_version").fetchone() == (1,)


async def test_a_file_of_a_newer_schema_is_refused(path: Path) -> None:
    with sqlite3.connect(path) as connection:
        connection.execute("PRAGMA user_version = 99")
    async with SqliteMemoryStore(path) as store:
        with pytest.raises(AgentEnsembleError, match="schema version 99 is not supported"):
            await store.store("notes", entry("x"))


# --- concurrency --------------------------------------------------------------------------


async def test_concurrent_stores_lose_nothing(store: SqliteMemoryStore, path: Path) -> None:
    async with asyncio.TaskGroup() as group:
        for n in range(200):
            group.create_task(store.store("notes", entry(f"note {n}")))
    assert sorted(await contents(store, "notes")) == sorted(f"note {n}" for n in range(200))
    fts_integrity(path)


async def test_two_connections_writing_at_once_lose_nothing(path: Path) -> None:
    async with SqliteMemoryStore(path) as first, SqliteMemoryStore(path) as second:
        async with asyncio.TaskGroup() as group:
            for n in range(100):
                group.create_task(first.store("notes", entry(f"first {n}")))
                group.create_task(second.store("notes", entry(f"second {n}")))
        found = await contents(first, "notes")
    expected = [f"{who} {n}" for who in ("first", "second") for n in range(100)]
    assert sorted(found) == sorted(expected)


def child_environment() -> dict[str, str]:
    paths = [str(SRC), os.environ.get("PYTHONPATH", "")]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p)}


async def start_child(script: str, *args: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        script,
        *args,
        env=child_environment(),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )


async def read_line(child: asyncio.subprocess.Process) -> str:
    assert child.stdout is not None
    line = await asyncio.wait_for(child.stdout.readline(), timeout=60)
    if not line:
        assert child.stderr is not None
        pytest.fail(f"child ended early: {(await child.stderr.read()).decode()}")
    return line.decode().strip()


WRITE_FOREVER = """
import asyncio, sys
from agentensemble.memory import MemoryEntry, MemoryStore

async def main():
    store = MemoryStore.sqlite(sys.argv[1])
    n = 0
    while True:
        await store.store("crash", MemoryEntry(f"entry {n} " + "payload " * 200))
        print(n, flush=True)
        n += 1

asyncio.run(main())
"""


def written_by_crasher(n: int) -> str:
    return f"entry {n} " + "payload " * 200


async def test_a_process_killed_mid_write_leaves_a_sound_file(path: Path) -> None:
    child = await start_child(WRITE_FOREVER, str(path))
    reported = [int(await read_line(child)) for _ in range(50)]
    child.send_signal(signal.SIGKILL)
    rest, _ = await child.communicate()
    reported += [int(line) for line in rest.decode().split()]
    with sqlite3.connect(path) as connection:
        assert connection.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    fts_integrity(path)
    async with SqliteMemoryStore(path) as reopened:
        found = await contents(reopened, "crash", n=len(reported) + 10)
    expected = [written_by_crasher(n) for n in reported]
    assert set(expected) <= set(found)
    assert len(found) - len(expected) in (0, 1)
    assert set(found) <= {written_by_crasher(n) for n in range(len(reported) + 1)}


WRITE_ON_SIGNAL = """
import asyncio, sys
from agentensemble.memory import MemoryEntry, MemoryStore

async def main():
    store = MemoryStore.sqlite(sys.argv[1])
    print("ready", flush=True)
    sys.stdin.readline()
    for n in range(int(sys.argv[3])):
        await store.store("shared", MemoryEntry(f"{sys.argv[2]} {n}"))
    await store.aclose()
    print("done", flush=True)

asyncio.run(main())
"""


async def test_two_processes_writing_to_one_new_file_lose_nothing(path: Path) -> None:
    count = 150
    children = [await start_child(WRITE_ON_SIGNAL, str(path), who, str(count)) for who in "ab"]
    for child in children:
        assert await read_line(child) == "ready"
    for child in children:  # both create the schema, then write, at the same time
        assert child.stdin is not None
        child.stdin.write(b"go\n")
        await child.stdin.drain()
    for child in children:
        assert await read_line(child) == "done"
        assert await child.wait() == 0
    async with SqliteMemoryStore(path) as store:
        found = await contents(store, "shared", n=10 * count)
    assert sorted(found) == sorted(f"{who} {n}" for who in "ab" for n in range(count))


# --- closing ------------------------------------------------------------------------------


async def test_aclose_ends_the_worker_thread(path: Path) -> None:
    before = sqlite_worker_threads()
    store = SqliteMemoryStore(path)
    await store.store("notes", entry("x"))
    started = sqlite_worker_threads() - before
    assert started
    await store.aclose()
    for thread in started:
        thread.join(timeout=30)
    assert not [thread for thread in started if thread.is_alive()]


CALLS: list[tuple[str, Call]] = [
    ("store", lambda s: s.store("notes", entry("x"))),
    ("retrieve", lambda s: s.retrieve("notes", "x", 5)),
    ("evict", lambda s: s.evict("notes", EvictionPolicy.keep_last_entries(1))),
    ("clear", lambda s: s.clear("notes")),
]


@pytest.mark.parametrize(("name", "call"), CALLS, ids=[n for n, _ in CALLS])
async def test_a_closed_store_refuses_work(path: Path, name: str, call: Call) -> None:
    store = SqliteMemoryStore(path)
    await store.store("notes", entry("x"))
    await store.aclose()
    await store.aclose()  # closing twice is fine
    with pytest.raises(RuntimeError, match="SqliteMemoryStore is closed"):
        await call(store)
    assert repr(store) == f"SqliteMemoryStore({str(path)!r}, closed)"


def test_repr_shows_the_path(path: Path) -> None:
    assert repr(SqliteMemoryStore(path)) == f"SqliteMemoryStore({str(path)!r})"


async def test_a_store_is_checked_on_the_worker_once_not_at_every_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agentensemble.memory import MemoryStore
    from agentensemble.memory._sqlite_worker import SqliteWorker

    reads: list[object] = []
    read = SqliteWorker.read

    async def counted(self: SqliteWorker, fn: Callable[[sqlite3.Connection], Any]) -> Any:
        reads.append(fn)
        return await read(self, fn)

    monkeypatch.setattr(SqliteWorker, "read", counted)
    store = MemoryStore.sqlite(tmp_path / "memory.db")
    try:
        await store.check()  # opens the file: one round trip to the worker
        assert len(reads) == 1
        await store.check()  # the connection is open: nothing more to check
        await store.check()
        assert len(reads) == 1
    finally:
        await store.aclose()
