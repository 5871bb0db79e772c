"""The SQLite worker thread: work queued together, group commit, cancellation, exit."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import subprocess
import sys
import textwrap
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from agentensemble.memory._sqlite_worker import SqliteWorker
from tests.memory.sqlite_jobs import (
    THREE_WRITES_THE_MIDDLE_ONE_FAILING,
    heads,
    insert_number,
    insert_then_fail,
    numbers,
    numbers_table,
)


@pytest.fixture
def worker(tmp_path: Path) -> Iterator[SqliteWorker]:
    made = SqliteWorker(tmp_path / "w.db", setup=numbers_table)
    yield made
    made.close()


async def _outcomes(futures: Sequence[Awaitable[Any]]) -> list[Any]:
    outcomes: list[Any] = []
    for future in futures:
        try:
            outcomes.append(await future)
        except Exception as error:
            outcomes.append(error)
    return outcomes


def _held(worker: SqliteWorker, statements: list[str]) -> tuple[threading.Event, Awaitable[Any]]:
    """Keep the worker thread busy until the event is set (so that work queues behind),
    recording the statements its connection runs from then on."""
    release = threading.Event()

    def hold(connection: sqlite3.Connection) -> None:
        connection.set_trace_callback(statements.append)
        assert release.wait(timeout=30), "the test never released the worker"

    return release, worker.read(hold)


@contextlib.contextmanager
def _write_lock_held_elsewhere(path: Path) -> Iterator[None]:
    """Another connection (as another process would) holds the file's write lock."""
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    try:
        yield
    finally:
        other.execute("ROLLBACK")
        other.close()


@contextlib.asynccontextmanager
async def _opened_worker(path: Path, busy_timeout: float) -> AsyncIterator[SqliteWorker]:
    """A worker on `path` whose file is made (schema and all), closed afterwards."""
    worker = SqliteWorker(path, setup=numbers_table, busy_timeout=busy_timeout)
    try:
        await worker.read(numbers)
        yield worker
    finally:
        await worker.aclose()


async def test_writes_queued_together_share_one_transaction_and_a_failing_one_rolls_back_alone(
    worker: SqliteWorker,
) -> None:
    statements: list[str] = []
    release, held = _held(worker, statements)
    queued = [
        worker.write(insert_number(1)),
        worker.write(insert_then_fail),
        worker.write(insert_number(3)),
    ]
    release.set()
    await held
    first, failed, third = await _outcomes(queued)
    assert first is None
    assert third is None
    assert isinstance(failed, ValueError)
    assert heads(statements) == THREE_WRITES_THE_MIDDLE_ONE_FAILING
    assert await worker.read(numbers) == [1, 3]


async def test_writes_queued_together_that_all_succeed_run_once_without_a_savepoint_each(
    worker: SqliteWorker,
) -> None:
    statements: list[str] = []
    runs: list[int] = []

    def insert(number: int) -> Callable[[sqlite3.Connection], None]:
        def run(connection: sqlite3.Connection) -> None:
            runs.append(number)
            insert_number(number)(connection)

        return run

    release, held = _held(worker, statements)
    queued = [worker.write(insert(number)) for number in (1, 2, 3)]
    release.set()
    await held
    assert await _outcomes(queued) == [None, None, None]
    assert runs == [1, 2, 3]
    assert heads(statements) == [
        "BEGIN IMMEDIATE",
        "SAVEPOINT batch",
        *(["INSERT INTO numbers VALUES"] * 3),
        "COMMIT",
    ]
    assert await worker.read(numbers) == [1, 2, 3]


async def test_a_write_that_cannot_begin_fails_with_every_write_queued_with_it(
    tmp_path: Path,
) -> None:
    path = tmp_path / "locked.db"
    async with _opened_worker(path, busy_timeout=0) as worker:
        with _write_lock_held_elsewhere(path):
            release, held = _held(worker, [])
            queued = [worker.write(insert_number(1)), worker.write(insert_number(2))]
            release.set()
            await held
            outcomes = await _outcomes(queued)
        assert [type(outcome) for outcome in outcomes] == [sqlite3.OperationalError] * 2
        assert "locked" in str(outcomes[0])
        assert await worker.read(numbers) == []


