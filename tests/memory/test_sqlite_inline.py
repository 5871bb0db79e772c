"""The SQLite worker's inline jobs: run on the event loop's thread while nothing makes them
wait, on the worker thread when the file is locked or a job runs past its budget."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from agentensemble.errors import ValidationError
from agentensemble.memory import MemoryStore
from agentensemble.memory._sqlite_worker import SqliteWorker

Job = Callable[[sqlite3.Connection], Any]


def _numbers_table(connection: sqlite3.Connection) -> None:
    connection.execute("CREATE TABLE IF NOT EXISTS numbers (n INTEGER)")


def _numbers(connection: sqlite3.Connection) -> list[int]:
    return [n for (n,) in connection.execute("SELECT n FROM numbers ORDER BY n")]


def _recorded(threads: list[str], job: Job) -> Job:
    """`job`, noting the name of the thread each run of it runs on."""

    def run(connection: sqlite3.Connection) -> Any:
        threads.append(threading.current_thread().name)
        return job(connection)

    return run


def _insert(n: int) -> Job:
    def insert(connection: sqlite3.Connection) -> None:
        connection.execute("INSERT INTO numbers VALUES (?)", (n,))

    return insert


def _count_to(limit: int) -> Callable[[sqlite3.Connection], int]:
    """A query that runs far longer than an inline job may (hundreds of milliseconds)."""

    def count(connection: sqlite3.Connection) -> int:
        (total,) = connection.execute(
            "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < ?)"
            " SELECT count(*) FROM c",
            (limit,),
        ).fetchone()
        return int(total)

    return count


async def _next_turn() -> None:
    """Let the loop run what was scheduled so far (the inline writes' commit among it)."""
    turned = asyncio.get_running_loop().create_future()
    asyncio.get_running_loop().call_soon(turned.set_result, None)
    await turned


@pytest.fixture
async def worker(tmp_path: Path) -> AsyncIterator[SqliteWorker]:
    """An inline worker whose file is open (the first job opens it, on the thread)."""
    made = SqliteWorker(tmp_path / "w.db", setup=_numbers_table, inline=True)
    await made.read(_numbers)
    yield made
    await made.aclose()


LOOP_THREAD = threading.current_thread().name


async def test_the_first_job_opens_the_file_on_the_thread_and_later_ones_run_inline(
    tmp_path: Path,
) -> None:
    worker = SqliteWorker(tmp_path / "w.db", setup=_numbers_table, inline=True)
    threads: list[str] = []
    try:
        assert await worker.read(_recorded(threads, _numbers)) == []
        await worker.write(_recorded(threads, _insert(1)))
        assert await worker.read(_recorded(threads, _numbers)) == [1]
    finally:
        await worker.aclose()
    assert threads[0].startswith("agentensemble-sqlite_")
    assert threads[1:] == [LOOP_THREAD, LOOP_THREAD]


async def test_a_worker_without_inline_runs_every_job_on_its_thread(tmp_path: Path) -> None:
    worker = SqliteWorker(tmp_path / "w.db", setup=_numbers_table)
    threads: list[str] = []
    try:
        for _ in range(3):
            await worker.read(_recorded(threads, _numbers))
    finally:
        await worker.aclose()
    assert len(threads) == 3
    assert all(name.startswith("agentensemble-sqlite_") for name in threads)


async def test_an_inline_read_is_answered_at_once(worker: SqliteWorker) -> None:
    read = worker.read(_numbers)
    assert read.done()
    assert read.result() == []


async def test_writes_asked_for_in_one_turn_commit_together_and_a_failing_one_alone(
    worker: SqliteWorker,
) -> None:
    statements: list[str] = []
    await worker.read(lambda connection: connection.set_trace_callback(statements.append))

    def insert_then_fail(connection: sqlite3.Connection) -> None:
        connection.execute("INSERT INTO numbers VALUES (99)")
        raise ValueError("this write changes its mind")

    writes = [worker.write(_insert(1)), worker.write(insert_then_fail), worker.write(_insert(3))]
    assert not any(write.done() for write in writes)  # committed at the end of the turn
    await _next_turn()
    assert writes[0].result() is None
    assert isinstance(writes[1].exception(), ValueError)
    assert writes[2].result() is None
    assert [statement.split(" (")[0] for statement in statements] == [
        "BEGIN IMMEDIATE",
        "SAVEPOINT batch",
        "INSERT INTO numbers VALUES",
        "INSERT INTO numbers VALUES",
        "ROLLBACK TO batch",
        *("SAVEPOINT job", "INSERT INTO numbers VALUES", "RELEASE job"),
        *("SAVEPOINT job", "INSERT INTO numbers VALUES", "ROLLBACK TO job", "RELEASE job"),
        *("SAVEPOINT job", "INSERT INTO numbers VALUES", "RELEASE job"),
        "COMMIT",
    ]
    assert await worker.read(_numbers) == [1, 3]


async def test_a_write_the_file_refuses_inline_waits_for_the_lock_on_the_thread(
    worker: SqliteWorker, tmp_path: Path
) -> None:
    threads: list[str] = []
    other = sqlite3.connect(tmp_path / "w.db", isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")  # as another process would
        write = worker.write(_recorded(threads, _insert(1)))
        await _next_turn()
        assert not write.done()  # waiting on the thread, not holding the loop up
        assert await worker.read(_numbers) == []  # reads go on meanwhile (WAL)
        other.execute("COMMIT")
        await write
    finally:
        other.close()
    assert await worker.read(_numbers) == [1]
    assert len(threads) == 1
    assert threads[0].startswith("agentensemble-sqlite_")


async def test_a_read_past_its_budget_is_interrupted_and_answered_from_the_thread(
    worker: SqliteWorker,
) -> None:
    threads: list[str] = []
    assert await worker.read(_recorded(threads, _count_to(3_000_000))) == 3_000_000
    assert threads[0] == LOOP_THREAD  # started inline, interrupted
    assert threads[1].startswith("agentensemble-sqlite_")
    await worker.read(_recorded(threads, _numbers))  # the next jobs go to the thread too
    assert threads[2].startswith("agentensemble-sqlite_")


async def test_a_write_past_its_budget_is_rolled_back_and_committed_once_from_the_thread(
    worker: SqliteWorker,
) -> None:
    threads: list[str] = []

    def insert_then_count(connection: sqlite3.Connection) -> int:
        _insert(7)(connection)
        return _count_to(3_000_000)(connection)

    assert await worker.write(_recorded(threads, insert_then_count)) == 3_000_000
    assert threads[0] == LOOP_THREAD
    assert threads[1].startswith("agentensemble-sqlite_")
    assert await worker.read(_numbers) == [7]


async def test_writes_asked_for_before_a_close_are_committed(tmp_path: Path) -> None:
    worker = SqliteWorker(tmp_path / "w.db", setup=_numbers_table, inline=True)
    await worker.read(_numbers)
    write = worker.write(_insert(5))
    await worker.aclose()
    await write
    with pytest.raises(RuntimeError, match="closed"):
        worker.read(_numbers)
    reopened = SqliteWorker(tmp_path / "w.db", setup=_numbers_table, inline=True)
    try:
        assert await reopened.read(_numbers) == [5]
    finally:
        await reopened.aclose()


async def test_the_thread_checkpoints_the_wal_behind_inline_writes(tmp_path: Path) -> None:
    path = tmp_path / "w.db"
    worker = SqliteWorker(path, setup=_numbers_table, inline=True)
    await worker.read(_numbers)
    keeps_the_wal = sqlite3.connect(path)  # so that closing the worker does not checkpoint
    _numbers(keeps_the_wal)  # (SQLite opens the file at a connection's first statement)
    try:
        for number in range(100):
            await worker.write(_insert(number))
        await worker.aclose()  # after the work asked for, the checkpoint among it
        # the database file alone (its WAL ignored) holds what the inline writes wrote
        alone = sqlite3.connect(f"file:{path}?immutable=1", uri=True)
        try:
            assert len(_numbers(alone)) == 100
        finally:
            alone.close()
    finally:
        keeps_the_wal.close()


async def test_two_event_loops_share_an_inline_worker(worker: SqliteWorker) -> None:
    def in_another_loop() -> list[int]:
        async def work() -> list[int]:
            await worker.write(_insert(2))
            return await worker.read(_numbers)

        return asyncio.run(work())

    await worker.write(_insert(1))
    seen = await asyncio.to_thread(in_another_loop)
    assert seen == [1, 2]
    assert await worker.read(_numbers) == [1, 2]


async def test_a_memory_store_runs_its_operations_inline_unless_told_not_to(
    tmp_path: Path,
) -> None:
    with pytest.raises(ValidationError, match="inline must be True or False, got: 'yes'"):
        MemoryStore.sqlite(tmp_path / "m.db", inline="yes")  # type: ignore[arg-type]
    for inline in (True, False):
        store = MemoryStore.sqlite(tmp_path / f"m-{inline}.db", inline=inline)
        try:
            await store.check()  # opens the file, on the thread
            threads = await store._worker.read(lambda _: threading.current_thread().name)
        finally:
            await store.aclose()
        assert (threads == LOOP_THREAD) is inline
