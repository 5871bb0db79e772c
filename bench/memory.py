"""Memory store speed at scale: store throughput and retrieve latency. Prints JSON.

    python bench/memory.py [--entries 100000] [--seed 7]

Keyword section (the SQLite store, FTS5): `--entries` entries in ONE scope, pseudo-English
task outputs of 40-80 words generated deterministically (a vocabulary of 3,000 words with
Zipf-like frequencies, so that words such as "report" and "analysis" occur in most entries,
plus English stopwords for ~40% of the words). It reports the throughput of filling the
store with concurrent `store` calls, the latency of 1,000 sequential stores, the latency of
500 retrieves (queries of 10-20 words, shaped like task descriptions, 5 results, as the
engine asks for), the same in a 100-entry scope of the same file, and the file's size
(with its -wal). Each section is a function returning a dict; `main` collects them.
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import functools
import itertools
import json
import os
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentensemble.memory import MemoryEntry, MemoryStore

COMMON_WORDS = str.split("""
    report analysis market data risk summary customer revenue growth strategy product team
    sales research review plan quarter cost project results price service quality support
    performance model trend policy security business finance forecast budget supply demand
    competitor segment user feedback survey metric process operations launch release design
    feature platform infrastructure region channel partner contract pricing margin inventory
    logistics compliance regulation audit incident outage latency capacity migration rollout
    hiring training documentation roadmap milestone deadline stakeholder meeting decision
    proposal estimate benchmark experiment hypothesis evidence source article paper dataset
    """)
STOPWORDS = str.split("""
    the of and to a in for is on that by this with it as be are from at or an was which will
    its has have not but all their can more these should into than
    """)
SYLLABLES = str.split("""
    ka ro mi ten sal por vi den lu mar ket ris an ope tra lin cor da ve sen tal mo ge pli fa
    nu ster ba qui zor el um ix ar on ta be go ru ne
    """)
QUERY_OPENINGS = [
    "Summarise",
    "Write a report on",
    "Analyse",
    "Compare",
    "Review",
    "List the key findings about",
    "Draft a plan for",
]


class Text:
    """Deterministic pseudo-English: Zipf-distributed vocabulary mixed with stopwords."""

    def __init__(self, seed: int, vocabulary_size: int = 3000) -> None:
        self.rng = random.Random(seed)
        self.vocabulary = self._vocabulary(vocabulary_size)
        weights = [1 / rank for rank in range(1, len(self.vocabulary) + 1)]
        self.cumulative = list(itertools.accumulate(weights))

    def _vocabulary(self, size: int) -> list[str]:
        words = dict.fromkeys(COMMON_WORDS)
        while len(words) < size:
            length = self.rng.randint(2, 4)
            words.setdefault("".join(self.rng.choices(SYLLABLES, k=length)))
        return list(words)

    def word(self) -> str:
        if self.rng.random() < 0.4:
            return self.rng.choice(STOPWORDS)
        point = self.rng.random() * self.cumulative[-1]
        return self.vocabulary[bisect.bisect(self.cumulative, point)]

    def words(self, low: int, high: int) -> str:
        return " ".join(self.word() for _ in range(self.rng.randint(low, high)))

    def output(self) -> str:
        sentences = [self.words(8, 16).capitalize() + "." for _ in range(5)]
        return " ".join(sentences)[: self.rng.randint(300, 600)]

    def task_description(self) -> str:
        return f"{self.rng.choice(QUERY_OPENINGS)} {self.words(8, 17)}."


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def ms(seconds: float) -> float:
    return round(seconds * 1000, 3)


async def timed(calls: list[Callable[[], Any]]) -> list[float]:
    """Latency of each call, one after the other."""
    latencies = []
    for call in calls:
        start = time.perf_counter()
        await call()
        latencies.append(time.perf_counter() - start)
    return latencies


async def fill(store: MemoryStore, scope: str, text: Text, count: int, batch: int = 500) -> float:
    """Store `count` entries, `batch` concurrent calls at a time; entries per second."""
    start = time.perf_counter()
    for first in range(0, count, batch):
        async with asyncio.TaskGroup() as group:
            for _ in range(min(batch, count - first)):
                group.create_task(store.store(scope, MemoryEntry(text.output())))
    return count / (time.perf_counter() - start)


async def retrieve_latencies(
    store: MemoryStore, scope: str, text: Text, count: int
) -> dict[str, Any]:
    queries = [text.task_description() for _ in range(count)]
    latencies = await timed([functools.partial(store.retrieve, scope, q, 5) for q in queries])
    return {
        "queries": count,
        "p50_ms": ms(statistics.median(latencies)),
        "p99_ms": ms(percentile(latencies, 0.99)),
        "max_ms": ms(max(latencies)),
    }


def file_megabytes(path: Path) -> float:
    sizes = [os.path.getsize(p) for p in (path, Path(f"{path}-wal")) if p.exists()]
    return round(sum(sizes) / 1e6, 1)


async def _keyword(n_entries: int, seed: int) -> dict[str, Any]:
    text = Text(seed)
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "memory.db"
        async with MemoryStore.sqlite(path) as store:
            throughput = await fill(store, "main", text, n_entries)
            await fill(store, "small", text, 100)
            sequential = await timed(
                [lambda: store.store("main", MemoryEntry(text.output())) for _ in range(1000)]
            )
            await store.retrieve("main", "warm up", 5)
            large = await retrieve_latencies(store, "main", text, 500)
            small = await retrieve_latencies(store, "small", text, 500)
        return {
            "entries": n_entries,
            "store_concurrent_entries_per_s": round(throughput),
            "store_sequential_p50_ms": ms(statistics.median(sequential)),
            "retrieve": large,
            "retrieve_100_entry_scope_same_file": small,
            "file_mb": file_megabytes(path),
        }


def keyword(n_entries: int, seed: int = 7) -> dict[str, Any]:
    """The SQLite store (FTS5 keyword retrieval) with `n_entries` entries in one scope."""
    return asyncio.run(_keyword(n_entries, seed))


async def _semantic(n_entries: int, seed: int) -> dict[str, Any]:
    from agentensemble.memory import Embedder, EmbeddingMemoryStore, VectorIndex

    text, embedder = Text(seed), Embedder.hashing(384)  # a test double: measures the index
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "semantic.db"
        async with EmbeddingMemoryStore(embedder, VectorIndex.sqlite(path)) as store:
            throughput = await fill(store, "main", text, n_entries)
            await store.retrieve("main", "warm up", 5)  # loads the scope's matrix
            retrieve = await retrieve_latencies(store, "main", text, 500)
        size = file_megabytes(path)
        async with VectorIndex.sqlite(Path(directory) / "exact.db") as index:
            outputs = [text.output() for _ in range(10_000)]
            for first in range(0, len(outputs), 500):
                async with asyncio.TaskGroup() as group:
                    for output in outputs[first : first + 500]:
                        group.create_task(
                            index.add("main", MemoryEntry(output), embedder.embed(output))
                        )
            queries = [embedder.embed(text.task_description()) for _ in range(500)]
            await index.search("main", queries[0], 5)
            exact = await timed([functools.partial(index.search, "main", q, 5) for q in queries])
    return {
        "entries": n_entries,
        "store_concurrent_entries_per_s": round(throughput),
        "retrieve": retrieve,
        "file_mb": size,
        "exact_search_10000_entries_p50_ms": ms(statistics.median(exact)),
    }


def semantic(n_entries: int, seed: int = 7) -> dict[str, Any]:
    """EmbeddingMemoryStore with Embedder.hashing(384) over VectorIndex.sqlite; plus the
    exact search alone (query vectors computed beforehand) over 10,000 entries."""
    return asyncio.run(_semantic(n_entries, seed))


async def _per_task(runs: int) -> dict[str, Any]:
    from agentensemble import Ensemble, FunctionModel, Task

    model = FunctionModel(lambda messages, tools: "An instant answer.")

    async def wall_us_per_run(store: MemoryStore | None) -> float:
        task = Task("Summarise the week", memory=["weekly"] if store else ())
        ensemble = Ensemble(tasks=[task], llm=model, memory_store=store)
        await ensemble.arun()  # warm-up
        start = time.perf_counter()
        for _ in range(runs):
            await ensemble.arun()
        return round((time.perf_counter() - start) / runs * 1e6, 1)

    with tempfile.TemporaryDirectory() as directory:
        async with MemoryStore.sqlite(Path(directory) / "runs.db") as sqlite_store:
            return {
                "runs": runs,
                "wall_us_per_one_task_run_without_memory": await wall_us_per_run(None),
                "wall_us_with_one_scope_in_memory": await wall_us_per_run(MemoryStore.in_memory()),
                "wall_us_with_one_scope_sqlite": await wall_us_per_run(sqlite_store),
            }


def per_task(runs: int = 500) -> dict[str, Any]:
    """What one declared scope adds to a one-task run (a retrieve and a store), instant model."""
    return asyncio.run(_per_task(runs))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--entries", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    results = {
        "per_task": per_task(),
        "keyword": keyword(args.entries, args.seed),
        "semantic": semantic(args.entries, args.seed),
    }
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
