"""A SQLite memory file that cannot be used is an error naming it, before any model call."""

from __future__ import annotations

import os
import re
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from agentensemble import Ensemble, ScriptedModel, Task, ValidationError
from agentensemble.memory import MemoryStore


@pytest.mark.parametrize("path", [None, 42, ""])
def test_a_path_that_is_not_one(path: Any) -> None:
    with pytest.raises(ValidationError, match="SQLite path must"):
        MemoryStore.sqlite(path)


def test_a_directory(tmp_path: Path) -> None:
    expected = re.escape(f"SQLite path '{tmp_path}' is a directory")
    with pytest.raises(ValidationError, match=expected):
        MemoryStore.sqlite(tmp_path)


def test_a_file_that_is_not_a_database(tmp_path: Path) -> None:
    text = tmp_path / "notes.txt"
    text.write_text("these are my notes, not a database")
    expected = r"notes\.txt' is a file that is not a SQLite database"
    with pytest.raises(ValidationError, match=expected):
        MemoryStore.sqlite(text)


def test_a_read_only_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    database = tmp_path / "memory.db"
    sqlite3.connect(database).close()
    real_access = os.access
    # the suite may run as root, who may write anything: the OS answers as for a user
    monkeypatch.setattr(
        os, "access", lambda path, mode: False if path == str(database) else real_access(path, mode)
    )
    with pytest.raises(ValidationError, match="is not readable and writable"):
        MemoryStore.sqlite(database)


def test_a_truncated_file_fails_the_run_before_any_model_call(tmp_path: Path) -> None:
    database = tmp_path / "memory.db"
    connection = sqlite3.connect(database)
    connection.execute("CREATE TABLE t (x)")
    connection.executemany("INSERT INTO t VALUES (?)", [("x" * 500,)] * 200)
    connection.commit()
    connection.close()
    data = database.read_bytes()
    database.write_bytes(data[:1500])  # the header survives, the pages do not
    store = MemoryStore.sqlite(database)
    llm = ScriptedModel(["never"])
    task = Task("Remember this", memory=["notes"])
    with pytest.raises(ValidationError, match=re.escape(f"SQLite file {database}")):
        Ensemble(tasks=[task], llm=llm, memory_store=store).run()
    assert llm.requests == []


class FullDisk(MemoryStore):
    """A store whose writes fail, as a full disk or an embedder's 404 would."""

    def __init__(self) -> None:
        self.inner = MemoryStore.in_memory()

    async def store(self, scope: str, entry: Any) -> None:
        raise OSError(28, "No space left on device")

    async def retrieve(self, scope: str, query: str, max_results: int) -> list[Any]:
        return await self.inner.retrieve(scope, query, max_results)

    async def evict(self, scope: str, policy: Any) -> int:
        return 0

    async def clear(self, scope: str) -> None:
        pass


def test_a_failed_store_keeps_the_paid_for_output() -> None:
    from agentensemble import TaskExecutionError

    first = Task("Research", llm=ScriptedModel(["notes"]))
    second = Task("Write", llm=ScriptedModel(["the article"]), memory=["articles"])
    with pytest.raises(TaskExecutionError) as raised:
        Ensemble(tasks=[first, second], memory_store=FullDisk()).run()
    message = str(raised.value)
    assert message.startswith("Task 'Write' failed: ")
    assert "memory store failed while storing scope 'articles'" in message
    assert "No space left on device" in message
    assert [o.raw for o in raised.value.completed_outputs] == ["notes", "the article"]
