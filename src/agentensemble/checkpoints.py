"""`CheckpointStore`: where a run records each task as it completes, so that a run that
crashed, failed, timed out, was cancelled or paused for a person resumes later (in this
process or another) without calling the completed tasks' models again.

A checkpoint is the run's own events: every completed task's `TaskCompleteEvent`, carrying
the task's trace, written under the run id and the task's place in one transaction as the
task completes; and a header with the run's plan, its inputs, how it ended and, for a
paused run, the review it waits for. `Ensemble(checkpoint=...)` records; ``run(resume=
run_id)`` folds the recorded events back into the run's outputs and runs the rest.

`CheckpointStore.sqlite(path)` keeps checkpoints in one SQLite file (WAL, one worker thread
per store; a write commits before it returns, and writes queued together share a
transaction; several processes may share the file).
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
    the six async methods.

    A run that starts or resumes claims its id: while it runs, another start or resume of
    the same id is refused (in this process, or in another process on this machine whose
    claim is checked by its process id; a claim from another machine is taken over, as a
    dead process's is).
    """

    def __init__(self, *, ttl: timedelta | float | None = None) -> None:
        self._clock: Callable[[], float] = time.time
        """Seconds since the epoch (tests move it instead of waiting)."""
        self._ttl = None if ttl is None else require_seconds(ttl, "CheckpointStore ttl")
        self._claims: set[str] = set()
        """The claims of the runs going on in this process."""
        self._host = ""
        """This machine's name (looked up with the first claim)."""

    @staticmethod
    def sqlite(
        path: str | os.PathLike[str], *, ttl: timedelta | float | None = None
    ) -> CheckpointStore:
        """Checkpoints in the SQLite file at `path` (created if missing). Runs not updated
        for `ttl` (a timedelta or seconds) are deleted when a new run starts, unless they
        are still running. Build the store once and share it: each opens a thread and a
        connection of its own."""
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
    async def begin(
        self, run_id: str, header: Mapping[str, Any], *, claim: str, fresh: bool
    ) -> None:
        """Start (`fresh`: over any earlier run with that id) or continue the run's
        checkpoint with `header`, claimed by `claim` (see `new_claim`); refuse with a
        `ValidationError` while a live claim holds it. Runs older than the store's ttl and
        not running are deleted."""

    @abstractmethod
    async def record(self, run_id: str, key: str, event: Mapping[str, Any]) -> None:
        """Record one completed task (`key`: its place in the run), atomically."""

    @abstractmethod
    async def end(self, run_id: str, status: str, header: Mapping[str, Any]) -> None:
        """Record how the run ended (and its header, which holds a pending review), and
        release its claim."""

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

    # ---- claims ----------------------------------------------------------------------------

    def new_claim(self) -> str:
        """A claim for one run of this process: ``host:pid:token``."""
        claim = f"{self._hostname()}:{os.getpid()}:{os.urandom(8).hex()}"
        self._claims.add(claim)
        return claim

    def _hostname(self) -> str:
        if not self._host:
            import socket

            self._host = socket.gethostname()
        return self._host

    def release(self, claim: str) -> None:
        """The run holding `claim` ended in this process."""
        self._claims.discard(claim)

    def _live(self, claim: str | None) -> bool:
        """Whether the run holding `claim` is still going: ours, or a process on this
        machine that is alive (a claim from another machine cannot be checked)."""
        if not claim:
            return False
        host, _, rest = claim.partition(":")
        pid_text = rest.partition(":")[0]
        if host != self._hostname() or not pid_text.isdigit():
            return False
        pid = int(pid_text)
        if pid == os.getpid():
            return claim in self._claims
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:  # another user's process: alive
            return True
        return True

    def _refuse_if_running(self, run_id: str, claim: str | None) -> None:
        if self._live(claim):
            raise ValidationError(
                f"run {run_id} is running (claimed by {claim}): a run id is run by one "
                "process at a time; wait for it to end, or resume another run"
            )

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

    async def begin(
        self, run_id: str, header: Mapping[str, Any], *, claim: str, fresh: bool
    ) -> None:
        now = self._clock()
        with self._lock:
            held = self._runs.get(run_id)
            if held is not None:
                self._refuse_if_running(run_id, held.claim)
            self._prune(self._expired_before())
            if fresh or held is None:
                held = self._runs[run_id] = _Held(created_at=now)
            held.header, held.status, held.updated_at, held.claim = (
                dict(header),
                RUNNING,
                now,
                claim,
            )

    async def record(self, run_id: str, key: str, event: Mapping[str, Any]) -> None:
        with self._lock:
            held = self._runs.setdefault(run_id, _Held(created_at=self._clock()))
            held.records[key] = event  # a wire message: a new dict nobody else holds
            held.updated_at = self._clock()

    async def end(self, run_id: str, status: str, header: Mapping[str, Any]) -> None:
        with self._lock:
            held = self._runs.setdefault(run_id, _Held(created_at=self._clock()))
            held.status, held.header, held.updated_at = status, dict(header), self._clock()
            held.claim = None

    async def alist(self) -> list[CheckpointInfo]:
        with self._lock:
            return [held.info(run_id) for run_id, held in self._runs.items()]

    async def adelete(self, run_id: str) -> bool:
        with self._lock:
            return self._runs.pop(run_id, None) is not None

    def _prune(self, before: float | None) -> None:
        if before is None:
            return
        for run_id, held in list(self._runs.items()):
            if held.updated_at < before and not self._live(held.claim):
                del self._runs[run_id]


