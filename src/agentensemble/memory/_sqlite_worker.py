"""One SQLite connection on one worker thread, so database work never blocks the event loop.

The SQLite stores (entries, vectors, checkpoints) share this plumbing: the file is opened
in WAL mode (readers never block the writer, several processes can share it), writes are
``BEGIN IMMEDIATE`` transactions that commit before their callers hear back (writes queued
together share one; a process killed mid-write loses only writes nobody was told were
done), and another process's write is waited for up to `busy_timeout` seconds.

A worker made with ``inline=True`` runs a job on the calling event loop's thread instead,
on a second connection that never waits: in a busy server, handing a job to a thread and
back costs several times the job itself (each SQLite call hands the GIL to the loop and
waits to get it back). Reads run at once; writes asked for in one turn of the loop commit
together at its end. A job that would wait (another connection holds the write lock) or
whose SQL runs past `_INLINE_BUDGET` is rolled back and goes to the worker thread, as do
the next `_AFTER_SLOW` jobs. So the loop is held for about a millisecond of SQL at most,
plus what the job does in Python (decoding its rows) and the disk reads SQLite makes (a
file on a network disk wants ``inline=False``). Inline jobs and the thread's can run at
the same time, each on its own connection (SQLite keeps their transactions apart), and a
job may run before one asked for earlier that is still queued: the job functions of an
inline worker must share nothing but the database.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import functools
import itertools
import math
import os
import queue
import sqlite3
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple, TypeVar

from agentensemble._logging import get_logger
from agentensemble.errors import ValidationError

__all__ = ["Connect", "SqliteWorker", "read_snapshot"]

logger = get_logger("agentensemble.memory")

T = TypeVar("T")
Connect = Callable[..., Any]
"""Opens a connection (``sqlite3.connect``, or ``sqlean.connect`` for extensions)."""


class SqliteWorker:
    """Runs functions of a connection on a thread of their own, one at a time, in the order
    they were asked for; with `inline`, on the caller's thread instead when that need not
    wait (and then not always in order: see the module's docstring).

    The connection is opened on first use, by the worker thread, then `setup(connection)`
    creates the schema. Work waiting when the thread comes round is taken in one batch:
    consecutive writes share one transaction (group commit; if one raises, they run again,
    each in a savepoint of its own, so that it rolls back alone), and each event loop gets
    the batch's results in one wake-up. Under concurrent load that saves most of a round
    trip's cost per call: a submit is a queue put, and neither side wakes once per call.

    With `inline`, jobs run on the caller's thread unless they would wait (see the
    module's docstring); `setup` is run on the worker's connection only, so it must only
    make the file's schema, not set up a connection.

    `aclose` (or the worker being garbage-collected) closes the connection and ends the
    thread. A process forked from one that used the worker (a pre-forking server,
    ``multiprocessing``) opens a connection and a thread of its own: the parent's thread
    does not exist there, and its connection must not be used.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        setup: Callable[[sqlite3.Connection], None],
        busy_timeout: float = 5.0,
        connect: Connect = sqlite3.connect,
        inline: bool = False,
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
        self._inline = inline and self.path != ":memory:"  # a second connection: another file
        self._state = _WorkerState(self._opener(), self._inline_opener())
        self._lock = threading.Lock()
        self._pid = os.getpid()
        self._closed = False
        self._inherited: list[_WorkerState] = []
        self._finalizer = weakref.finalize(self, _WorkerState.stop, self._state)
        self._due: dict[asyncio.AbstractEventLoop, tuple[int, list[_Job]]] = {}
        """Inline writes asked for in this turn of each loop, and the process that asked:
        committed together at the turn's end (each loop touches its own list only)."""

    def read(self, fn: Callable[[sqlite3.Connection], T]) -> asyncio.Future[T]:
        """`fn(connection)` on the worker thread (or inline), outside any explicit
        transaction. Inline, `fn` runs a second time, on the thread, when the file was
        locked or it ran past its budget: it must not change anything but the database."""
        return self._submit(False, fn)

    def write(self, fn: Callable[[sqlite3.Connection], T]) -> asyncio.Future[T]:
        """`fn(connection)` on the worker thread in a ``BEGIN IMMEDIATE`` transaction,
        committed before the result is given if it returns, rolled back if it raises.

        Writes queued together share the transaction; if another of them raises, `fn`
        runs again after its first run was rolled back (and inline, it runs again on the
        thread when the file was locked or it ran past its budget), so whatever it does
        besides its SQL must be safe to do more than once."""
        return self._submit(True, fn)

    def _submit(self, writes: bool, fn: Callable[[sqlite3.Connection], T]) -> asyncio.Future[T]:
        loop = asyncio.get_running_loop()
        job = _Job(writes, fn, loop.create_future())
        if not self._inline or self._closed or self._pid != os.getpid():
            self._put(job)
        elif writes:
            self._write_soon(loop, job)
        elif not self._state.read_here(job):
            self._put(job)
        return job.future

    def _write_soon(self, loop: asyncio.AbstractEventLoop, job: _Job) -> None:
        """Commit the write inline at the end of this turn of the loop, with the others
        asked for in it (one transaction, as the thread commits a batch)."""
        due = self._due.get(loop)
        if due is None:
            due = self._due[loop] = (self._pid, [])  # checked by _submit
            loop.call_soon(self._write_due, loop)
        due[1].append(job)

    def _write_due(self, loop: asyncio.AbstractEventLoop) -> None:
        """Commit this loop's due writes inline; queue them for the thread when they may
        not run inline (`_WorkerState.write_here`)."""
        pid, jobs = self._due.pop(loop, (0, []))
        if not jobs:
            return
        if pid != os.getpid():  # a forked child's copy: the parent commits them
            _fail(jobs, RuntimeError(f"{_FORKED}: {self.path}"))
            return
        state = self._state
        if state.write_here(jobs):
            if state.checkpoint_due(len(jobs)):
                with contextlib.suppress(RuntimeError):  # closed meanwhile: no need
                    self._put(_Job(False, state.checkpoint, loop.create_future()))
            return
        for job in jobs:
            try:
                self._put(job)
            except RuntimeError as error:  # closed by another thread meanwhile
                _fail([job], error)

    async def aclose(self) -> None:
        """Close the connection and end the thread, after the work asked for so far."""
        self._write_due(asyncio.get_running_loop())
        with self._lock:
            state = None if self._closed or self._pid != os.getpid() else self._state
            self._closed = True
        if state is None or state.thread is None:
            self.close()
            return
        ended: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if state.submit(_Stop(ended)):  # closed above: nothing is queued after it
            await ended

    def close(self) -> None:
        """Close without awaiting: the worker finishes queued work, then closes. Work
        asked for afterwards raises RuntimeError."""
        loop = _running_loop()
        if loop is not None:
            self._write_due(loop)
        with self._lock:
            self._closed = True
            state = self._state if self._pid == os.getpid() else None
        if state is not None:
            _WorkerState.stop(state)

    def _put(self, job: _Job) -> None:
        """Queue a job for this process's thread (started if need be); under the lock, so
        that no job is queued after the stop that `close` queues."""
        with self._lock:
            if self._closed:
                raise RuntimeError(f"The SQLite file's worker is closed: {self.path}")
            if self._pid != os.getpid():
                self._start_over_after_fork()
            if not self._state.submit(job):
                raise RuntimeError(_STOPPED.format(self.path))

    def _opener(self) -> Callable[[], sqlite3.Connection]:
        """What opens the connection, without a reference to the worker (the thread holds
        it, and must not keep the worker alive)."""
        return functools.partial(
            _open_connection, self.path, self._busy_timeout, self._connect, self._setup
        )

    def _inline_opener(self) -> Callable[[], sqlite3.Connection] | None:
        """What opens the connection that jobs run on inline (None without `inline`)."""
        if not self._inline:
            return None
        return functools.partial(_open_inline_connection, self.path, self._connect)

    def _start_over_after_fork(self) -> None:
        self._finalizer.detach()
        self._inherited.append(self._state)  # kept, never closed: the parent's connection
        self._state = _WorkerState(self._opener(), self._inline_opener())
        self._pid = os.getpid()
        self._finalizer = weakref.finalize(self, _WorkerState.stop, self._state)

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
_STOPPED = "The SQLite file's worker has stopped: {}"
_FORKED = "a SQLite write asked for before this process forked is the parent's to commit"


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


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


def _open_connection(
    path: str,
    busy_timeout: float,
    connect: Connect,
    setup: Callable[[sqlite3.Connection], None],
) -> sqlite3.Connection:
    """The connection, set up; a file SQLite cannot use is an error naming it."""
    try:
        connection: sqlite3.Connection = connect(path, timeout=busy_timeout, isolation_level=None)
    except sqlite3.Error as error:
        raise sqlite3.OperationalError(f"SQLite file {path}: {error}") from error
    try:
        connection.execute(f"PRAGMA busy_timeout={int(busy_timeout * 1000)}")
        _use_wal(connection, busy_timeout)
        connection.execute("PRAGMA synchronous=NORMAL")
        setup(connection)
    except sqlite3.Error as error:
        connection.close()
        raise type(error)(f"SQLite file {path}: {error}") from error
    except BaseException:
        connection.close()
        raise
    return connection


def _open_inline_connection(path: str, connect: Connect) -> sqlite3.Connection:
    """The connection for inline jobs, opened by the worker thread once the file is set up
    (WAL mode, schema): it never waits for a lock (a job that would goes to the worker) and
    never checkpoints the WAL on commit (a checkpoint syncs the disk; the worker runs one
    every `_CHECKPOINT_EVERY` inline writes, `_WorkerState.checkpoint`)."""
    connection: sqlite3.Connection = connect(
        path, timeout=0, isolation_level=None, check_same_thread=False
    )
    try:
        connection.execute("PRAGMA synchronous=NORMAL")
        connection.execute("PRAGMA wal_autocheckpoint=0")
    except BaseException:
        connection.close()
        raise
    return connection


_CHECKPOINT_EVERY = 100
"""Inline writes between two WAL checkpoints on the worker thread (SQLite's own automatic
checkpoint comes after about 1,000 pages; a small write is a few pages)."""


_INLINE_BUDGET = 0.001
"""Seconds of SQL an inline job may run (a batch of writes: this much per write): one
that runs longer is interrupted (its work rolled back) and runs again on the thread, as
do the next `_AFTER_SLOW` jobs (a large scope makes every retrieve slow). Wall time, as
the loop sees it."""

_AFTER_SLOW = 50

_PROGRESS_STEPS = 1_000
"""SQLite instructions between two checks of the inline budget (about 20 µs): a store or
a plain retrieve ends before the first check."""


class _Deadline:
    """The inline connection's progress handler: interrupts the job once `at` (a
    `time.perf_counter` reading) has passed."""

    __slots__ = ("at", "fired")

    def __init__(self) -> None:
        self.at = math.inf
        self.fired = False
        """Whether it interrupted the job since `start`."""

    def __call__(self) -> bool:
        if time.perf_counter() <= self.at:
            return False
        self.fired = True
        return True

    def start(self, jobs: int) -> None:
        """Allow `jobs` budgets from now."""
        self.at = time.perf_counter() + _INLINE_BUDGET * jobs
        self.fired = False

    def off(self) -> None:
        """Interrupt nothing (a COMMIT interrupted at its end has committed, yet reports
        the interruption: it must never be)."""
        self.at = math.inf


class _GiveWay(Exception):
    """An inline job found the file locked, or ran past its budget: it was rolled back
    and runs again on the thread."""


def _gives_way(error: BaseException) -> bool:
    """Whether SQLite refused because another connection holds a lock (SQLITE_BUSY or
    SQLITE_LOCKED), or interrupted a job past its inline budget (SQLITE_INTERRUPT)."""
    code = getattr(error, "sqlite_errorcode", None)
    if not isinstance(error, sqlite3.OperationalError) or code is None:
        return False
    return code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED, sqlite3.SQLITE_INTERRUPT)


