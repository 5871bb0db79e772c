"""The embedded persistent store: entries in one SQLite file, found by keyword with FTS5.

Schema (version 1, kept in ``PRAGMA user_version``):

- ``memory_scopes``: one row per scope name, giving it a small integer id.
- ``memory_entries``: one row per entry; ``id`` order is recency order. ``structured_content``
  and ``metadata`` are JSON text, ``stored_at`` ISO-8601 in UTC to the microsecond (so text
  order is time order), ``terms`` the text the keyword index holds.
- ``memory_fts``: an FTS5 index over ``memory_entries.terms`` (external content), kept in
  step by triggers, so an entry and its index rows are written and removed in one transaction.

Each word of an entry is indexed as ``<scope id>x<word>`` (case-folded, diacritics removed,
English stopwords left out): every scope has terms of its own, so a query touches only its
scope's postings and term frequencies are per scope.

A query is free text. Its words are normalised the same way, never passed to FTS5 as syntax
(each is quoted), and only the rarest ones are searched: terms are taken rarest first while
they match at most `MATCH_BUDGET` entries in all. When even the rarest term is commoner than
that, only its `MATCH_BUDGET` most recent matches are ranked. This bounds the work of a
query whatever the size of the scope; words common enough to be skipped carry little weight
in bm25 anyway. Matches come by bm25 relevance, then newest first; when fewer than asked
for match, the most recent other entries of the scope fill the remaining places.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import unicodedata
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Final

from agentensemble.errors import AgentEnsembleError, ValidationError
from agentensemble.memory._encoding import json_text
from agentensemble.memory._in_memory import check_entry
from agentensemble.memory._model import (
    EvictionPolicy,
    MemoryEntry,
    check_max_results,
    check_query,
    check_scope,
)
from agentensemble.memory._sqlite_worker import SqliteWorker, read_snapshot
from agentensemble.memory._store import MemoryStore

__all__ = ["SqliteMemoryStore"]

SCHEMA_VERSION: Final = 1

MATCH_BUDGET = 2000
"""How many matching entries a query ranks at most: bm25 costs microseconds per match, so
this bounds a query to a few milliseconds (bench/memory.py measures it)."""

MAX_QUERY_WORDS: Final = 32
"""How many distinct words of a query are considered (the first ones)."""

_SCHEMA: Final = (
    """CREATE TABLE IF NOT EXISTS memory_scopes (
        id INTEGER PRIMARY KEY,
        name TEXT NOT NULL UNIQUE
    )""",
    """CREATE TABLE IF NOT EXISTS memory_entries (
        id INTEGER PRIMARY KEY,
        scope_id INTEGER NOT NULL REFERENCES memory_scopes (id),
        content TEXT NOT NULL,
        structured_content TEXT,
        metadata TEXT NOT NULL,
        stored_at TEXT NOT NULL,
        terms TEXT NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS memory_entries_by_scope ON memory_entries (scope_id, id)",
    """CREATE INDEX IF NOT EXISTS memory_entries_by_age
        ON memory_entries (scope_id, stored_at)""",
    # The terms are normalised by this module; the ascii tokenizer only splits them at spaces.
    """CREATE VIRTUAL TABLE IF NOT EXISTS memory_fts USING fts5 (
        terms, content='memory_entries', content_rowid='id', tokenize='ascii'
    )""",
    """CREATE TRIGGER IF NOT EXISTS memory_entries_index AFTER INSERT ON memory_entries BEGIN
        INSERT INTO memory_fts (rowid, terms) VALUES (new.id, new.terms);
    END""",
    """CREATE TRIGGER IF NOT EXISTS memory_entries_unindex AFTER DELETE ON memory_entries BEGIN
        INSERT INTO memory_fts (memory_fts, rowid, terms) VALUES ('delete', old.id, old.terms);
    END""",
)

_ENTRY_COLUMNS: Final = "id, content, structured_content, metadata, stored_at"
_EntryRow = tuple[int, str, str | None, str, str]
"""A row of `_ENTRY_COLUMNS`."""

