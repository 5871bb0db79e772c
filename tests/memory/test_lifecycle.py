"""Stores across fork, after close, and the vector cache after evictions."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import pytest

from agentensemble.memory import (
    Embedder,
    EvictionPolicy,
    MemoryEntry,
    MemoryStore,
    VectorIndex,
)


def _retrieve_in_child(path: str, queue: multiprocessing.Queue[list[str]]) -> None:
    import asyncio

    async def main() -> list[str]:
        found = await STORES[path].retrieve("notes", "parent", 5)
        await STORES[path].store("notes", MemoryEntry("written by the child"))
        return [entry.content for entry in found]

    queue.put(asyncio.run(main()))


STORES: dict[str, MemoryStore] = {}


# The point of the test: a pre-forking server forks after the store's thread started.
# Python 3.12+ warns about forking a multi-threaded process; the store's answer to it (a
# connection and a thread of the child's own) is what is checked here.
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
async def test_a_forked_process_uses_a_store_its_parent_opened(tmp_path: Path) -> None:
    path = str(tmp_path / "memory.db")
    store = STORES[path] = MemoryStore.sqlite(path)
    try:
        await store.store("notes", MemoryEntry("written by the parent"))
        context = multiprocessing.get_context("fork")
        queue: multiprocessing.Queue[list[str]] = context.Queue()
        child = context.Process(target=_retrieve_in_child, args=(path, queue))
        child.start()
        assert queue.get(timeout=60) == ["written by the parent"]
        child.join(timeout=60)
        assert child.exitcode == 0
        found = await store.retrieve("notes", "child", 5)
        assert "written by the child" in [entry.content for entry in found]
    finally:
        await store.aclose()
        STORES.clear()


@pytest.mark.parametrize("factory", [VectorIndex.sqlite, VectorIndex.sqlite_vec])
async def test_a_closed_sqlite_index_refuses_work(tmp_path: Path, factory: object) -> None:
    index = factory(tmp_path / "v.db")  # type: ignore[operator]
    await index.add("s", MemoryEntry("x"), [1.0, 0.0])
    await index.aclose()
    with pytest.raises(RuntimeError, match="closed"):
        await index.search("s", [1.0, 0.0], 1)


async def test_equal_scores_come_newest_first(tmp_path: Path) -> None:
    async with MemoryStore.embeddings(Embedder.hashing(), tmp_path / "v.db") as store:
        for number in range(6):
            await store.store("s", MemoryEntry("same words", metadata={"n": str(number)}))
        found = await store.retrieve("s", "same words", 3)
    assert [entry.get_meta("n") for entry in found] == ["5", "4", "3"]


async def test_searches_after_an_eviction_see_only_what_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "v.db"
    async with (
        MemoryStore.embeddings(Embedder.hashing(), path) as writer,
        MemoryStore.embeddings(Embedder.hashing(), path) as reader,
    ):
        for number in range(5):
            await writer.store("s", MemoryEntry(f"note {number}"))
        assert len(await writer.retrieve("s", "note", 10)) == 5  # both caches built
        assert len(await reader.retrieve("s", "note", 10)) == 5
        assert await writer.evict("s", EvictionPolicy.keep_last_entries(2)) == 3
        await writer.store("s", MemoryEntry("note 5"))
        for store in (writer, reader):
            found = await store.retrieve("s", "note", 10)
            assert sorted(entry.content for entry in found) == ["note 3", "note 4", "note 5"]