def _read_inline(connection: sqlite3.Connection, job: _Job, deadline: _Deadline) -> bool:
    """The read on the inline connection, its outcome set on its future; False (nothing
    changed) when it must run on the thread instead (`_gives_way`)."""
    deadline.start(1)
    try:
        result = job.fn(connection)
    except BaseException as error:
        deadline.off()
        _roll_back(connection)  # a snapshot it opened
        if _gives_way(error):
            return False
        _fail([job], error)
        return True
    deadline.off()
    _settle([(job.future, True, result)])
    return True


def _write_inline(connection: sqlite3.Connection, jobs: list[_Job], deadline: _Deadline) -> bool:
    """The writes in one transaction on the inline connection, their outcomes set on their
    futures; False (nothing changed) when they must run on the thread instead."""
    wanted = [job for job in jobs if not job.future.cancelled()]
    if not wanted:
        return True
    deadline.start(len(wanted))
    try:
        outcomes = _in_transaction(connection, wanted, deadline)
    except _GiveWay:
        return False
    except BaseException as error:  # raised by a lone write: its caller hears of it
        _fail(wanted, error)
        return True
    _settle(outcomes)
    return True


def _fail(jobs: list[_Job], error: BaseException) -> None:
    """Give `error` to the jobs' callers; raise it on if it ends the program (Ctrl-C)."""
    _settle([(job.future, False, error) for job in jobs])
    if isinstance(error, (KeyboardInterrupt, SystemExit)):
        raise error