_STOPWORD_TEXT: Final = """
    a about above after again against all also am an and any are as at be because been
    before being below between both but by can could did do does doing down during each few
    for from further had has have having he her here hers him his how i if in into is it its
    itself just me more most my no nor not now of off on once only or other our ours out
    over own same she should so some such than that the their theirs them then there these
    they this those through to too under until up very was we were what when where which
    while who whom why will with would you your yours
"""
STOPWORDS: Final = frozenset(_STOPWORD_TEXT.split())
"""Words too common in English to tell entries apart: neither indexed nor searched."""

_WORD: Final = re.compile(r"[^\W_]+")


class SqliteMemoryStore(MemoryStore):
    """Entries in one SQLite file (WAL mode), shared by the tasks of this process (their
    database work runs one at a time) and by other processes that open the same file (a
    write waits up to `busy_timeout` seconds for another's, on a worker thread).

    With `inline` (the default), an operation runs on the calling event loop's thread, on
    a connection that never waits: 50-110 µs of CPU, where handing it to the worker thread
    and back costs several times that in a busy server. One that would wait for another
    process's lock, or whose SQL runs past 1 ms, is rolled back and runs on the worker
    thread, as do the next 50 (see `SqliteWorker`). ``inline=False`` keeps every operation
    on the thread (for a file on a network disk, where reading a page may block).

    `retrieve` ranks the entries of the scope matching the query's rarest words by
    relevance (bm25), newest first on ties, then fills the remaining places with the most
    recent other entries, newest first. `structured_content` is kept as JSON: it comes back
    as what ``json.loads`` makes of it; a value ``json`` cannot encode (a pydantic model, a
    dataclass, a datetime) is converted by pydantic first, with ``str`` for what is left.

    After `aclose`, every method raises RuntimeError.
    """

    def __init__(
        self, path: str | os.PathLike[str], *, busy_timeout: float = 5.0, inline: bool = True
    ) -> None:
        if not isinstance(inline, bool):
            raise ValidationError(f"inline must be True or False, got: {inline!r}")
        self._worker = SqliteWorker(
            path, setup=_create_schema, busy_timeout=busy_timeout, inline=inline
        )
        self._closed = False
        self._scope_ids: dict[str, int] = {}
        """Scope name -> id, as committed (scopes are never deleted, so an id never goes
        stale); read and written by the store's jobs only (a dict's get and set are each
        atomic: jobs inline and on the worker thread may run at once)."""

    @property
    def path(self) -> str:
        """The database file."""
        return self._worker.path

    def __repr__(self) -> str:
        state = ", closed" if self._closed else ""
        return f"SqliteMemoryStore({self.path!r}{state})"

    async def store(self, scope: str, entry: MemoryEntry) -> None:
        """Add `entry` to `scope` (one transaction)."""
        check_scope(scope)
        check_entry(entry)
        worker = self._open_worker()
        row = _encode(entry)
        words = _indexed_words(entry.content)

        def insert(connection: sqlite3.Connection) -> None:
            scope_id = self._scope_id(connection, scope) or _add_scope(connection, scope)
            connection.execute(
                "INSERT INTO memory_entries"
                " (scope_id, content, structured_content, metadata, stored_at, terms)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (scope_id, *row, " ".join(_scoped_terms(scope_id, words))),
            )

        await worker.write(insert)

    async def retrieve(self, scope: str, query: str, max_results: int) -> list[MemoryEntry]:
        """Up to `max_results` entries of `scope`: those matching `query` by relevance, then
        the most recent others ([] for an unknown scope)."""
        check_scope(scope)
        check_max_results(max_results)
        worker = self._open_worker()
        words = _query_words(check_query(query))

        def find(connection: sqlite3.Connection) -> list[MemoryEntry]:
            scope_id = self._committed_scope_id(connection, scope)
            if scope_id is None:
                return []
            terms = _scoped_terms(scope_id, words)
            counts, rows = _counts_and_recent(connection, scope_id, terms, max_results)
            if counts:  # the counts only choose the terms to rank by
                with read_snapshot(connection):
                    rows = _matched_then_recent(connection, scope_id, counts, max_results)
            return [_decode(row) for row in rows]

        return await worker.read(find)

    async def evict(self, scope: str, policy: EvictionPolicy) -> int:
        """Remove the entries of `scope` that `policy` does not keep (one transaction); how
        many went."""
        check_scope(scope)
        worker = self._open_worker()
        cutoff = policy.cutoff()
        max_entries = policy.max_entries

        def delete(connection: sqlite3.Connection) -> int:
            scope_id = self._scope_id(connection, scope)
            if scope_id is None:
                return 0
            removed = 0
            if cutoff is not None:
                removed += _delete_stored_by(connection, scope_id, cutoff)
            if max_entries is not None:
                removed += _delete_all_but_last(connection, scope_id, max_entries)
            return removed

        return await worker.write(delete)

    async def clear(self, scope: str) -> None:
        """Remove every entry of `scope`."""
        check_scope(scope)
        worker = self._open_worker()

        def delete(connection: sqlite3.Connection) -> None:
            scope_id = self._scope_id(connection, scope)
            if scope_id is not None:
                connection.execute("DELETE FROM memory_entries WHERE scope_id = ?", (scope_id,))

        await worker.write(delete)

    async def aclose(self) -> None:
        """Close the connection and end the worker thread; later calls raise RuntimeError."""
        self._closed = True
        await self._worker.aclose()

    def close(self) -> None:
        """`aclose` for sync code: queued work finishes, then the connection closes and the
        thread ends; later calls raise RuntimeError."""
        self._closed = True
        self._worker.close()

    async def __aenter__(self) -> SqliteMemoryStore:
        return self

    async def check(self) -> None:
        """Open the file now (a run does before its first model call): a file SQLite cannot
        use, or one with another program's tables, is a `ValidationError` naming it."""
        await self._open_worker().check()

    def _scope_id(self, connection: sqlite3.Connection, scope: str) -> int | None:
        """The scope's id, for a write: as remembered, else looked up (not remembered)."""
        return self._scope_ids.get(scope) or _scope_id(connection, scope)

    def _committed_scope_id(self, connection: sqlite3.Connection, scope: str) -> int | None:
        """The scope's id, remembered once a read has seen it committed. (A write's own
        lookup may see a scope its transaction added, which a failed commit would undo,
        and the id be given to another scope: writes use what reads remembered.)"""
        scope_id = self._scope_ids.get(scope)
        if scope_id is None:
            scope_id = _scope_id(connection, scope)
            if scope_id is not None:
                self._scope_ids[scope] = scope_id
        return scope_id

    def _open_worker(self) -> SqliteWorker:
        if self._closed:
            raise RuntimeError(f"SqliteMemoryStore is closed: {self.path}")
        return self._worker


