"""The built-in vector indexes: in memory, SQLite with exact search, and sqlite-vec.

Vectors are stored L2-normalised as float32, so cosine similarity is a dot product. This
module imports numpy: it is loaded by the `VectorIndex` factories, after checking that
numpy is installed.
"""

from __future__ import annotations

import abc
import asyncio
import functools
import json
import os
import re
import reprlib
import sqlite3
import threading
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, TypeVar

import numpy as np
from numpy.typing import NDArray

from agentensemble._extras import require
from agentensemble.errors import ValidationError
from agentensemble.memory._embeddings import VectorIndex, check_policy
from agentensemble.memory._encoding import json_text
from agentensemble.memory._in_memory import check_entry
from agentensemble.memory._model import EvictionPolicy, MemoryEntry, check_scope
from agentensemble.memory._sqlite_worker import SqliteWorker, read_snapshot

if TYPE_CHECKING:
    from agentensemble.memory._embeddings import Vector

__all__ = ["InMemoryVectorIndex", "SqliteVecIndex", "SqliteVectorIndex"]

Matrix = NDArray[np.float32]
T = TypeVar("T")

_INLINE_SEARCH_ROWS = 2048
"""Scopes up to this size are searched on the event loop: a thread hop costs more."""
_LOAD_CHUNK_ROWS = 4096


class InMemoryVectorIndex(VectorIndex):
    """Entries and a matrix of their vectors per scope, in this process; exact search.
    Safe to share between tasks, runs and threads."""

    def __init__(self) -> None:
        self._scopes: dict[str, _MemoryScope] = {}
        self._dimensions: int | None = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return "InMemoryVectorIndex()"

    async def add(self, scope: str, entry: MemoryEntry, vector: Vector) -> None:
        check_scope(scope)
        check_entry(entry)
        unit = unit_vector(vector)
        with self._lock:
            if self._dimensions is not None and self._dimensions != unit.size:
                raise dimension_error(self._dimensions, unit.size)
            self._dimensions = unit.size
            held = self._scopes.get(scope)
            if held is None:
                held = self._scopes[scope] = _MemoryScope(_GrowingMatrix(unit.size), [])
            held.matrix.append(unit[np.newaxis, :])
            held.entries.append(entry)

    async def search(self, scope: str, vector: Vector, k: int) -> list[MemoryEntry]:
        check_scope(scope)
        check_k(k)
        query = unit_vector(vector)
        with self._lock:
            held = self._scopes.get(scope)
            if held is None:
                return []
            # A snapshot: appends write past these rows, evictions replace both objects.
            matrix, entries = held.matrix.view, held.entries
        if matrix.shape[1] != query.size:
            raise dimension_error(matrix.shape[1], query.size)
        if len(matrix) <= _INLINE_SEARCH_ROWS:
            positions = top_positions(matrix, query, k)
        else:
            positions = await asyncio.to_thread(top_positions, matrix, query, k)
        return [entries[position] for position in positions]

    async def evict(self, scope: str, policy: EvictionPolicy) -> int:
        check_scope(scope)
        check_policy(policy)
        with self._lock:
            held = self._scopes.get(scope)
            if held is None:
                return 0
            kept = kept_positions(policy, [entry.stored_at for entry in held.entries])
            removed = len(held.entries) - len(kept)
            if removed:
                held.entries = [held.entries[position] for position in kept]
                held.matrix.keep(kept)
            if not kept:
                self._forget(scope)
            return removed

    async def clear(self, scope: str) -> None:
        check_scope(scope)
        with self._lock:
            self._forget(scope)

    async def has_entries(self, scope: str) -> bool:
        check_scope(scope)
        with self._lock:
            return scope in self._scopes

    def _forget(self, scope: str) -> None:
        self._scopes.pop(scope, None)
        if not self._scopes:
            self._dimensions = None


class _MemoryScope:
    __slots__ = ("entries", "matrix")

    def __init__(self, matrix: _GrowingMatrix, entries: list[MemoryEntry]) -> None:
        self.matrix = matrix
        self.entries = entries