def _in_transaction(
    connection: sqlite3.Connection, jobs: list[_Job], deadline: _Deadline | None = None
) -> list[Outcome]:
    """The jobs' functions in one ``BEGIN IMMEDIATE`` transaction (see
    `_all_or_each_alone`); a failed BEGIN or COMMIT fails them all. Inline (with the
    connection's `deadline`, switched off before the COMMIT or ROLLBACK), an error that
    `_gives_way` rolls the whole transaction back and raises `_GiveWay`."""
    try:
        connection.execute("BEGIN IMMEDIATE")
        outcomes = _all_or_each_alone(connection, jobs)
        if deadline is not None:
            if any(not ok and _gives_way(value) for _, ok, value in outcomes):
                raise _GiveWay
            deadline.off()
        connection.execute("COMMIT")
    except BaseException as error:
        if deadline is not None:
            deadline.off()
        _roll_back(connection)
        if deadline is not None and (isinstance(error, _GiveWay) or _gives_way(error)):
            raise _GiveWay from error
        if not isinstance(error, Exception):
            raise
        return [(job.future, False, error) for job in jobs]
    return outcomes


def _roll_back(connection: sqlite3.Connection) -> None:
    """End the connection's transaction, if any (a broken connection: the error that broke
    it says why, not this)."""
    with contextlib.suppress(sqlite3.Error):
        if connection.in_transaction:
            connection.execute("ROLLBACK")


