"""Vectors of long-term items, cluster summaries and turns: how they are written and what identifies them (the
embedders themselves are in embedders.py).

Any LangChain `Embeddings` can be used; without one, recall runs without its vector path. `index_items` embeds
the items, summaries and turns of a user that have no vector of the configured model yet; the summary job calls
it after every version's commit (never the user's round), and `index_pending` is the periodic catch-up for the
items and turns that call missed (it failed, or the turns came after the user's last version). A turn's vector is made
from the turn with the turn before it (`turn_passage`). Each vector is stored with its compact copy (the signs of the vector minus its model's center: recall's first pass, 0025); `vector_center` is
that center, the mean of the model's vectors of fixed reference texts.
"""

from __future__ import annotations

import json
import math
from collections.abc import Awaitable, Callable
from typing import Any

from langchain_core.embeddings import Embeddings
from psycopg import AsyncConnection

from memory_agent.errors import ConfigurationError, JobFailedError
from memory_agent.long_term.queries import QUERIES as Q
from memory_agent.long_term.queries import Row
from memory_agent.long_term.reference_texts import REFERENCE_TEXTS
from memory_agent.long_term.tenancy import tenant_transaction

# What a turn's vector is made from, as message_embeddings.text_version records it (0028): 0, the turn alone; 1, the
# turn with the last CONTEXT_CHARS characters of the turn before it. A stored vector of another version is made
# again by the embedding job (and the periodic catch-up), so a database converges when this changes.
TURN_TEXT_VERSION = 1
CONTEXT_CHARS = 200
# A turn's own text is embedded by its first TURN_CHARS characters (its speaker's name included). An embedder's time
# grows with the text (the bundled e5 averages 512-token windows: 100,000 characters took 40 s, 1,000,000 took
# 392 s, measured), and a hosted one refuses a text past its token limit, failing the batch at every retry: one
# pasted log or book of a user held back the vectors of all their later turns. The text is stored and searched
# whole; turns this long carry their meaning in their start as much as anywhere.
TURN_CHARS = 2_000
# Texts of a failed batch embedded alone that fail before one is embedded: the embedder is away, not refusing them.
MAX_REFUSED = 3
FLOAT32_MAX = 3.4028234663852886e38  # pgvector's `vector` holds single-precision values
MAX_VECTOR_DIMENSIONS = 16_000  # and at most this many


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


def turn_passage(row: Row) -> str:
    """The text a turn's vector is made from: the turn before it (`previous_name`: `previous_tail`, the last
    CONTEXT_CHARS characters of its text, from its first whole word) on a line, then the turn (`content`, with its
    speaker's name). A short answer ("Yes! It was amazing") carries its meaning in the turn it answers: embedded
    alone it is near every other short answer. The turn after it is not stored yet when the turn is embedded."""
    own, previous = row["content"], row.get("previous_tail")
    if previous is None:
        return str(own)
    if row.get("previous_cut") and " " in previous.strip():  # cut inside its text: drop the cut word
        previous = "…" + previous.split(None, 1)[1] if not previous[0].isspace() else "…" + previous.lstrip()
    name = row.get("previous_name")
    return f"{name}: {previous}\n{own}" if name else f"{previous}\n{own}"


async def vectors_available(conn: AsyncConnection[Any]) -> bool:
    return await Q.vectors_available(conn)


async def vector_center(conn: AsyncConnection[Any], embedder: Embeddings) -> list[float]:
    """The center of `embedder`'s vectors, stored once per model (the first writer's; every writer computes the
    same): the mean of its vectors of REFERENCE_TEXTS. The compact copies of the model's vectors are the signs of
    each vector minus it."""
    model = model_name(embedder)
    async with conn.transaction():  # no tenant's row: a model's center holds no user's data
        row = await Q.vector_center(conn, model)
    if row is None:
        vectors = await embedder.aembed_documents(list(REFERENCE_TEXTS))
        mean = [math.fsum(column) / len(vectors) for column in zip(*vectors, strict=True)]
        async with conn.transaction():
            await Q.save_vector_center(conn, model, to_vector_literal(mean))
        async with conn.transaction():
            row = await Q.vector_center(conn, model)
    assert row is not None  # written above, or by a concurrent writer first
    return [float(v) for v in json.loads(row["center"])]


