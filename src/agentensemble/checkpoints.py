"""`CheckpointStore`: where a run records each task as it completes, so that a run that
crashed, failed, timed out, was cancelled or paused for a person resumes later (in this
process or another) without calling the completed tasks' models again.

A checkpoint is the run's own events: every completed task's `TaskCompleteEvent`, carrying
the task's trace, written under the run id and the task's place in one transaction as the
task completes; and a header with the run's plan, its inputs, how it ended and, for a
paused run, the review it waits for. `Ensemble(checkpoint=...)` records; ``run(resume=
run_id)`` folds the recorded events back into the run's outputs and runs the rest.

`CheckpointStore.sqlite(path)` keeps checkpoints in one SQLite file (WAL, one worker thread
per store, one transaction per write; several processes may share the file).
`CheckpointStore.in_memory()` keeps them for the life of the object (tests, notebooks).
"""

from __future__ import annotations

import json
import os
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from agentensemble._checks import require_seconds, require_text
from agentensemble._sync import run_sync
from agentensemble.errors import ValidationError

if TYPE_CHECKING:
    import sqlite3

    from agentensemble.memory._sqlite_worker import SqliteWorker

__all__ = ["CheckpointInfo", "CheckpointStore", "SavedRun"]

RUNNING = "RUNNING"
"""The status of a run that has not ended (or whose process died)."""


@dataclass(frozen=True, slots=True)
class CheckpointInfo:
    """One run a store holds, as `CheckpointStore.runs()` lists it."""

    run_id: str
    status: str
    """``RUNNING`` (still going, or its process died), else the run's `ExitReason` value
    (``COMPLETED``, ``ERROR``, ``TIMEOUT``, ``PAUSED``, ...)."""
    completed_tasks: int
    """Task executions recorded (delegated workers included)."""
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True, slots=True)
class SavedRun:
    """Everything a store holds for one run."""

    run_id: str
    status: str
    header: Mapping[str, Any]
    """The run's plan, inputs and, for a paused run, the review it waits for."""
    records: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    """Each completed task's event (wire form), by the task's place in the run."""


class CheckpointStore(ABC):
    """Where runs are checkpointed. Use `sqlite` or `in_memory`; a custom store implements
    the five async methods."""

    def __init__(self, *, ttl: timedelta | float | None = None) -> None:
        self._clock: Callable[[], float] = time.time
        """Seconds since the epoch (tests move it instead of waiting)."""
        self._ttl = None if ttl is None else require_seconds(ttl, "CheckpointStore ttl")

    @staticmethod
    def sqlite(
        path: str | os.PathLike[str], *, ttl: timedelta | float | None = None
    ) -> CheckpointStore:
        """Checkpoints in the SQLite file at `path` (created if missing). Runs not updated
        for `ttl` (a timedelta or seconds) are deleted when a new run starts."""
        return SqliteCheckpointStore(path, ttl=ttl)

    @staticmethod
    def in_memory(*, ttl: timedelta | float | None = None) -> CheckpointStore:
        """Checkpoints held by this object (gone with the process)."""
        return InMemoryCheckpointStore(ttl=ttl)

    # ---- what a run calls ------------------------------------------------------------------

    @abstractmethod
    async def load(self, run_id: str) -> SavedRun | None:
        """The run's checkpoint, or None when the store has none."""

    @abstractmethod
    async def begin(self, run_id: str, header: Mapping[str, Any]) -> None:
        """Start (or, resuming, continue) the run's checkpoint with `header`; runs older
        than the store's ttl are deleted."""

    @abstractmethod
    async def record(self, run_id: str, key: str, event: Mapping[str, Any]) -> None:
        """Record one completed task (`key`: its place in the run), atomically."""

    @abstractmethod
    async def end(self, run_id: str, status: str, header: Mapping[str, Any]) -> None:
        """Record how the run ended (and its header, which holds a pending review)."""

    @abstractmethod
    async def alist(self) -> list[CheckpointInfo]:
        """Every run the store holds, oldest first."""

    @abstractmethod
    async def adelete(self, run_id: str) -> bool:
        """Delete the run's checkpoint; False when there was none."""

    async def aclose(self) -> None:  # noqa: B027  # a store with nothing to close
        """Release what the store holds open (a file's connection and thread)."""

    # ---- what a user calls -----------------------------------------------------------------

    def runs(self) -> list[CheckpointInfo]:
        """Every run the store holds, oldest first (works inside a running loop too)."""
        return run_sync(self.alist())

    def delete(self, run_id: str) -> bool:
        """Delete the run's checkpoint; False when there was none."""
        require_text(run_id, "CheckpointStore.delete run_id must not be blank")
        return run_sync(self.adelete(run_id))

    def close(self) -> None:
        """Release what the store holds open."""
        run_sync(self.aclose())

    def _expired_before(self) -> float | None:
        return None if self._ttl is None else self._clock() - self._ttl


