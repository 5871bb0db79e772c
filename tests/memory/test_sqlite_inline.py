"""The SQLite worker's inline jobs: run on the event loop's thread while nothing makes them
wait, on the worker thread when the file is locked or a job runs past its budget."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import threading
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from agentensemble.errors import ValidationError
from agentensemble.memory import MemoryStore
from agentensemble.memory._sqlite_worker import SqliteWorker, _Deadline, _Job, _write_inline
from tests.memory.sqlite_jobs import (
    THREE_WRITES_THE_MIDDLE_ONE_FAILING,
    Job,
    heads,
    insert_number,
    insert_then_fail,
    numbers,
    numbers_table,
)


def _recorded(threads: list[str], job: Job) -> Job:
    """`job`, noting the name of the thread each run of it runs on."""

    def run(connection: sqlite3.Connection) -> Any:
        threads.append(threading.current_thread().name)
        return job(connection)

    return run


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
    made = SqliteWorker(tmp_path / "w.db", setup=numbers_table, inline=True)
    await made.read(numbers)
    yield made
    await made.aclose()


LOOP_THREAD = threading.current_thread().name


async def test_the_first_job_opens_the_file_on_the_thread_and_later_ones_run_inline(
    tmp_path: Path,
) -> None:
    worker = SqliteWorker(tmp_path / "w.db", setup=numbers_table, inline=True)
    threads: list[str] = []
    try:
        assert await worker.read(_recorded(threads, numbers)) == []
        await worker.write(_recorded(threads, insert_number(1)))
        assert await worker.read(_recorded(threads, numbers)) == [1]
    finally:
        await worker.aclose()
    assert threads[0].startswith("agentensemble-sqlite_")
    assert threads[1:] == [LOOP_THREAD, LOOP_THREAD]


async def test_a_worker_without_inline_runs_every_job_on_its_thread(tmp_path: Path) -> None:
    worker = SqliteWorker(tmp_path / "w.db", setup=numbers_table)
    threads: list[str] = []
    try:
        for _ in range(3):
            await worker.read(_recorded(threads, numbers))
    finally:
        await worker.aclose()
    assert len(threads) == 3
    assert all(name.startswith("agentensemble-sqlite_") for name in threads)


async def test_an_inline_read_is_answered_at_once(worker: SqliteWorker) -> None:
    read = worker.read(numbers)
    assert read.done()
    assert read.result() == []


async def test_writes_asked_for_in_one_turn_commit_together_and_a_failing_one_alone(
    worker: SqliteWorker,
) -> None:
    statements: list[str] = []
    await worker.read(lambda connection: connection.set_trace_callback(statements.append))

    writes = [
        worker.write(insert_number(1)),
        worker.write(insert_then_fail),
        worker.write(insert_number(3)),
    ]
    assert not any(write.done() for write in writes)  # committed at the end of the turn
    await _next_turn()
    assert writes[0].result() is None
    assert isinstance(writes[1].exception(), ValueError)
    assert writes[2].result() is None
    assert heads(statements) == THREE_WRITES_THE_MIDDLE_ONE_FAILING
    assert await worker.read(numbers) == [1, 3]


async def test_a_write_the_file_refuses_inline_waits_for_the_lock_on_the_thread(
    worker: SqliteWorker, tmp_path: Path
) -> None:
    threads: list[str] = []
    other = sqlite3.connect(tmp_path / "w.db", isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")  # as another process would
        write = worker.write(_recorded(threads, insert_number(1)))
        await _next_turn()
        assert not write.done()  # waiting on the thread, not holding the loop up
        assert await worker.read(numbers) == []  # reads go on meanwhile (WAL)
        other.execute("COMMIT")
        await write
    finally:
        other.close()
    assert await worker.read(numbers) == [1]
    assert len(threads) == 1
    assert threads[0].startswith("agentensemble-sqlite_")


async def test_a_read_past_its_budget_is_interrupted_and_answered_from_the_thread(
    worker: SqliteWorker,
) -> None:
    threads: list[str] = []
    assert await worker.read(_recorded(threads, _count_to(3_000_000))) == 3_000_000
    assert threads[0] == LOOP_THREAD  # started inline, interrupted
    assert threads[1].startswith("agentensemble-sqlite_")
    await worker.read(_recorded(threads, numbers))  # the next jobs go to the thread too
    assert threads[2].startswith("agentensemble-sqlite_")


async def test_a_write_past_its_budget_is_rolled_back_and_committed_once_from_the_thread(
    worker: SqliteWorker,
) -> None:
    threads: list[str] = []

    def insert_then_count(connection: sqlite3.Connection) -> int:
        insert_number(7)(connection)
        return _count_to(3_000_000)(connection)

    assert await worker.write(_recorded(threads, insert_then_count)) == 3_000_000
    assert threads[0] == LOOP_THREAD
    assert threads[1].startswith("agentensemble-sqlite_")
    assert await worker.read(numbers) == [7]


async def test_writes_asked_for_before_a_close_are_committed(tmp_path: Path) -> None:
    worker = SqliteWorker(tmp_path / "w.db", setup=numbers_table, inline=True)
    await worker.read(numbers)
    write = worker.write(insert_number(5))
    await worker.aclose()
    await write
    with pytest.raises(RuntimeError, match="closed"):
        worker.read(numbers)
    reopened = SqliteWorker(tmp_path / "w.db", setup=numbers_table, inline=True)
    try:
        assert await reopened.read(numbers) == [5]
    finally:
        await reopened.aclose()


async def test_the_thread_checkpoints_the_wal_behind_inline_writes(tmp_path: Path) -> None:
    path = tmp_path / "w.db"
    worker = SqliteWorker(path, setup=numbers_table, inline=True)
    await worker.read(numbers)
    keeps_the_wal = sqlite3.connect(path)  # so that closing the worker does not checkpoint
    numbers(keeps_the_wal)  # (SQLite opens the file at a connection's first statement)
    try:
        for number in range(100):
            await worker.write(insert_number(number))
        await worker.aclose()  # after the work asked for, the checkpoint among it
        # the database file alone (its WAL ignored) holds what the inline writes wrote
        alone = sqlite3.connect(f"file:{path}?immutable=1", uri=True)
        try:
            assert len(numbers(alone)) == 100
        finally:
            alone.close()
    finally:
        keeps_the_wal.close()


async def test_two_event_loops_share_an_inline_worker(worker: SqliteWorker) -> None:
    def in_another_loop() -> list[int]:
        async def work() -> list[int]:
            await worker.write(insert_number(2))
            return await worker.read(numbers)

        return asyncio.run(work())

    await worker.write(insert_number(1))
    seen = await asyncio.to_thread(in_another_loop)
    assert seen == [1, 2]
    assert await worker.read(numbers) == [1, 2]


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


def test_a_commit_that_reports_an_interruption_after_committing_is_never_made() -> None:
    # SQLite calls the progress handler once more at the end of a COMMIT, after it has
    # committed; reporting "interrupted" then would send the writes to the thread to be
    # committed a second time. With a handler every 3 steps, a fresh connection's COMMIT
    # is interrupted exactly there, so the budget must be off while it runs.
    connection = sqlite3.connect(":memory:", isolation_level=None)
    numbers_table(connection)
    deadline = _Deadline()
    connection.set_progress_handler(deadline, 3)
    loop = asyncio.new_event_loop()
    try:

        def insert_then_run_late(connection: sqlite3.Connection) -> None:
            insert_number(1)(connection)
            deadline.at = 0.0  # the job took its whole budget

        job = _Job(True, insert_then_run_late, loop.create_future())
        assert _write_inline(connection, [job], deadline)
        assert job.future.result() is None
        assert numbers(connection) == [1]
    finally:
        loop.close()
        connection.close()


class _Abort(BaseException):
    """Neither an Exception nor a reason to end the program."""


def _abort(connection: sqlite3.Connection) -> None:
    raise _Abort("stop here")


async def test_a_job_raising_a_base_exception_inline_gives_it_to_its_caller(
    worker: SqliteWorker,
) -> None:
    with pytest.raises(_Abort):
        await worker.write(_abort)
    with pytest.raises(_Abort):
        await worker.read(_abort)
    assert await worker.read(numbers) == []


async def test_the_next_jobs_after_a_slow_one_go_to_the_thread(worker: SqliteWorker) -> None:
    threads: list[str] = []
    await worker.read(_count_to(3_000_000))
    for _ in range(51):
        await worker.read(_recorded(threads, numbers))
    assert all(name.startswith("agentensemble-sqlite_") for name in threads[:50])
    assert threads[50] == LOOP_THREAD


async def test_a_write_due_when_another_thread_closes_the_worker_fails_and_starts_nothing(
    tmp_path: Path,
) -> None:
    worker = SqliteWorker(tmp_path / "w.db", setup=numbers_table, inline=True)
    write = worker.write(insert_number(1))  # the first job: the file is not open yet
    closer = threading.Thread(target=worker.close)
    closer.start()
    closer.join()  # before the loop's turn ends
    with pytest.raises(RuntimeError, match="closed"):
        await write
    assert worker._state.thread is None


async def test_a_checkpoint_waits_for_no_reader_of_another_process(tmp_path: Path) -> None:
    path = tmp_path / "w.db"
    worker = SqliteWorker(path, setup=numbers_table, busy_timeout=60, inline=True)
    await worker.read(numbers)
    reader = sqlite3.connect(path, isolation_level=None)
    try:
        reader.execute("BEGIN")
        numbers(reader)  # holds its snapshot: the WAL cannot start over
        for number in range(100):
            await worker.write(insert_number(number))  # the checkpoint is queued after the 100th
        async with asyncio.timeout(30):  # a checkpoint waiting for the reader: 60 s
            await worker.write(insert_number(100))  # queued behind the checkpoint
        assert len(await worker.read(numbers)) == 101
    finally:
        reader.close()
        await worker.aclose()


async def test_two_loops_writing_at_once_commit_every_write_once(worker: SqliteWorker) -> None:
    start = threading.Barrier(2)

    def writer(first: int) -> None:
        async def write_many() -> None:
            for number in range(first, first + 300):
                await worker.write(insert_number(number))
                await worker.read(numbers)

        start.wait(timeout=30)
        asyncio.run(write_many())

    threads = [threading.Thread(target=writer, args=(first,)) for first in (0, 1000)]
    for thread in threads:
        thread.start()
    for thread in threads:
        await asyncio.to_thread(thread.join)
    assert await worker.read(numbers) == [*range(300), *range(1000, 1300)]


# the child only runs its loop's turn and exits: none of the parent's threads is needed there
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
async def test_a_write_due_when_the_process_forks_is_committed_by_the_parent_only(
    worker: SqliteWorker,
) -> None:
    write = worker.write(insert_number(os.getpid()))
    read, report = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: how its copy of the write ended, to the parent
        try:
            await write
            outcome = "committed"
        except RuntimeError as error:
            outcome = str(error)
        os.write(report, outcome.encode())
        os._exit(0)
    os.close(report)
    await write
    await asyncio.to_thread(os.waitpid, pid, 0)
    with os.fdopen(read) as pipe:
        child = pipe.read()
    assert "before this process forked is the parent's to commit" in child
    assert await worker.read(numbers) == [os.getpid()]


async def test_inline_writes_keep_the_wal_to_the_writes_between_two_checkpoints(
    worker: SqliteWorker, tmp_path: Path
) -> None:
    for number in range(1000):
        await worker.write(insert_number(number))
    page_size: int = await worker.read(
        lambda connection: connection.execute("PRAGMA page_size").fetchone()[0]
    )
    frames = (tmp_path / "w.db-wal").stat().st_size // (page_size + 24)
    # a frame per write; the WAL starts over after each checkpoint, every 100 writes
    assert frames <= 150