@contextlib.contextmanager
def read_snapshot(connection: sqlite3.Connection) -> Iterator[None]:
    """One read transaction: every statement inside sees the same committed state."""
    connection.execute("BEGIN")
    try:
        yield
    finally:
        if connection.in_transaction:  # an error inside may have ended it already
            connection.execute("COMMIT")


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


Outcome = tuple["asyncio.Future[Any]", bool, Any]
"""A job's future, whether its function returned, and what it returned or raised."""


class _Job(NamedTuple):
    """A function of the connection to run, and the future waiting for its outcome."""

    writes: bool
    fn: Callable[[sqlite3.Connection], Any]
    future: asyncio.Future[Any]


class _Stop(NamedTuple):
    """Close the connection and end the thread; `ended` (if any) is resolved then. Nothing
    is queued after it: the worker queues it under the lock that guards queueing."""

    ended: asyncio.Future[None] | None


_ANSWER_WITHIN = 0.002
"""Answers are handed back once per batch, but none waits longer than this for the rest
of the batch, and all are handed back before a write (which may wait for another
process's lock)."""


class _Answers:
    """The outcomes of a batch not yet handed back, and since when the oldest waits."""

    __slots__ = ("oldest", "ready")

    def __init__(self) -> None:
        self.ready: list[Outcome] = []
        self.oldest = 0.0

    def send(self) -> None:
        _hand_back(self.ready)
        self.ready = []
        self.oldest = 0.0

    def send_if_waiting(self) -> None:
        """Hand back now if the oldest answer has waited long enough."""
        if not self.ready:
            return
        now = time.monotonic()
        if not self.oldest:
            self.oldest = now
        elif now - self.oldest > _ANSWER_WITHIN:
            self.send()