def _query_words(text: str) -> list[str]:
    """The distinct searchable words of `text`, in order: normalised like indexed words,
    without stopwords, at most `MAX_QUERY_WORDS`."""
    distinct = dict.fromkeys(word for word in _words(text) if word not in STOPWORDS)
    return list(distinct)[:MAX_QUERY_WORDS]


def _words(text: str) -> list[str]:
    """`text` split into runs of letters and digits, case-folded, diacritics removed, English
    plurals made singular (so "refunds" finds "refund" and the other way round)."""
    folded = text.casefold()
    if not folded.isascii():
        decomposed = unicodedata.normalize("NFKD", folded)
        folded = "".join(char for char in decomposed if not unicodedata.combining(char))
    return [_singular(word) for word in _WORD.findall(folded)]


def _singular(word: str) -> str:
    """A light English plural stemmer: enough to match "policies" with "policy" and
    "boxes" with "box", without a stemming library."""
    if len(word) <= 3 or not word.endswith("s") or word.endswith(("ss", "us", "is")):
        return word
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith(("ches", "shes", "xes", "zes", "sses")):
        return word[:-2]
    return word[:-1]


def _indexed_words(content: str) -> list[str]:
    return [word for word in _words(content) if word not in STOPWORDS]


def _scoped_terms(scope_id: int, words: Iterable[str]) -> list[str]:
    """`words` as the terms of the scope: ``<scope id>x<word>``."""
    return [f"{scope_id}x{word}" for word in words]


def _or_of(terms: Iterable[str]) -> str:
    """An FTS5 expression matching any of `terms`, each quoted so none reads as syntax."""
    return " OR ".join('"' + term.replace('"', '""') + '"' for term in terms)


# --- encoding ---------------------------------------------------------------------------