async def test_work_cancelled_while_queued_does_not_run(worker: SqliteWorker) -> None:
    release, held = _held(worker, [])
    cancelled = worker.write(insert_number(1))
    kept = worker.write(insert_number(2))
    cancelled.cancel()
    release.set()
    await held
    await kept
    assert await worker.read(numbers) == [2]


async def test_reads_and_writes_run_in_the_order_they_were_asked_for(
    worker: SqliteWorker,
) -> None:
    release, held = _held(worker, [])
    seen: list[asyncio.Future[Any]] = [
        worker.read(numbers),
        worker.write(insert_number(1)),
        worker.read(numbers),
        worker.write(insert_number(2)),
        worker.write(insert_number(3)),
        worker.read(numbers),
    ]
    release.set()
    await held
    assert await _outcomes(seen) == [[], None, [1], None, None, [1, 2, 3]]


async def test_two_event_loops_share_a_worker(worker: SqliteWorker) -> None:
    def in_another_loop() -> list[int]:
        async def write_then_read() -> list[int]:
            await worker.write(insert_number(7))
            return await worker.read(numbers)

        return asyncio.run(write_then_read())

    await worker.write(insert_number(1))
    assert await asyncio.to_thread(in_another_loop) == [1, 7]
    assert await worker.read(numbers) == [1, 7]


def _sqlite_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name.startswith("agentensemble-sqlite_")}


async def test_a_collected_workers_thread_ends(tmp_path: Path) -> None:
    """The thread holds the worker's state, not the worker: the worker can be collected,
    and its finalizer (a queue put, safe on any thread) ends the thread."""
    import gc

    before = _sqlite_threads()
    collected = SqliteWorker(tmp_path / "c.db", setup=numbers_table)
    await collected.write(insert_number(1))
    [started] = _sqlite_threads() - before
    del collected
    gc.collect()
    started.join(timeout=30)
    assert not started.is_alive()