async def index_items(
    conn: AsyncConnection[Any], *, tenant_id: str, user_id: str, embedder: Embeddings, batch: int = 128
) -> int:
    """Embed the user's current items and summaries, then their turns, that have no vector of this embedder yet;
    returns how many.

    A batch the embedder fails is embedded text by text: a text it refuses at every attempt is left out (named in
    the JobFailedError raised once the rest is written), not the batch. Idempotent: what has a vector of this
    model is not read again, and a vector is one row per item or turn
    (written again, it replaces). Each batch is read and written in transactions of the tenant (row-level
    security), the model called between them (no transaction waits on it), so a crash loses at most one batch
    and a rerun carries on. Without pgvector on the server nothing is embedded (0).

    A forget may commit while the model answers: the write takes the user's forget lock shared, as every
    background writer does, and each vector is written only onto the row that still holds the text embedded
    (its hash, checked in the insert): a forgotten item or turn costs its own vector only, and a later round of
    the same thread id, whose turns take the erased ones' keys, never gets the erased text's vector.
    """
    if batch < 1:
        raise ConfigurationError(f"index_items batch must be >= 1, got {batch}")
    if not await vectors_available(conn):
        return 0
    center = await vector_center(conn, embedder)
    keys = {
        "tenant_id": tenant_id,
        "user_id": user_id,
        "model": model_name(embedder),
        "batch": batch,
        "text_version": TURN_TEXT_VERSION,
        "context_chars": CONTEXT_CHARS,
        "turn_chars": TURN_CHARS,
    }
    async with tenant_transaction(conn, tenant_id):  # the compact copies of vectors stored before they existed
        await Q.fill_bits(conn, keys)
    written, refusals = 0, []
    for read, save, passage, columns in (
        (Q.items_to_embed, Q.save_item_embeddings, _item_passage, ("item_id",)),
        (
            Q.turns_to_embed,
            Q.save_turn_embeddings,
            turn_passage,
            ("conversation_id", "sequence_number", "previous_hash"),
        ),
    ):
        while True:
            rows, refused = await _embed_batch(
                conn, embedder, (read, passage), keys, columns, to_vector_literal(center)
            )
            if rows:
                async with tenant_transaction(conn, tenant_id):
                    # Forgetting wins (lineage.py): a forget of the user in progress is waited for, and each
                    # statement then writes only onto the row that still holds the text it embedded.
                    await Q.share_forget_lock(conn, {"tenant_id": tenant_id, "user_id": user_id})
                    written += await save(conn, rows)
            if refused:  # read again by the next run, first (its batch is then embedded text by text again)
                refusals.append(refused)
                break
            if len(rows) < batch:
                break
    if refusals:
        raise JobFailedError(f"the embedder refused {'; '.join(refusals)}; found by text only", retryable=False)
    return written


def _item_passage(row: Row) -> str:
    return str(row["content"])


