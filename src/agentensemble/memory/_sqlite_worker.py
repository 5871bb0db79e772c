"""One SQLite connection on one worker thread, so database work never blocks the event loop.

The SQLite stores (entries, vectors) share this plumbing: the file is opened in WAL mode
(readers never block the writer, several processes can share it), every write is one
``BEGIN IMMEDIATE`` transaction (a process killed mid-write loses that write and nothing
else), and another process's write is waited for up to `busy_timeout` seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import queue
import sqlite3
import threading
import time
import weakref
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from agentensemble.errors import ValidationError

__all__ = ["Connect", "SqliteWorker", "in_transaction"]

T = TypeVar("T")
Connect = Callable[..., Any]
"""Opens a connection (``sqlite3.connect``, or ``sqlean.connect`` for extensions)."""


class SqliteWorker:
    """Runs functions of a connection on a thread of their own, one at a time.

    The connection is opened on first use, by the worker thread, then `setup(connection)`
    creates the schema. `aclose` (or the worker being garbage-collected) closes the
    connection and ends the thread. A process forked from one that used the worker (a
    pre-forking server, ``multiprocessing``) opens a connection and a thread of its own: the
    parent's thread does not exist there, and its connection must not be used.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        setup: Callable[[sqlite3.Connection], None],
        busy_timeout: float = 5.0,
        connect: Connect = sqlite3.connect,
    ) -> None:
        if (
            isinstance(busy_timeout, bool)
            or not isinstance(busy_timeout, (int, float))
            or not 0 <= busy_timeout < float("inf")
        ):
            raise ValidationError(
                f"busy_timeout must be a non-negative number of seconds, got: {busy_timeout!r}"
            )
        self.path = _checked_path(path)
        self._setup = setup
        self._busy_timeout = float(busy_timeout)
        self._connect = connect
        self._state = _WorkerState()
        self._executor: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()
        self._pid = os.getpid()
        self._closed = False
        self._inherited: list[_WorkerState] = []
        self._finalizer = weakref.finalize(self, _REAPER.collect, self._state)

    async def read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """`fn(connection)` on the worker thread, outside any explicit transaction."""
        return await asyncio.wrap_future(self._pool().submit(self._state.call, self, fn))

    async def write(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """`fn(connection)` on the worker thread in one ``BEGIN IMMEDIATE`` transaction,
        committed if it returns and rolled back if it raises."""
        return await asyncio.wrap_future(self._pool().submit(self._state.transaction, self, fn))

    async def aclose(self) -> None:
        """Close the connection and end the thread (waiting for the work in progress)."""
        executor = self._executor
        if executor is None:
            self.close()
            return
        try:
            await asyncio.wrap_future(executor.submit(self._state.close_connection))
        finally:
            self.close()

    def close(self) -> None:
        """Close without awaiting: the worker finishes queued work, then closes. Work
        asked for afterwards raises RuntimeError."""
        with self._lock:
            self._executor = None
            self._closed = True
        _WorkerState.shut_down(self._state)

    def _pool(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._closed:
                raise RuntimeError(f"The SQLite file's worker is closed: {self.path}")
            if self._pid != os.getpid():
                self._start_over_after_fork()
            if self._executor is None:
                self._executor = ThreadPoolExecutor(
                    max_workers=1, thread_name_prefix="agentensemble-sqlite"
                )
                self._state.executor = self._executor
                _REAPER.watch()
            return self._executor

    def _start_over_after_fork(self) -> None:
        self._finalizer.detach()
        self._inherited.append(self._state)  # kept, never closed: the parent's connection
        self._state = _WorkerState()
        self._executor = None
        self._pid = os.getpid()
        self._finalizer = weakref.finalize(self, _REAPER.collect, self._state)

    def open_connection(self) -> sqlite3.Connection:
        """The connection, set up; a file SQLite cannot use is an error naming it."""
        try:
            connection: sqlite3.Connection = self._connect(
                self.path, timeout=self._busy_timeout, isolation_level=None
            )
        except sqlite3.Error as error:
            raise sqlite3.OperationalError(f"SQLite file {self.path}: {error}") from error
        try:
            connection.execute(f"PRAGMA busy_timeout={int(self._busy_timeout * 1000)}")
            _use_wal(connection, self._busy_timeout)
            connection.execute("PRAGMA synchronous=NORMAL")
            self._setup(connection)
        except sqlite3.Error as error:
            connection.close()
            raise type(error)(f"SQLite file {self.path}: {error}") from error
        except BaseException:
            connection.close()
            raise
        return connection

    async def check(self) -> None:
        """Open the file now (its schema made or checked), so that a file SQLite cannot use
        is a `ValidationError` naming it before the work that needs it. Once the connection
        is open (in this process), there is nothing to check: every run checks its store,
        and a round trip to the worker thread costs more than most of its operations."""
        if self._state.connection is not None and self._pid == os.getpid():
            return
        try:
            await self.read(lambda connection: None)
        except sqlite3.Error as error:
            raise ValidationError(str(error)) from error


_SQLITE_HEADER = b"SQLite format 3\x00"


def _checked_path(path: object) -> str:
    """`path` as a string, when SQLite could make or open a database there."""
    try:
        text = os.fspath(path)  # type: ignore[call-overload]
    except TypeError:
        raise ValidationError(f"SQLite path must be a str or a path, got: {path!r}") from None
    if not isinstance(text, str) or not text.strip():
        raise ValidationError(f"SQLite path must not be blank, got: {path!r}")
    if text == ":memory:":
        return text
    directory = os.path.dirname(os.path.abspath(text))
    if not os.path.isdir(directory):
        raise ValidationError(
            f"SQLite path {text!r} is in a directory that does not exist: {directory}"
        )
    if os.path.isdir(text):
        raise ValidationError(f"SQLite path {text!r} is a directory, not a file")
    if not os.path.exists(text):
        if not os.access(directory, os.W_OK):
            raise ValidationError(f"SQLite path {text!r}: cannot create a file in {directory}")
        return text
    if not os.access(text, os.R_OK | os.W_OK):
        raise ValidationError(f"SQLite file {text!r} is not readable and writable")
    with open(text, "rb") as file:
        head = file.read(len(_SQLITE_HEADER))
    if head and head != _SQLITE_HEADER:
        raise ValidationError(f"SQLite path {text!r} is a file that is not a SQLite database")
    return text


def in_transaction(connection: sqlite3.Connection, fn: Callable[[], T]) -> T:
    """`fn()` in one ``BEGIN IMMEDIATE`` transaction, committed if it returns, rolled back
    if it (or the commit) raises."""
    connection.execute("BEGIN IMMEDIATE")
    try:
        result = fn()
        connection.execute("COMMIT")
    except BaseException:
        if connection.in_transaction:  # a failed COMMIT may have ended it already
            connection.execute("ROLLBACK")
        raise
    return result


def _use_wal(connection: sqlite3.Connection, busy_timeout: float) -> None:
    """Switch the file to WAL mode. Two processes opening a new file at once can find it
    locked without SQLite's busy handler being asked, so the switch is retried until
    `busy_timeout` has passed."""
    deadline = time.monotonic() + busy_timeout
    while True:
        try:
            (mode,) = connection.execute("PRAGMA journal_mode=WAL").fetchone()
        except sqlite3.OperationalError as error:
            if "locked" not in str(error) or time.monotonic() >= deadline:
                raise
            time.sleep(0.005)  # on the worker thread, never the event loop
            continue
        if str(mode).lower() not in ("wal", "memory"):  # ":memory:" has no journal file
            raise sqlite3.OperationalError(f"cannot use WAL mode for this database: {mode}")
        return


class _WorkerState:
    """What the worker thread owns; kept apart from the worker so that a finalizer can
    release it after the worker is gone."""

    __slots__ = ("connection", "executor")

    def __init__(self) -> None:
        self.connection: sqlite3.Connection | None = None
        self.executor: ThreadPoolExecutor | None = None

    def call(self, worker: SqliteWorker, fn: Callable[[sqlite3.Connection], T]) -> T:
        return fn(self._connection(worker))

    def transaction(self, worker: SqliteWorker, fn: Callable[[sqlite3.Connection], T]) -> T:
        connection = self._connection(worker)
        return in_transaction(connection, lambda: fn(connection))

    def _connection(self, worker: SqliteWorker) -> sqlite3.Connection:
        if self.connection is None:
            self.connection = worker.open_connection()
        return self.connection

    def close_connection(self) -> None:
        connection, self.connection = self.connection, None
        if connection is not None:
            connection.close()

    @staticmethod
    def shut_down(state: _WorkerState) -> None:
        """Close the connection on its thread and end the thread (the worker was closed or
        collected, or the interpreter is exiting)."""
        executor, state.executor = state.executor, None
        if executor is None:
            return
        with contextlib.suppress(RuntimeError):  # raised once the interpreter is exiting
            executor.submit(state.close_connection)
        executor.shutdown(wait=False)
        _REAPER.unwatch()


class _Reaper:
    """Shuts down the threads of workers that were garbage-collected.

    The collector runs finalizers on whatever thread it happens to interrupt, and that may
    be a thread being started by `ThreadPoolExecutor.submit`, which holds the executors'
    process-wide lock until the new thread runs: a finalizer that called ``submit`` there
    would wait for that lock forever. So a finalizer only queues the worker's state
    (`queue.SimpleQueue.put` is safe anywhere), and this thread shuts it down. It runs while
    any worker has a thread, and ends with the last.
    """

    def __init__(self) -> None:
        self._start_over()

    def _start_over(self) -> None:
        """Nothing watched, no thread (a new process, or a forked child, where the
        parent's thread and lock state mean nothing)."""
        self._states: queue.SimpleQueue[_WorkerState | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._watched = 0
        self._thread: threading.Thread | None = None
        self._pid = os.getpid()

    def watch(self) -> None:
        """A worker started its thread."""
        if self._pid != os.getpid():
            self._start_over()
        with self._lock:
            self._watched += 1
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._reap, name="agentensemble-sqlite-reaper", daemon=True
                )
                self._thread.start()

    def unwatch(self) -> None:
        """A worker's thread was shut down; after the last one, this thread ends."""
        with self._lock:
            self._watched -= 1
            if self._watched <= 0:
                self._states.put(None)

    def collect(self, state: _WorkerState) -> None:
        """The worker owning `state` was collected (a finalizer: only queue it)."""
        self._states.put(state)

    def _reap(self) -> None:
        while True:
            state = self._states.get()
            if state is not None:
                _WorkerState.shut_down(state)
                continue
            with self._lock:
                if self._watched <= 0:  # else a worker started since: keep serving
                    self._thread = None
                    return


_REAPER = _Reaper()
"""The process's one reaper (a thread only while some SQLite worker has a thread)."""