class _WorkerState:
    """What the worker thread owns (the job queue, the connection); kept apart from the
    worker so that the worker can be garbage-collected while its thread runs."""

    __slots__ = (
        "__weakref__",
        "checkpoint_queued",
        "connection",
        "deadline",
        "inline",
        "inline_lock",
        "inline_writes",
        "jobs",
        "lock",
        "open",
        "open_inline",
        "slow_left",
        "stopped",
        "thread",
    )

    def __init__(
        self,
        open_connection: Callable[[], sqlite3.Connection],
        open_inline: Callable[[], sqlite3.Connection] | None = None,
    ) -> None:
        self.open = open_connection
        self.open_inline = open_inline
        self.jobs: queue.SimpleQueue[_Job | _Stop] = queue.SimpleQueue()
        self.connection: sqlite3.Connection | None = None
        self.inline: sqlite3.Connection | None = None
        """The connection inline jobs run on, opened by the thread with its own."""
        self.thread: threading.Thread | None = None
        self.lock = threading.Lock()
        self.inline_lock = threading.Lock()
        """Held while a job runs on the inline connection, and while it is opened or
        closed."""
        self.inline_writes = 0
        self.checkpoint_queued = False
        self.deadline = _Deadline()
        self.slow_left = 0
        """Jobs still to queue for the thread since an inline job ran past its budget."""
        self.stopped = False
        """Set by the thread as it ends: nothing is queued after that."""

    def read_here(self, job: _Job) -> bool:
        """Run a read now on the caller's thread; False when it must be queued instead
        (see `_inline`)."""
        return self._inline(_read_inline, job)

    def write_here(self, jobs: list[_Job]) -> bool:
        """Commit writes now on the caller's thread, in one transaction; False when they
        must be queued instead (see `_inline`), and while a checkpoint is queued: they
        wait behind it on the thread, or it would rarely find a moment without a write."""
        return not self.checkpoint_queued and self._inline(_write_inline, jobs)

    def _inline(self, run: Callable[[sqlite3.Connection, Any, _Deadline], bool], work: Any) -> bool:
        """`run(connection, work)` on the inline connection, unless it is not open or in
        use (by another thread's loop), or a job ran past its budget lately: False then,
        and when `run` gave way (see `_gives_way`)."""
        if self.slow_left:  # the last inline job ran past its budget
            self.slow_left -= 1
            return False
        if not self.inline_lock.acquire(blocking=False):
            return False
        try:
            connection = self.inline
            if connection is None or self.stopped:
                return False
            if run(connection, work, self.deadline):
                return True
            if self.deadline.fired:
                self.slow_left = _AFTER_SLOW
            return False
        finally:
            self.inline_lock.release()

    def checkpoint_due(self, writes: int) -> bool:
        """Count inline writes; True once every `_CHECKPOINT_EVERY`, unless the last
        checkpoint asked for has not run yet."""
        self.inline_writes += writes
        if self.inline_writes < _CHECKPOINT_EVERY or self.checkpoint_queued:
            return False
        self.inline_writes = 0
        self.checkpoint_queued = True
        return True

    def checkpoint(self, connection: sqlite3.Connection) -> None:
        """Copy what the WAL holds into the database file and start the WAL over, if no
        connection is writing or reading an older snapshot right now; else copy what it
        can (as a PASSIVE checkpoint would, which alone never catches up with inline
        writes: the WAL, and every read, would grow). It waits for nobody: a checkpoint
        that waited for another process's reader would hold every writer back meanwhile.
        Inline writes wait behind it on the thread until it is done (`write_here`): one
        that began while it ran would make it give up."""
        try:
            with contextlib.suppress(sqlite3.Error):
                (waits,) = connection.execute("PRAGMA busy_timeout").fetchone()
                connection.execute("PRAGMA busy_timeout=0")
                try:
                    connection.execute("PRAGMA wal_checkpoint(RESTART)").fetchall()
                finally:
                    connection.execute(f"PRAGMA busy_timeout={int(waits)}")
        finally:
            self.checkpoint_queued = False

    def submit(self, job: _Job | _Stop) -> bool:
        """Queue `job` (starting the thread if need be); False when the thread has ended
        (a stop at exit, say), which then never sees the job."""
        with self.lock:
            if self.stopped:
                return False
            if self.thread is None:
                self.thread = threading.Thread(
                    target=self._serve,
                    name=f"agentensemble-sqlite_{next(_THREAD_NUMBERS)}",
                    daemon=True,
                )
                _AT_EXIT.watch(self)
                self.thread.start()
            self.jobs.put(job)
            return True

    @staticmethod
    def stop(state: _WorkerState) -> None:
        """Finish the queued work, close the connection and end the thread (the worker was
        closed or collected, or the process is exiting). Only a queue put: safe in a
        finalizer, whatever thread the collector interrupted."""
        if state.thread is not None:
            state.jobs.put(_Stop(None))

    def _serve(self) -> None:
        left: list[_Job | _Stop] = []
        try:
            while not left:
                left = self._serve_one_batch()
        finally:
            self._end(left)

    def _serve_one_batch(self) -> list[_Job | _Stop]:
        """Wait for work and do all that is queued; once told to stop, what is left of the
        batch, the stop first (else []). (Its own frame: the batch's jobs, closures over
        their store, must not stay referenced while the thread waits, or a dropped store
        would never be collected.)"""
        batch = [self.jobs.get()]
        with contextlib.suppress(queue.Empty):
            while True:
                batch.append(self.jobs.get_nowait())
        try:
            return self._run(batch)
        except Exception as error:  # a defect here must not leave a caller waiting
            _hand_back([(job.future, False, error) for job in batch if isinstance(job, _Job)])
            return []

    def _end(self, left: list[_Job | _Stop]) -> None:
        """The thread is ending (told to stop, or failed): nothing more is queued, the
        connection is closed, then the stops left and queued are answered and the work
        refused."""
        with self.lock:
            self.stopped = True
        with contextlib.suppress(Exception):
            self._close_connection()
        with contextlib.suppress(queue.Empty):
            while True:
                left.append(self.jobs.get_nowait())
        refused = RuntimeError("The SQLite file's worker has stopped")
        answers: list[Outcome] = []
        for job in left:
            if isinstance(job, _Job):
                answers.append((job.future, False, refused))
            elif job.ended is not None:
                answers.append((job.ended, True, None))
        _hand_back(answers)

    def _run(self, batch: list[_Job | _Stop]) -> list[_Job | _Stop]:
        """Do a batch in order, consecutive writes in one transaction; at a stop, what is
        left of the batch, the stop first (else [])."""
        answers = _Answers()
        position = 0
        while position < len(batch):
            job = batch[position]
            if isinstance(job, _Stop):
                answers.send()
                return batch[position:]
            if job.writes:
                answers.send()  # a write may wait up to busy_timeout for another process
                group = [job]
                for later in batch[position + 1 :]:
                    if not isinstance(later, _Job) or not later.writes:
                        break
                    group.append(later)
                self._write(group, answers.ready)
                position += len(group)
            else:
                self._read(job, answers.ready)
                position += 1
            answers.send_if_waiting()
        answers.send()
        return []

    def _read(self, job: _Job, outcomes: list[Outcome]) -> None:
        if job.future.cancelled():  # cancelled while queued: it does not run
            return
        try:
            result = job.fn(self._connection())
        except BaseException as error:
            outcomes.append((job.future, False, error))
        else:
            outcomes.append((job.future, True, result))

    def _write(self, group: list[_Job], outcomes: list[Outcome]) -> None:
        """Writes in one transaction. A failed BEGIN or COMMIT fails them all."""
        wanted = [job for job in group if not job.future.cancelled()]
        if not wanted:
            return
        try:
            done = _in_transaction(self._connection(), wanted)
        except BaseException as error:  # opening the file failed
            done = [(job.future, False, error) for job in wanted]
        outcomes.extend(done)

    def _connection(self) -> sqlite3.Connection:
        if self.connection is None:
            self.connection = self.open()
            if self.open_inline is not None:
                self._open_inline()
        return self.connection

    def _open_inline(self) -> None:
        """Open the inline connection; when it cannot be, jobs keep to the thread."""
        assert self.open_inline is not None
        try:
            inline = self.open_inline()
        except sqlite3.Error as error:
            logger.warning("SQLite jobs stay on the worker thread: %s", error)
            return
        inline.set_progress_handler(self.deadline, _PROGRESS_STEPS)
        with self.inline_lock:
            self.inline = inline

    def _close_connection(self) -> None:
        with self.inline_lock:  # not while an inline job uses it
            connections = (self.inline, self.connection)
            self.inline = self.connection = None
        for connection in connections:
            if connection is not None:
                connection.close()