class InMemoryCheckpointStore(CheckpointStore):
    """Checkpoints in a dict of this object."""

    def __init__(self, *, ttl: timedelta | float | None = None) -> None:
        super().__init__(ttl=ttl)
        self._runs: dict[str, _Held] = {}
        self._lock = threading.Lock()  # runs on several loops may share one store

    async def load(self, run_id: str) -> SavedRun | None:
        with self._lock:
            held = self._runs.get(run_id)
            if held is None:
                return None
            return SavedRun(run_id, held.status, dict(held.header), dict(held.records))

    async def begin(self, run_id: str, header: Mapping[str, Any]) -> None:
        now = self._clock()
        with self._lock:
            self._prune(self._expired_before())
            held = self._runs.setdefault(run_id, _Held(created_at=now))
            held.header, held.status, held.updated_at = dict(header), RUNNING, now

    async def record(self, run_id: str, key: str, event: Mapping[str, Any]) -> None:
        with self._lock:
            held = self._runs.setdefault(run_id, _Held(created_at=self._clock()))
            held.records[key] = json.loads(json.dumps(event))  # a copy, as a file would hold
            held.updated_at = self._clock()

    async def end(self, run_id: str, status: str, header: Mapping[str, Any]) -> None:
        with self._lock:
            held = self._runs.setdefault(run_id, _Held(created_at=self._clock()))
            held.status, held.header, held.updated_at = status, dict(header), self._clock()

    async def alist(self) -> list[CheckpointInfo]:
        with self._lock:
            return [held.info(run_id) for run_id, held in self._runs.items()]

    async def adelete(self, run_id: str) -> bool:
        with self._lock:
            return self._runs.pop(run_id, None) is not None

    def _prune(self, before: float | None) -> None:
        if before is not None:
            for run_id in [r for r, held in self._runs.items() if held.updated_at < before]:
                del self._runs[run_id]


@dataclass(slots=True)
class _Held:
    created_at: float
    updated_at: float = 0.0
    status: str = RUNNING
    header: dict[str, Any] = field(default_factory=dict)
    records: dict[str, Any] = field(default_factory=dict)

    def info(self, run_id: str) -> CheckpointInfo:
        return CheckpointInfo(
            run_id, self.status, len(self.records), _utc(self.created_at), _utc(self.updated_at)
        )


_SCHEMA = """
CREATE TABLE IF NOT EXISTS checkpoint_runs (
    run_id TEXT PRIMARY KEY,
    status TEXT NOT NULL,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    header TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS checkpoint_records (
    run_id TEXT NOT NULL,
    key TEXT NOT NULL,
    event TEXT NOT NULL,
    PRIMARY KEY (run_id, key)
);
"""