def _encode(entry: MemoryEntry) -> tuple[str, str | None, str, str]:
    """The content, structured_content, metadata and stored_at columns of `entry`."""
    structured = None if entry.structured_content is None else json_text(entry.structured_content)
    return (entry.content, structured, json_text(dict(entry.metadata)), _timestamp(entry.stored_at))


def _timestamp(moment: datetime) -> str:
    """Fixed-width ISO-8601 in UTC, so comparing the text compares the instants."""
    return moment.astimezone(UTC).isoformat(timespec="microseconds")


def _decode(row: _EntryRow) -> MemoryEntry:
    _, content, structured, metadata, stored_at = row
    return MemoryEntry(
        content=content,
        structured_content=None if structured is None else json.loads(structured),
        stored_at=datetime.fromisoformat(stored_at),
        metadata=json.loads(metadata),
    )


# --- database work (on the worker thread) -----------------------------------------------


def _create_schema(connection: sqlite3.Connection) -> None:
    """Create the tables once per file. Inside BEGIN IMMEDIATE, so that of two processes
    opening a new file at once, the second waits and then finds the schema there."""
    if _schema_version(connection) == SCHEMA_VERSION:
        return
    connection.execute("BEGIN IMMEDIATE")
    try:
        version = _schema_version(connection)
        if version not in (0, SCHEMA_VERSION):
            raise AgentEnsembleError(
                f"SQLite memory schema version {version} is not supported "
                f"(this version of agentensemble reads version {SCHEMA_VERSION})"
            )
        for statement in _SCHEMA:
            connection.execute(statement)
        connection.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    except BaseException:
        connection.execute("ROLLBACK")
        raise
    connection.execute("COMMIT")


def _schema_version(connection: sqlite3.Connection) -> int:
    version: int = connection.execute("PRAGMA user_version").fetchone()[0]
    return version


def _matched_then_recent(
    connection: sqlite3.Connection, scope_id: int, counts: dict[str, int], limit: int
) -> list[_EntryRow]:
    """The entries matching the rarest terms, best first, then the most recent others."""
    matched = _ranked_matches(connection, counts, limit)
    matched_ids = {row[0] for row in matched}
    return [*matched, *_recent_rows(connection, scope_id, limit - len(matched), matched_ids)]


def _scope_id(connection: sqlite3.Connection, scope: str) -> int | None:
    row = connection.execute("SELECT id FROM memory_scopes WHERE name = ?", (scope,)).fetchone()
    return None if row is None else int(row[0])


def _add_scope(connection: sqlite3.Connection, scope: str) -> int:
    connection.execute("INSERT INTO memory_scopes (name) VALUES (?)", (scope,))
    scope_id = _scope_id(connection, scope)
    assert scope_id is not None, "just inserted, in this transaction"
    return scope_id


def _ranked_matches(
    connection: sqlite3.Connection, counts: dict[str, int], limit: int
) -> list[_EntryRow]:
    """The entries matching the rarest of the counted terms, best first, newest first on
    ties."""
    terms, total = _rarest_terms(counts)
    expression = _or_of(terms)
    lowest_id = 0 if total <= MATCH_BUDGET else _lowest_recent_match(connection, expression)
    return connection.execute(
        f"SELECT {_ENTRY_COLUMNS} FROM ("
        "   SELECT rowid AS id, rank AS score FROM memory_fts"
        "   WHERE memory_fts MATCH ? AND rowid >= ? ORDER BY rank, rowid DESC LIMIT ?"
        ") JOIN memory_entries USING (id) ORDER BY score, id DESC",
        (expression, lowest_id, limit),
    ).fetchall()


_COUNTED: Final = (
    "(SELECT count(*) FROM (SELECT 1 FROM memory_fts WHERE memory_fts MATCH ? LIMIT ?))"
)


_RECENT_AS_JSON: Final = (
    f"(SELECT json_group_array(json_array({_ENTRY_COLUMNS})) FROM ("
    f"   SELECT {_ENTRY_COLUMNS} FROM memory_entries WHERE scope_id = ? ORDER BY id DESC LIMIT ?"
    "))"
)
"""The most recent entries of a scope as one JSON array: one row for SQLite to step
through, where each row is a GIL hand-over from the worker thread to the event loop and
back."""