def _all_or_each_alone(connection: sqlite3.Connection, jobs: list[_Job]) -> list[Outcome]:
    """The jobs' functions in the open transaction, each run once while none raises.
    When one raises, what they did is rolled back (to a savepoint before them all: the
    transaction, and so the file's write lock, is kept) and they run again, each in a
    savepoint of its own, so that only the one that raises is undone. A savepoint a job
    is two statements, each a GIL hand-over to a busy event loop and back: only a batch
    that fails pays them."""
    if len(jobs) == 1:
        return [(jobs[0].future, True, jobs[0].fn(connection))]
    connection.execute("SAVEPOINT batch")
    try:
        return [(job.future, True, job.fn(connection)) for job in jobs]
    except BaseException:
        if not connection.in_transaction:
            raise  # an error that ended the transaction (a full disk, say) fails them all
    connection.execute("ROLLBACK TO batch")
    return [_in_savepoint(connection, job) for job in jobs]


def _in_savepoint(connection: sqlite3.Connection, job: _Job) -> Outcome:
    """The job's function inside the open transaction, rolled back alone if it raises. An
    error that ended the whole transaction (a full disk) is raised: it fails the group."""
    connection.execute("SAVEPOINT job")
    try:
        result = job.fn(connection)
    except BaseException as error:
        if not connection.in_transaction:
            raise
        connection.execute("ROLLBACK TO job")
        connection.execute("RELEASE job")
        return (job.future, False, error)
    connection.execute("RELEASE job")
    return (job.future, True, result)