class SqliteCheckpointStore(CheckpointStore):
    """Checkpoints in one SQLite file."""

    def __init__(
        self, path: str | os.PathLike[str], *, ttl: timedelta | float | None = None
    ) -> None:
        super().__init__(ttl=ttl)
        from agentensemble.memory._sqlite_worker import SqliteWorker

        self._worker: SqliteWorker = SqliteWorker(path, setup=_create_tables)

    @property
    def path(self) -> str:
        """The file the checkpoints are in."""
        return self._worker.path

    async def load(self, run_id: str) -> SavedRun | None:
        def read(connection: sqlite3.Connection) -> SavedRun | None:
            row = connection.execute(
                "SELECT status, header FROM checkpoint_runs WHERE run_id = ?", (run_id,)
            ).fetchone()
            if row is None:
                return None
            records = connection.execute(
                "SELECT key, event FROM checkpoint_records WHERE run_id = ?", (run_id,)
            ).fetchall()
            return SavedRun(
                run_id, row[0], json.loads(row[1]), {k: json.loads(e) for k, e in records}
            )

        return await self._worker.read(read)

    async def begin(self, run_id: str, header: Mapping[str, Any]) -> None:
        text, before = json.dumps(header), self._expired_before()

        def write(connection: sqlite3.Connection) -> None:
            now = self._clock()
            if before is not None:
                _delete_where(connection, "updated_at < ?", (before,))
            connection.execute(
                "INSERT INTO checkpoint_runs VALUES (?, ?, ?, ?, ?) ON CONFLICT (run_id) DO "
                "UPDATE SET status = excluded.status, updated_at = excluded.updated_at, "
                "header = excluded.header",
                (run_id, RUNNING, now, now, text),
            )

        await self._worker.write(write)

    async def record(self, run_id: str, key: str, event: Mapping[str, Any]) -> None:
        text = json.dumps(event)

        def write(connection: sqlite3.Connection) -> None:
            connection.execute(
                "INSERT OR REPLACE INTO checkpoint_records VALUES (?, ?, ?)", (run_id, key, text)
            )
            connection.execute(
                "UPDATE checkpoint_runs SET updated_at = ? WHERE run_id = ?",
                (self._clock(), run_id),
            )

        await self._worker.write(write)

    async def end(self, run_id: str, status: str, header: Mapping[str, Any]) -> None:
        text = json.dumps(header)

        def write(connection: sqlite3.Connection) -> None:
            connection.execute(
                "UPDATE checkpoint_runs SET status = ?, updated_at = ?, header = ? "
                "WHERE run_id = ?",
                (status, self._clock(), text, run_id),
            )

        await self._worker.write(write)

    async def alist(self) -> list[CheckpointInfo]:
        def read(connection: sqlite3.Connection) -> list[CheckpointInfo]:
            rows = connection.execute(
                "SELECT r.run_id, r.status, r.created_at, r.updated_at, "
                "(SELECT COUNT(*) FROM checkpoint_records c WHERE c.run_id = r.run_id) "
                "FROM checkpoint_runs r ORDER BY r.created_at, r.run_id"
            ).fetchall()
            return [
                CheckpointInfo(run_id, status, count, _utc(created), _utc(updated))
                for run_id, status, created, updated, count in rows
            ]

        return await self._worker.read(read)

    async def adelete(self, run_id: str) -> bool:
        def write(connection: sqlite3.Connection) -> bool:
            return _delete_where(connection, "run_id = ?", (run_id,)) > 0

        return await self._worker.write(write)

    async def aclose(self) -> None:
        await self._worker.aclose()


def _create_tables(connection: sqlite3.Connection) -> None:
    connection.executescript(_SCHEMA)


def _delete_where(connection: sqlite3.Connection, where: str, values: tuple[Any, ...]) -> int:
    """Delete the runs matching `where`, with their records; how many runs went."""
    query = f"SELECT run_id FROM checkpoint_runs WHERE {where}"  # `where` is ours, not input
    ids = [row[0] for row in connection.execute(query, values)]
    for run_id in ids:
        connection.execute("DELETE FROM checkpoint_records WHERE run_id = ?", (run_id,))
        connection.execute("DELETE FROM checkpoint_runs WHERE run_id = ?", (run_id,))
    return len(ids)


def _utc(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)


def resolve_checkpoint(value: object) -> CheckpointStore | None:
    """`Ensemble(checkpoint=...)` as a store: None, a path (a SQLite file) or a store."""
    if value is None or isinstance(value, CheckpointStore):
        return value
    if isinstance(value, (str, os.PathLike)) and str(value).strip():
        return CheckpointStore.sqlite(value)
    raise ValidationError(
        f"Ensemble checkpoint must be None, a file path or a CheckpointStore, got: {value!r}"
    )