async def _embed_batch(
    conn: AsyncConnection[Any],
    embedder: Embeddings,
    source: tuple[Callable[[AsyncConnection[Any], dict[str, Any]], Awaitable[list[Row]]], Callable[[Row], str]],
    keys: dict[str, Any],
    columns: tuple[str, ...],
    center: str,
) -> tuple[list[dict[str, Any]], str]:
    """One batch of what has no vector yet (read in a transaction of the tenant by `source`'s query), embedded as
    passages (each row's text as `source`'s function makes it): the parameters of its save statement (a vector of
    another dimension than the center's gets no compact copy: recall ranks it exactly), and the rows the embedder
    refused, named (none: ""). A batch the embedder fails is embedded text by text (_one_at_a_time)."""
    read, passage = source
    async with tenant_transaction(conn, keys["tenant_id"]):
        rows = await read(conn, keys)
    if not rows:
        return [], ""
    texts = [passage(row) for row in rows]
    try:
        vectors = await embedder.aembed_documents(texts)
        for vector in vectors:
            to_vector_literal(vector)  # one pgvector would refuse: the embedder's failure, as an error it raised
        refused = ""
    except Exception:
        if len(rows) == 1:
            raise
        rows, vectors, refused = await _one_at_a_time(embedder, rows, texts)
    return [
        {
            "user_id": keys["user_id"],
            "tenant_id": keys["tenant_id"],
            "model": keys["model"],
            "embedding": to_vector_literal(vector),
            "center": center if len(vector) == center.count(",") + 1 else None,
            "content_hash": row["content_hash"],
            "text_version": keys["text_version"],
            **{column: row[column] for column in columns},
        }
        for row, vector in zip(rows, vectors, strict=True)
    ], refused


async def _one_at_a_time(
    embedder: Embeddings, rows: list[Row], texts: list[str]
) -> tuple[list[Row], list[list[float]], str]:
    """A batch the embedder failed, text by text: one text it refuses at every attempt (past its limits, or one
    it makes no finite vector of) must not hold back the others, read after it. The rows embedded, their vectors,
    and the refused ones named with the first error; an embedder that fails MAX_REFUSED texts before it embeds any
    is away, not refusing texts: its error is raised."""
    kept: list[Row] = []
    vectors: list[list[float]] = []
    refused: list[tuple[Row, Exception]] = []
    for row, text in zip(rows, texts, strict=True):
        try:
            (vector,) = await embedder.aembed_documents([text])
            to_vector_literal(vector)
        except Exception as exc:
            refused.append((row, exc))
            if not kept and len(refused) >= MAX_REFUSED:
                raise
            continue
        kept.append(row)
        vectors.append(vector)
    first = refused[0][1] if refused else None
    named = ", ".join(_name(row) for row, _ in refused)
    return kept, vectors, f"{named} ({type(first).__name__}: {first})" if refused else ""


def _name(row: Row) -> str:
    if "item_id" in row:
        return f"item {row['item_id']}"
    return f"turn {row['conversation_id']} #{row['sequence_number']}"


async def index_pending(conn: AsyncConnection[Any], embedder: Embeddings, *, users: int = 20) -> int:
    """The periodic catch-up: index_items for up to `users` users that have a current item or summary, or a turn,
    without a vector of this embedder (their summary job's indexing failed or ran before an embedder was
    configured, or the turns are newer than their conversation's last version).
    Returns how many vectors it wrote; a user whose indexing fails does not stop the others (the first failure is
    raised after them)."""
    if not await vectors_available(conn):
        return 0
    await vector_center(conn, embedder)  # users whose vectors lack their compact copies are found with it
    rows = await Q.users_to_embed(conn, model_name(embedder), users, TURN_TEXT_VERSION)
    pending = [(r["tenant_id"], r["user_id"]) for r in rows]
    written, failure = 0, None
    for tenant_id, user_id in pending:
        try:
            written += await index_items(conn, tenant_id=tenant_id, user_id=user_id, embedder=embedder)
        except Exception as exc:  # a text the embedder refuses at every run must not hold back the other users
            failure = failure or exc
    if failure is not None:
        raise failure  # after the other users: the caller says what is left for the next run
    return written


async def drop_item_vector(conn: AsyncConnection[Any], *, tenant_id: str, user_id: str, item_id: int) -> None:
    """A summary refreshed in place (same item_id, new text) loses its vector: it was the old text's (and may
    encode a member that was forgotten); the next indexing embeds the new text."""
    if await vectors_available(conn):
        await Q.delete_item_embedding(conn, {"tenant_id": tenant_id, "user_id": user_id, "item_id": item_id})