def test_work_queued_when_the_process_exits_is_committed(tmp_path: Path) -> None:
    """The thread is a daemon (an open store must not hold the process up), so the exit
    finishes what it was asked to do first."""
    path = tmp_path / "exit.db"
    script = textwrap.dedent(
        f"""
        import asyncio, sqlite3, threading
        from agentensemble.memory._sqlite_worker import SqliteWorker

        def table(connection):
            connection.execute("CREATE TABLE IF NOT EXISTS numbers (n INTEGER)")

        def insert(n):
            return lambda connection: connection.execute("INSERT INTO numbers VALUES (?)", (n,))

        WORKER = SqliteWorker({str(path)!r}, setup=table)
        release = threading.Event()

        async def main():
            WORKER.read(lambda connection: release.wait(timeout=30))
            for n in range(50):
                WORKER.write(insert(n))  # queued behind the read, never awaited
            release.set()

        asyncio.run(main())
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    with sqlite3.connect(path) as connection:
        assert connection.execute("SELECT count(*) FROM numbers").fetchone() == (50,)


async def test_a_dropped_stores_thread_ends(tmp_path: Path) -> None:
    """The thread does not keep its last jobs (closures over their store) while it waits."""
    import gc
    import weakref

    from agentensemble.memory import MemoryEntry
    from agentensemble.memory._sqlite import SqliteMemoryStore

    before = _sqlite_threads()
    store = SqliteMemoryStore(tmp_path / "m.db")
    await store.store("notes", MemoryEntry("hello world"))
    await store.retrieve("notes", "hello", 3)
    [started] = _sqlite_threads() - before
    dropped = weakref.ref(store)
    del store
    gc.collect()
    assert dropped() is None
    started.join(timeout=30)
    assert not started.is_alive()


def _next_row(connection: sqlite3.Connection) -> Any:
    return next(iter(connection.execute("SELECT n FROM numbers")))  # none: StopIteration


async def test_a_job_raising_stop_iteration_fails_alone(worker: SqliteWorker) -> None:
    """A future cannot take StopIteration: it comes as a RuntimeError, and the answers
    handed back with it still arrive."""
    release, held = _held(worker, [])
    queued = [worker.read(_next_row), worker.write(insert_number(1)), worker.read(numbers)]
    release.set()
    await held
    failed, written, read = await _outcomes(queued)
    assert isinstance(failed, RuntimeError)
    assert isinstance(failed.__cause__, StopIteration)
    assert written is None
    assert read == [1]


async def test_a_read_is_answered_before_a_write_waiting_for_another_process(
    tmp_path: Path,
) -> None:
    path = tmp_path / "busy.db"
    async with _opened_worker(path, busy_timeout=30) as worker:
        with _write_lock_held_elsewhere(path):  # the write below waits for it
            release, held = _held(worker, [])
            read = worker.read(numbers)
            write = worker.write(insert_number(1))
            release.set()
            await held
            assert await read == []
            assert not write.done()  # still waiting for the lock: the read did not wait
        await write
        assert await worker.read(numbers) == [1]


def _close_the_connection(connection: sqlite3.Connection) -> None:
    connection.close()
    raise ValueError("closed it")


async def test_a_job_that_breaks_the_connection_leaves_no_caller_waiting(
    worker: SqliteWorker,
) -> None:
    release, held = _held(worker, [])
    queued: list[asyncio.Future[Any]] = [
        worker.write(_close_the_connection),
        worker.read(numbers),
    ]
    release.set()
    await held
    broken, after = await _outcomes(queued)
    assert isinstance(broken, ValueError)
    assert isinstance(after, sqlite3.ProgrammingError)  # answered, not left waiting
    with pytest.raises(sqlite3.ProgrammingError):
        await worker.read(numbers)


def test_an_exit_hook_that_closes_the_store_does_not_hang_the_exit(tmp_path: Path) -> None:
    """Exit hooks run last registered first: one registered before the store's first use
    runs after the worker's own hook has ended the thread."""
    script = textwrap.dedent(
        f"""
        import asyncio, atexit
        from agentensemble.memory import MemoryEntry
        from agentensemble.memory._sqlite import SqliteMemoryStore

        store = SqliteMemoryStore({str(tmp_path / "m.db")!r})
        atexit.register(lambda: asyncio.run(store.aclose()))

        async def main():
            await store.store("s", MemoryEntry("hello"))

        asyncio.run(main())
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr


def _when_written_twice(worker: SqliteWorker) -> asyncio.Event:
    """An event set once two writes have been queued on `worker`."""
    queued: list[object] = []
    both = asyncio.Event()
    write = worker.write

    def counted(fn: Any) -> Any:
        queued.append(fn)
        if len(queued) == 2:
            both.set()
        return write(fn)

    worker.write = counted  # type: ignore[method-assign]
    return both


async def test_a_vector_cache_is_reloaded_after_its_eviction_rolled_back(
    tmp_path: Path,
) -> None:
    """An eviction that shares its transaction with a write that fills the disk is rolled
    back with it, after it changed the index's cache: the cache must not look current."""
    from agentensemble.memory import EvictionPolicy, MemoryEntry
    from agentensemble.memory._vector_indexes import SqliteVectorIndex

    path = tmp_path / "v.db"
    index = SqliteVectorIndex(path)
    other = SqliteVectorIndex(path)
    try:
        for number, name in enumerate("abcde"):
            await index.add("s", MemoryEntry(name), [1.0, float(number)])
        assert len(await index.search("s", [1.0, 0.0], 10)) == 5  # cached
        worker = index._worker
        pages = await worker.read(lambda c: c.execute("PRAGMA page_count").fetchone()[0])
        await worker.read(lambda c: c.execute(f"PRAGMA max_page_count={pages + 2}"))
        release, held = _held(worker, [])
        both_queued = _when_written_twice(worker)
        evicted = asyncio.ensure_future(index.evict("s", EvictionPolicy.keep_last_entries(2)))
        too_big = asyncio.ensure_future(index.add("s", MemoryEntry("x" * 200_000), [1.0, 9.0]))
        await both_queued.wait()  # both behind the held worker: they share a transaction
        release.set()
        await held
        outcomes = await _outcomes([evicted, too_big])
        assert [type(outcome) for outcome in outcomes] == [sqlite3.OperationalError] * 2
        await worker.read(lambda c: c.execute("PRAGMA max_page_count=1073741823"))
        assert await index.evict("s", EvictionPolicy.keep_last_entries(4)) == 1
        found = sorted(entry.content for entry in await index.search("s", [1.0, 0.0], 10))
        assert found == ["b", "c", "d", "e"]
        assert found == sorted(e.content for e in await other.search("s", [1.0, 0.0], 10))
    finally:
        await index.aclose()
        await other.aclose()
