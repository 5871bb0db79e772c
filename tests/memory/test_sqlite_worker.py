"""The SQLite worker thread: work queued together, group commit, cancellation, exit."""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import sys
import textwrap
import threading
from collections.abc import Awaitable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from agentensemble.memory._sqlite_worker import SqliteWorker


def _numbers_table(connection: sqlite3.Connection) -> None:
    connection.execute("CREATE TABLE IF NOT EXISTS numbers (n INTEGER)")


def _insert(n: int) -> Any:
    def insert(connection: sqlite3.Connection) -> None:
        connection.execute("INSERT INTO numbers VALUES (?)", (n,))

    return insert


def _insert_then_fail(connection: sqlite3.Connection) -> None:
    connection.execute("INSERT INTO numbers VALUES (99)")
    raise ValueError("this write changes its mind")


def _numbers(connection: sqlite3.Connection) -> list[int]:
    return [n for (n,) in connection.execute("SELECT n FROM numbers ORDER BY n")]


@pytest.fixture
def worker(tmp_path: Path) -> Iterator[SqliteWorker]:
    made = SqliteWorker(tmp_path / "w.db", setup=_numbers_table)
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


async def test_writes_queued_together_share_one_transaction_and_a_failing_one_rolls_back_alone(
    worker: SqliteWorker,
) -> None:
    statements: list[str] = []
    release, held = _held(worker, statements)
    queued = [worker.write(_insert(1)), worker.write(_insert_then_fail), worker.write(_insert(3))]
    release.set()
    await held
    first, failed, third = await _outcomes(queued)
    assert first is None
    assert third is None
    assert isinstance(failed, ValueError)
    assert await worker.read(_numbers) == [1, 3]
    assert statements.count("BEGIN IMMEDIATE") == 1
    assert statements.count("COMMIT") == 1


async def test_a_write_that_cannot_begin_fails_with_every_write_queued_with_it(
    tmp_path: Path,
) -> None:
    path = tmp_path / "locked.db"
    worker = SqliteWorker(path, setup=_numbers_table, busy_timeout=0)
    try:
        await worker.read(_numbers)  # made, schema and all
        other = sqlite3.connect(path, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")  # another process holds the write lock
        try:
            release, held = _held(worker, [])
            queued = [worker.write(_insert(1)), worker.write(_insert(2))]
            release.set()
            await held
            outcomes = await _outcomes(queued)
        finally:
            other.execute("ROLLBACK")
            other.close()
        assert [type(outcome) for outcome in outcomes] == [sqlite3.OperationalError] * 2
        assert "locked" in str(outcomes[0])
        assert await worker.read(_numbers) == []
    finally:
        await worker.aclose()


async def test_work_cancelled_while_queued_does_not_run(worker: SqliteWorker) -> None:
    release, held = _held(worker, [])
    cancelled = worker.write(_insert(1))
    kept = worker.write(_insert(2))
    cancelled.cancel()
    release.set()
    await held
    await kept
    assert await worker.read(_numbers) == [2]


async def test_reads_and_writes_run_in_the_order_they_were_asked_for(
    worker: SqliteWorker,
) -> None:
    release, held = _held(worker, [])
    seen = [
        worker.read(_numbers),
        worker.write(_insert(1)),
        worker.read(_numbers),
        worker.write(_insert(2)),
        worker.write(_insert(3)),
        worker.read(_numbers),
    ]
    release.set()
    await held
    assert await _outcomes(seen) == [[], None, [1], None, None, [1, 2, 3]]


async def test_two_event_loops_share_a_worker(worker: SqliteWorker) -> None:
    def in_another_loop() -> list[int]:
        async def write_then_read() -> list[int]:
            await worker.write(_insert(7))
            return await worker.read(_numbers)

        return asyncio.run(write_then_read())

    await worker.write(_insert(1))
    assert await asyncio.to_thread(in_another_loop) == [1, 7]
    assert await worker.read(_numbers) == [1, 7]


def _sqlite_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name.startswith("agentensemble-sqlite_")}


async def test_a_collected_workers_thread_ends(tmp_path: Path) -> None:
    """The thread holds the worker's state, not the worker: the worker can be collected,
    and its finalizer (a queue put, safe on any thread) ends the thread."""
    import gc

    before = _sqlite_threads()
    collected = SqliteWorker(tmp_path / "c.db", setup=_numbers_table)
    await collected.write(_insert(1))
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