class _GrowingMatrix:
    """Rows of float32 vectors with spare capacity, so that appending a few rows is not a
    copy of all of them. Rows already appended are never written again."""

    def __init__(self, dimensions: int) -> None:
        self.dimensions = dimensions
        self.rows = 0
        self._data: Matrix = np.empty((0, dimensions), dtype=np.float32)

    @property
    def view(self) -> Matrix:
        """The rows appended so far."""
        return self._data[: self.rows]

    def reserve(self, rows: int) -> None:
        """Make room for `rows` rows in all (growing by half at least: amortised appends)."""
        if rows > len(self._data):
            grown = np.empty((max(rows, len(self._data) * 3 // 2, 16), self.dimensions), np.float32)
            grown[: self.rows] = self.view
            self._data = grown

    def append(self, block: Matrix) -> None:
        if block.shape[1] != self.dimensions:
            raise dimension_error(self.dimensions, block.shape[1])
        needed = self.rows + len(block)
        self.reserve(needed)
        self._data[self.rows : needed] = block
        self.rows = needed

    def keep(self, positions: Sequence[int]) -> None:
        """Keep only the rows at `positions`, in a new array (snapshots stay valid)."""
        self._data = self._data[np.asarray(positions, dtype=np.intp)]
        self.rows = len(positions)


class _SqliteIndex(VectorIndex):
    """What the two SQLite indexes share: a worker thread on the file, inserts of entries
    with their vectors, and the scope-level operations; each index says how it
    searches (`search`), evicts (`_evict`) and clears (`_clear`) on its own tables."""

    _TABLE = ""

    def __init__(self, worker: SqliteWorker, insert_row: InsertRow) -> None:
        self._worker = worker
        self._insert_row = insert_row

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._worker.path!r})"

    async def add(self, scope: str, entry: MemoryEntry, vector: Vector) -> None:
        check_scope(scope)
        check_entry(entry)
        # concurrent adds share a transaction: the worker commits queued writes together
        await self._worker.write(
            functools.partial(self._insert_row, scope, entry_row(entry), _blob(vector))
        )

    async def evict(self, scope: str, policy: EvictionPolicy) -> int:
        check_scope(scope)
        check_policy(policy)
        evict = functools.partial(self._evict, scope, *eviction_bounds(policy))
        return await self._worker.write(evict)

    async def clear(self, scope: str) -> None:
        check_scope(scope)
        await self._worker.write(functools.partial(self._clear, scope))

    async def has_entries(self, scope: str) -> bool:
        check_scope(scope)
        return await self._worker.read(functools.partial(scope_has_entries, self._TABLE, scope))

    async def aclose(self) -> None:
        """Close the connection and end the worker thread."""
        await self._worker.aclose()

    @abc.abstractmethod
    def _evict(self, scope: str, cutoff_us: int, limit: int, connection: sqlite3.Connection) -> int:
        """Delete what an eviction policy drops from this index's tables; how many rows."""

    @abc.abstractmethod
    def _clear(self, scope: str, connection: sqlite3.Connection) -> None:
        """Delete every row of `scope` from this index's tables."""


class SqliteVectorIndex(_SqliteIndex):
    """Entries and their float32 vectors in the ``vector_entries`` table of a SQLite file
    (WAL mode), searched exactly with numpy.

    Each scope's vectors are cached as one matrix on the worker thread. Before a search
    the cache is brought up to date in one read transaction: only the rows added since
    (ids grow monotonically), unless the scope's generation in ``vector_scopes`` changed —
    evict and clear bump it — which reloads the scope. So several processes can share the
    file and each sees the others' writes.
    """

    _TABLE = "vector_entries"

    def __init__(self, path: str | os.PathLike[str], *, busy_timeout: float = 5.0) -> None:
        worker = SqliteWorker(path, setup=_create_exact_schema, busy_timeout=busy_timeout)
        super().__init__(worker, _insert_exact)
        self._cache: dict[str, _CachedScope] = {}
        """Owned by the worker thread: only functions run by the worker touch it."""

    async def search(self, scope: str, vector: Vector, k: int) -> list[MemoryEntry]:
        check_scope(scope)
        check_k(k)
        query = unit_vector(vector)
        return await self._worker.read(functools.partial(self._search, scope, query, k))

    async def aclose(self) -> None:
        """Close the connection, end the worker thread and drop the cached matrices."""
        await super().aclose()
        self._cache = {}

    def _clear(self, scope: str, connection: sqlite3.Connection) -> None:
        _clear_exact(scope, connection)

    def _search(
        self, scope: str, query: Matrix, k: int, connection: sqlite3.Connection
    ) -> list[MemoryEntry]:
        with read_snapshot(connection):
            cached = self._refreshed(connection, scope)
            if cached is None:
                return []
            if cached.matrix.dimensions != query.size:
                raise dimension_error(cached.matrix.dimensions, query.size)
            positions = top_positions(cached.matrix.view, query, k)
            ids = [cached.ids[position] for position in positions]
            return entries_by_id(connection, self._TABLE, ids)

    def _evict(self, scope: str, cutoff_us: int, limit: int, connection: sqlite3.Connection) -> int:
        removed = delete_evicted(connection, "vector_entries", scope, cutoff_us, limit)
        if removed:
            before, generation = _bump_generation(connection, scope)
            cached = self._cache.get(scope)
            if cached is not None and cached.generation == before:
                cached.forget(set(removed), generation)  # no reload for this process
        return len(removed)

    def _refreshed(self, connection: sqlite3.Connection, scope: str) -> _CachedScope | None:
        found = connection.execute(
            "SELECT generation FROM vector_scopes WHERE scope = ?", (scope,)
        ).fetchone()
        if found is None:
            self._cache.pop(scope, None)
            return None
        cached = self._cache.get(scope)
        if cached is None or cached.generation != found[0]:
            cached = self._cache[scope] = _CachedScope(found[0])
        new_rows = connection.execute(
            "SELECT count(*) FROM vector_entries WHERE scope = ? AND id > ?",
            (scope, cached.last_id),
        ).fetchone()[0]
        if new_rows:
            cursor = connection.execute(
                "SELECT id, vector FROM vector_entries WHERE scope = ? AND id > ? ORDER BY id",
                (scope, cached.last_id),
            )
            cached.extend(cursor, new_rows)
        return cached if cached.ids else None


class _CachedScope:
    """One scope's vectors as of `generation`, with the row id of each."""

    __slots__ = ("_matrix", "generation", "ids")

    def __init__(self, generation: int) -> None:
        self.generation = generation
        self.ids: list[int] = []
        self._matrix: _GrowingMatrix | None = None

    @property
    def last_id(self) -> int:
        return self.ids[-1] if self.ids else 0

    @property
    def matrix(self) -> _GrowingMatrix:
        assert self._matrix is not None, "no rows cached yet"
        return self._matrix

    def forget(self, removed: set[int], generation: int) -> None:
        """Drop the rows whose ids are in `removed`; the cache is now as of `generation`."""
        kept = [position for position, row_id in enumerate(self.ids) if row_id not in removed]
        if self._matrix is not None:
            self._matrix.keep(kept)
        self.ids = [self.ids[position] for position in kept]
        self.generation = generation

    def extend(self, cursor: sqlite3.Cursor, count: int) -> None:
        """Append the `count` rows (id, vector blob) of `cursor`, a chunk at a time: the
        whole scope is never held twice."""
        remaining = count
        while rows := cursor.fetchmany(_LOAD_CHUNK_ROWS):
            block = np.frombuffer(b"".join(blob for _, blob in rows), dtype=np.float32)
            block = block.reshape(len(rows), -1)
            if self._matrix is None:
                self._matrix = _GrowingMatrix(block.shape[1])
            self._matrix.reserve(self._matrix.rows + remaining)
            self._matrix.append(block)
            self.ids += [row_id for row_id, _ in rows]
            remaining -= len(rows)


_EXACT_SCHEMA = """
CREATE TABLE IF NOT EXISTS vector_entries (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    scope TEXT NOT NULL,
    content TEXT NOT NULL,
    structured_content TEXT,
    stored_at_us INTEGER NOT NULL,
    metadata TEXT NOT NULL,
    vector BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS vector_entries_by_scope ON vector_entries (scope, id);
CREATE TABLE IF NOT EXISTS vector_scopes (
    scope TEXT PRIMARY KEY,
    generation INTEGER NOT NULL
);
"""
# AUTOINCREMENT: ids are never reused, so "rows with id > the last one cached" are new.


def _create_exact_schema(connection: sqlite3.Connection) -> None:
    connection.executescript(_EXACT_SCHEMA)


def _insert_exact(scope: str, row: EntryRow, blob: bytes, connection: sqlite3.Connection) -> None:
    held = connection.execute("SELECT length(vector) FROM vector_entries LIMIT 1").fetchone()
    if held is not None and held[0] != len(blob):
        raise dimension_error(held[0] // 4, len(blob) // 4)
    connection.execute(
        "INSERT INTO vector_entries "
        "(scope, content, structured_content, stored_at_us, metadata, vector) "
        "VALUES (?, ?, ?, ?, ?, ?)",
        (scope, *row, blob),
    )
    connection.execute(
        "INSERT INTO vector_scopes (scope, generation) VALUES (?, 0) "
        "ON CONFLICT (scope) DO NOTHING",
        (scope,),
    )


def _clear_exact(scope: str, connection: sqlite3.Connection) -> None:
    if connection.execute("DELETE FROM vector_entries WHERE scope = ?", (scope,)).rowcount:
        _bump_generation(connection, scope)


def _bump_generation(connection: sqlite3.Connection, scope: str) -> tuple[int, int]:
    """Tell every index object on the file that `scope` lost rows: the generation before,
    and the new one. A random one, not a counter: a counter would give a rolled-back
    transaction's value out again, and a cache that transaction updated would look
    current (writes queued together share a transaction, and roll back together when it
    fails as a whole)."""
    ((before,),) = connection.execute(
        "SELECT generation FROM vector_scopes WHERE scope = ?", (scope,)
    ).fetchall()
    ((after,),) = connection.execute(  # fetchall: the statement must finish
        "UPDATE vector_scopes SET generation = random() WHERE scope = ? RETURNING generation",
        (scope,),
    ).fetchall()
    return int(before), int(after)


class SqliteVecIndex(_SqliteIndex):
    """Entries in the ``vector_vec_entries`` table of a SQLite file and their vectors in
    ``vector_vec_index``, a ``vec0`` table of the sqlite-vec extension partitioned by scope
    (cosine distance, created with the dimensions of the first vector added).

    Nothing is cached: every search is one sqlite-vec query, so other processes' writes
    are seen at once and memory stays flat however large the store. A search returns at
    most 4096 entries (sqlite-vec's limit).
    """

    MAX_K = 4096
    _TABLE = "vector_vec_entries"

    def __init__(self, path: str | os.PathLike[str], *, busy_timeout: float = 5.0) -> None:
        sqlean = require("sqlean", "sqlite-vec")
        require("sqlite_vec", "sqlite-vec")
        worker = SqliteWorker(
            path, setup=_create_vec_schema, busy_timeout=busy_timeout, connect=sqlean.connect
        )
        super().__init__(worker, _insert_vec)

    async def search(self, scope: str, vector: Vector, k: int) -> list[MemoryEntry]:
        check_scope(scope)
        check_k(k)
        query = _blob(vector)
        search = functools.partial(_search_vec, scope, query, min(k, self.MAX_K))
        return await self._worker.read(search)

    def _evict(self, scope: str, cutoff_us: int, limit: int, connection: sqlite3.Connection) -> int:
        return _evict_vec(scope, cutoff_us, limit, connection)

    def _clear(self, scope: str, connection: sqlite3.Connection) -> None:
        _clear_vec(scope, connection)


_VEC_SCHEMA = """
CREATE TABLE IF NOT EXISTS vector_vec_entries (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    scope TEXT NOT NULL,
    content TEXT NOT NULL,
    structured_content TEXT,
    stored_at_us INTEGER NOT NULL,
    metadata TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS vector_vec_entries_by_scope ON vector_vec_entries (scope, id);
"""
_VEC_DIMENSIONS = re.compile(r"float\[(\d+)\]", re.IGNORECASE)


def _create_vec_schema(connection: sqlite3.Connection) -> None:
    connection.enable_load_extension(True)
    require("sqlite_vec", "sqlite-vec").load(connection)
    connection.enable_load_extension(False)
    connection.executescript(_VEC_SCHEMA)


def _vec_dimensions(connection: sqlite3.Connection) -> int | None:
    """The dimensions of the ``vec0`` table, None before the first vector."""
    found = connection.execute(
        "SELECT sql FROM sqlite_master WHERE name = 'vector_vec_index'"
    ).fetchone()
    if found is None:
        return None
    match = _VEC_DIMENSIONS.search(found[0])
    assert match is not None, f"unexpected vector_vec_index schema: {found[0]}"
    return int(match.group(1))


def _ensure_vec_table(connection: sqlite3.Connection, dimensions: int) -> None:
    held = _vec_dimensions(connection)
    if held == dimensions:
        return
    if held is not None:
        if connection.execute("SELECT 1 FROM vector_vec_entries LIMIT 1").fetchone():
            raise dimension_error(held, dimensions)
        connection.execute("DROP TABLE vector_vec_index")  # empty: take the new size
    connection.execute(
        "CREATE VIRTUAL TABLE vector_vec_index USING vec0("
        f"scope text partition key, embedding float[{dimensions}] distance_metric=cosine)"
    )


def _insert_vec(scope: str, row: EntryRow, blob: bytes, connection: sqlite3.Connection) -> None:
    _ensure_vec_table(connection, len(blob) // 4)
    entry_id = connection.execute(
        "INSERT INTO vector_vec_entries "
        "(scope, content, structured_content, stored_at_us, metadata) VALUES (?, ?, ?, ?, ?)",
        (scope, *row),
    ).lastrowid
    connection.execute(
        "INSERT INTO vector_vec_index (rowid, scope, embedding) VALUES (?, ?, ?)",
        (entry_id, scope, blob),
    )


def _search_vec(
    scope: str, query: bytes, k: int, connection: sqlite3.Connection
) -> list[MemoryEntry]:
    with read_snapshot(connection):
        held = _vec_dimensions(connection)
        if held is None:
            return []
        if held != len(query) // 4:
            raise dimension_error(held, len(query) // 4)
        ids = [
            row[0]
            for row in connection.execute(
                "SELECT rowid FROM vector_vec_index "
                "WHERE embedding MATCH ? AND k = ? AND scope = ? ORDER BY distance",
                (query, k, scope),
            )
        ]
        return entries_by_id(connection, "vector_vec_entries", ids)


def _evict_vec(scope: str, cutoff_us: int, limit: int, connection: sqlite3.Connection) -> int:
    removed = delete_evicted(connection, "vector_vec_entries", scope, cutoff_us, limit)
    _delete_vec_rows(connection, removed)
    return len(removed)


def _clear_vec(scope: str, connection: sqlite3.Connection) -> None:
    removed = connection.execute(
        "DELETE FROM vector_vec_entries WHERE scope = ? RETURNING id", (scope,)
    ).fetchall()
    _delete_vec_rows(connection, [row[0] for row in removed])


def _delete_vec_rows(connection: sqlite3.Connection, ids: list[int]) -> None:
    if ids:
        connection.executemany(
            "DELETE FROM vector_vec_index WHERE rowid = ?", [(row_id,) for row_id in ids]
        )


# What the SQLite indexes share.

EntryRow = tuple[str, str | None, int, str]
"""content, structured_content as JSON, stored_at in microseconds since the epoch (UTC),
metadata as JSON."""

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)
_NO_CUTOFF = -(2**63)


InsertRow = Callable[[str, EntryRow, bytes, sqlite3.Connection], None]
"""Inserts one entry (scope, columns, vector blob), inside the write's transaction. An
error that rejects the entry (a ValidationError) must come before anything is written: the
write is rolled back to its savepoint, and a virtual table (sqlite-vec's) may not be."""


def entry_row(entry: MemoryEntry) -> EntryRow:
    """`entry` as the columns of an entries table."""
    structured = entry.structured_content
    structured_json = None if structured is None else json_text(structured)
    stored_at_us = (entry.stored_at - _EPOCH) // _MICROSECOND
    return entry.content, structured_json, stored_at_us, json.dumps(dict(entry.metadata))


def entry_from_row(
    content: str, structured: str | None, stored_at_us: int, metadata: str
) -> MemoryEntry:
    """The `MemoryEntry` of a row written by `entry_row` (stored_at comes back in UTC)."""
    return MemoryEntry(
        content=content,
        structured_content=None if structured is None else json.loads(structured),
        stored_at=_EPOCH + timedelta(microseconds=stored_at_us),
        metadata=json.loads(metadata),
    )


def entries_by_id(connection: sqlite3.Connection, table: str, ids: list[int]) -> list[MemoryEntry]:
    """The entries of `table` with these ids, in the order of `ids`."""
    rows = connection.execute(
        f"SELECT id, content, structured_content, stored_at_us, metadata FROM {table} "
        "WHERE id IN (SELECT value FROM json_each(?))",
        (json.dumps(ids),),
    ).fetchall()
    by_id = {row[0]: entry_from_row(*row[1:]) for row in rows}
    return [by_id[row_id] for row_id in ids if row_id in by_id]


def scope_has_entries(table: str, scope: str, connection: sqlite3.Connection) -> bool:
    """Whether `table` holds a row of `scope`."""
    query = f"SELECT EXISTS (SELECT 1 FROM {table} WHERE scope = ?)"
    return bool(connection.execute(query, (scope,)).fetchone()[0])


def eviction_bounds(policy: EvictionPolicy) -> tuple[int, int]:
    """`policy` as (stored_at cutoff in microseconds, number of rows kept; -1: all)."""
    cutoff = policy.cutoff()
    cutoff_us = _NO_CUTOFF if cutoff is None else (cutoff - _EPOCH) // _MICROSECOND
    return cutoff_us, -1 if policy.max_entries is None else policy.max_entries


def delete_evicted(
    connection: sqlite3.Connection, table: str, scope: str, cutoff_us: int, limit: int
) -> list[int]:
    """Delete the rows of `scope` an eviction policy does not keep (see `eviction_bounds`);
    their ids. As `EvictionPolicy.keep`: the age limit first, then the most recent rows."""
    deleted = connection.execute(  # named parameters: 3.12 deprecates ?1 with a sequence
        f"DELETE FROM {table} WHERE scope = :scope AND id NOT IN ("
        f"SELECT id FROM {table} WHERE scope = :scope AND stored_at_us > :cutoff "
        "ORDER BY id DESC LIMIT :limit) RETURNING id",
        {"scope": scope, "cutoff": cutoff_us, "limit": limit},
    ).fetchall()
    return [row[0] for row in deleted]


# Vector arithmetic and argument checks.


def unit_vector(vector: object) -> Matrix:
    """`vector` as a float32 array of norm 1 (the zero vector stays zero)."""
    try:
        array = np.asarray(vector, dtype=np.float32)
    except (TypeError, ValueError) as error:
        raise ValidationError(
            f"vector must be a sequence of numbers, got: {reprlib.repr(vector)}"
        ) from error
    if array.ndim != 1 or array.size == 0 or not np.isfinite(array).all():
        raise ValidationError(
            f"vector must be a non-empty 1-D sequence of finite numbers, got: "
            f"{reprlib.repr(vector)}"
        )
    norm = np.linalg.norm(array)
    return array / norm if norm else array.copy()


def _blob(vector: object) -> bytes:
    return unit_vector(vector).tobytes()


def top_positions(matrix: Matrix, query: Matrix, k: int) -> list[int]:
    """The positions of the `k` rows of `matrix` most similar to `query` (unit vectors),
    most similar first; among equal scores the most recently stored first (a tie at the
    k-th place is broken the same way, not by where a partition happened to put it)."""
    scores = matrix @ query
    count = len(scores)
    if k < count:
        kth_best = np.partition(scores, count - k)[count - k]
        candidates = np.flatnonzero(scores >= kth_best)
    else:
        candidates = np.arange(count)
    newest_first = candidates[::-1]
    ranked = newest_first[np.argsort(-scores[newest_first], kind="stable")][:k]
    return [int(position) for position in ranked]


def kept_positions(policy: EvictionPolicy, stored_at: Sequence[datetime]) -> list[int]:
    """The positions of the entries `policy` keeps, as `EvictionPolicy.keep` would."""
    cutoff = policy.cutoff()
    kept = [i for i, moment in enumerate(stored_at) if cutoff is None or moment > cutoff]
    if policy.max_entries is not None:
        kept = kept[-policy.max_entries :]
    return kept


def dimension_error(held: int, given: int) -> ValidationError:
    """The error for a vector of `given` dimensions in an index of `held` dimensions."""
    return ValidationError(
        f"vector has {given} dimensions but the index holds vectors of {held} dimensions "
        "(use one embedder per index)"
    )


def check_k(k: object) -> int:
    """`k` if it is a positive integer, else a ValidationError."""
    if isinstance(k, bool) or not isinstance(k, int) or k <= 0:
        raise ValidationError(f"k must be a positive integer, got: {k!r}")
    return k