@dataclass(slots=True)
class _Held:
    created_at: float
    updated_at: float = 0.0
    status: str = RUNNING
    header: dict[str, Any] = field(default_factory=dict)
    records: dict[str, Any] = field(default_factory=dict)
    claim: str | None = None

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
    header TEXT NOT NULL,
    claim TEXT
);
CREATE INDEX IF NOT EXISTS checkpoint_runs_updated ON checkpoint_runs (updated_at);
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

    async def begin(
        self, run_id: str, header: Mapping[str, Any], *, claim: str, fresh: bool
    ) -> None:
        text, before = json.dumps(header), self._expired_before()

        def write(connection: sqlite3.Connection) -> None:
            row = connection.execute(
                "SELECT claim FROM checkpoint_runs WHERE run_id = ?", (run_id,)
            ).fetchone()
            if row is not None:
                self._refuse_if_running(run_id, row[0])
            if before is not None:
                self._prune(connection, before)
            if fresh:
                _delete_run(connection, run_id)
            now = self._clock()
            connection.execute(
                "INSERT INTO checkpoint_runs VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (run_id) DO "
                "UPDATE SET status = excluded.status, updated_at = excluded.updated_at, "
                "header = excluded.header, claim = excluded.claim",
                (run_id, RUNNING, now, now, text, claim),
            )

        await self._worker.write(write)

    async def record(self, run_id: str, key: str, event: Mapping[str, Any]) -> None:
        text = json.dumps(event)

        def write(connection: sqlite3.Connection) -> None:
            connection.execute(
                "INSERT OR REPLACE INTO checkpoint_records VALUES (?, ?, ?)", (run_id, key, text)
            )
            _touch(connection, run_id, self._clock())

        await self._worker.write(write)

    async def end(self, run_id: str, status: str, header: Mapping[str, Any]) -> None:
        text = json.dumps(header)

        def write(connection: sqlite3.Connection) -> None:
            _touch(connection, run_id, self._clock())
            connection.execute(
                "UPDATE checkpoint_runs SET status = ?, header = ?, claim = NULL WHERE run_id = ?",
                (status, text, run_id),
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
            return _delete_run(connection, run_id)

        return await self._worker.write(write)

    async def aclose(self) -> None:
        await self._worker.aclose()

    def _prune(self, connection: sqlite3.Connection, before: float) -> None:
        """Delete the runs untouched since `before` that are not running, and any records
        left without their run."""
        stale = connection.execute(
            "SELECT run_id, claim FROM checkpoint_runs WHERE updated_at < ?", (before,)
        ).fetchall()
        for run_id, claim in stale:
            if not self._live(claim):
                _delete_run(connection, run_id)
        connection.execute(
            "DELETE FROM checkpoint_records WHERE run_id NOT IN "
            "(SELECT run_id FROM checkpoint_runs)"
        )


def _create_tables(connection: sqlite3.Connection) -> None:
    connection.executescript(_SCHEMA)


def _delete_run(connection: sqlite3.Connection, run_id: str) -> bool:
    """Delete one run and its records; whether there was one."""
    connection.execute("DELETE FROM checkpoint_records WHERE run_id = ?", (run_id,))
    return (
        connection.execute("DELETE FROM checkpoint_runs WHERE run_id = ?", (run_id,)).rowcount > 0
    )


def _touch(connection: sqlite3.Connection, run_id: str, now: float) -> None:
    """Mark the run updated now (making its row if a prune took it meanwhile)."""
    connection.execute(
        "INSERT INTO checkpoint_runs VALUES (?, ?, ?, ?, '{}', NULL) ON CONFLICT (run_id) DO "
        "UPDATE SET updated_at = excluded.updated_at",
        (run_id, RUNNING, now, now),
    )


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