def _hand_back(outcomes: list[Outcome]) -> None:
    """Give each event loop its results in one call (a loop that has closed gets none)."""
    by_loop: dict[asyncio.AbstractEventLoop, list[Outcome]] = {}
    for outcome in outcomes:
        by_loop.setdefault(outcome[0].get_loop(), []).append(outcome)
    for loop, settled in by_loop.items():
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits
            loop.call_soon_threadsafe(_settle, settled)


def _settle(outcomes: list[Outcome]) -> None:
    """On the loop: resolve the futures (those cancelled meanwhile stay cancelled)."""
    for future, ok, value in outcomes:
        if future.done():
            continue
        if ok:
            future.set_result(value)
        elif isinstance(value, StopIteration):  # a future refuses it: it ends generators
            failure = RuntimeError(f"a SQLite job raised StopIteration: {value!r}")
            failure.__cause__ = value
            future.set_exception(failure)
        else:
            future.set_exception(value)


_THREAD_NUMBERS = itertools.count()


class _AtExit:
    """The worker threads are daemons (a store left open must not hold the process up):
    when it exits, each finishes the work it was asked for and closes its connection. The
    hook is registered with the process's first thread, not at import."""

    def __init__(self) -> None:
        self._registered = False  # a forked child inherits the registration too
        self._start_over()

    def _start_over(self) -> None:
        """Nothing watched (a new process, or a forked child, where the parent's lock may
        have been held by a thread that does not exist there)."""
        self._lock = threading.Lock()
        self._live: weakref.WeakSet[_WorkerState] = weakref.WeakSet()
        self._pid = os.getpid()

    def watch(self, state: _WorkerState) -> None:
        if self._pid != os.getpid():
            self._start_over()
        with self._lock:
            if not self._registered:
                atexit.register(self.finish)
                self._registered = True
            self._live.add(state)

    def finish(self) -> None:
        for state in list(self._live):
            thread = state.thread
            if thread is not None and thread.is_alive():  # a forked child's are not
                _WorkerState.stop(state)
                thread.join(timeout=self.WAIT)

    WAIT = 10.0
    """How long the exit waits for one worker to finish its queued work."""


_AT_EXIT = _AtExit()