def _counts_and_recent(
    connection: sqlite3.Connection, scope_id: int, terms: Sequence[str], limit: int
) -> tuple[dict[str, int], list[_EntryRow]]:
    """How many entries each term matches (counting no further than just past the budget:
    a common term would otherwise cost a walk through all its postings), and the `limit`
    most recent entries of the scope, newest first. One statement of one row, so one state
    of the file (when nothing matches, the recent entries are the answer), and two
    hand-overs of the worker thread's GIL to the event loop and back (each step of a
    statement is one)."""
    counted = [_COUNTED] * len(terms)
    counting = [value for term in terms for value in (_or_of([term]), MATCH_BUDGET + 1)]
    try:
        row = connection.execute(
            f"SELECT {', '.join([*counted, _RECENT_AS_JSON])}", (*counting, scope_id, limit)
        ).fetchone()
    except sqlite3.DataError:  # the entries as JSON are longer than SQLite's longest string
        columns = ", ".join([*counted, _ENTRY_COLUMNS])
        rows = connection.execute(
            f"SELECT {columns} FROM memory_entries WHERE scope_id = ? ORDER BY id DESC LIMIT ?",
            (*counting, scope_id, limit),
        ).fetchall()
        return _matching(terms, rows[0] if rows else ()), [row[len(terms) :] for row in rows]
    return _matching(terms, row), _newest_first(row[-1])


def _matching(terms: Sequence[str], counts: Sequence[int]) -> dict[str, int]:
    """Each term that matches any entry, with how many (`counts`: a row that starts with
    the terms' counts in their order; empty for an empty scope)."""
    return {term: count for term, count in zip(terms, counts, strict=False) if count}


def _newest_first(rows_json: str) -> list[_EntryRow]:
    """Entry rows from a JSON array of them, newest (highest id) first."""
    rows: list[_EntryRow] = [tuple(row) for row in json.loads(rows_json)]
    rows.sort(key=lambda row: row[0], reverse=True)
    return rows


def _rarest_terms(counts: dict[str, int]) -> tuple[list[str], int]:
    """The rarest terms while they match at most `MATCH_BUDGET` entries together (at least
    one), and how many they match at most."""
    chosen: list[str] = []
    total = 0
    for term in sorted(counts, key=counts.__getitem__):
        if chosen and total + counts[term] > MATCH_BUDGET:
            break
        chosen.append(term)
        total += counts[term]
    return chosen, total


def _lowest_recent_match(connection: sqlite3.Connection, expression: str) -> int:
    """The id of the oldest of the `MATCH_BUDGET` most recent entries matching."""
    row = connection.execute(
        "SELECT rowid FROM memory_fts WHERE memory_fts MATCH ? ORDER BY rowid DESC LIMIT 1"
        " OFFSET ?",
        (expression, MATCH_BUDGET - 1),
    ).fetchone()
    return 0 if row is None else int(row[0])


def _recent_rows(
    connection: sqlite3.Connection, scope_id: int, count: int, excluded: set[int]
) -> list[_EntryRow]:
    """The `count` most recent entries of the scope not in `excluded`, newest first."""
    if count <= 0:
        return []
    rows = connection.execute(
        f"SELECT {_ENTRY_COLUMNS} FROM memory_entries WHERE scope_id = ? ORDER BY id DESC LIMIT ?",
        (scope_id, count + len(excluded)),
    ).fetchall()
    return [row for row in rows if row[0] not in excluded][:count]


def _delete_stored_by(connection: sqlite3.Connection, scope_id: int, cutoff: datetime) -> int:
    """Remove the entries stored at or before `cutoff`."""
    cursor = connection.execute(
        "DELETE FROM memory_entries WHERE scope_id = ? AND stored_at <= ?",
        (scope_id, _timestamp(cutoff)),
    )
    return cursor.rowcount


def _delete_all_but_last(connection: sqlite3.Connection, scope_id: int, kept: int) -> int:
    """Remove all but the `kept` most recent entries."""
    cursor = connection.execute(
        "DELETE FROM memory_entries WHERE scope_id = ? AND id <"
        " (SELECT id FROM memory_entries WHERE scope_id = ? ORDER BY id DESC LIMIT 1 OFFSET ?)",
        (scope_id, scope_id, kept - 1),
    )
    return cursor.rowcount
