"""Recall's vectors beside full text (search.py runs them): the query's embedding, started at once and bounded in
text and time, whose failure costs the vectors and not the recall; the re-ranking of full text's first hits with
their own vectors (`recall_vector_distances`: a lookup a hit), and the hits only the vector path found (the
user's nearest turns, items and summaries) added to that ranking."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from typing import Any

from langchain_core.embeddings import Embeddings
from psycopg import AsyncConnection

from memory_agent.long_term.embeddings import model_name, to_vector_literal
from memory_agent.long_term.recall.query_text import embedded_query
from memory_agent.long_term.recall.settings import RecallSettings
from memory_agent.long_term.recall.transaction import in_recall_transaction

logger = logging.getLogger("memory_agent")


def start_embedding(embedder: Embeddings, query: str, settings: RecallSettings) -> asyncio.Future[list[float]]:
    """The query's embedding, started now (it runs beside full text), given up past `embedding_timeout_s`."""
    text = embedded_query(query, settings.max_embedded_chars)
    return asyncio.ensure_future(_timed(embedder.aembed_query(text), settings.embedding_timeout_s))


async def _timed(embedding: Awaitable[list[float]], timeout_s: float) -> list[float]:
    """`embedding`, or TimeoutError when it takes longer than `timeout_s` (started at once beside full text)."""
    try:
        async with asyncio.timeout(timeout_s):  # no task of its own: the embedding starts with this one's first step
            return await embedding
    except TimeoutError:
        raise TimeoutError(f"the query's embedding took longer than {timeout_s} s") from None


async def query_vector(pending: Awaitable[list[float]], embedder: Embeddings, *, optional: bool) -> str | None:
    """The query's vector as pgvector's text. An embedder that fails (a remote API down, a vector pgvector would
    refuse) or is late (past `embedding_timeout_s`) costs the vectors, not the recall, when full text and trigrams
    have run (`optional`): a WARNING, and None. Alone (the vector path measured by itself), its error is recall's."""
    try:
        return to_vector_literal(await pending)
    except Exception as exc:
        if not optional:
            raise
        logger.warning(
            "Recall runs without vectors: the embedder %s failed (%s: %s)",
            model_name(embedder),
            type(exc).__name__,
            str(exc)[:500],
        )
        return None


def _row_order(row: dict[str, Any]) -> tuple[Any, ...]:
    """`recall_search`'s order of its rows: score, summaries first among equals, kind, sequence (nulls last)."""
    sequence = row["sequence_number"]
    return (-row["score"], {True: 0, False: 1}.get(row["is_summary"], 2), row["kind"], sequence is None, sequence or 0)


def _key(row: dict[str, Any]) -> tuple[Any, ...]:
    return row["kind"], row["conversation_id"], row["sequence_number"], row["item_id"]


async def reranked(
    conn: AsyncConnection[Any],
    rows: list[dict[str, Any]],
    scope: dict[str, Any],
    vector: dict[str, Any],
    settings: RecallSettings,
) -> list[dict[str, Any]]:
    """`rows` (full text's and trigrams' fused hits) re-ranked with the query's vector: the turn or item vector of
    each of the first `rerank_hits` is read (`recall_vector_distances`: a lookup a hit, none of the user's other
    vectors), and a hit's rank by cosine distance among them adds `vector_weight / (rrf_k + rank)` to its score,
    as a vector rank does in `recall_search`'s fusion. Key insights, batch summaries and the hits after the first
    `rerank_hits` keep their scores. `scope`: the user's `tenant_id` and `user_id`; `vector`: the query's
    `query_vector` and the embedder's `model`."""
    first = rows[: settings.rerank_hits]  # the same hits whatever the caller's limit (the statement returns more)
    turns = [(row["conversation_id"], row["sequence_number"]) for row in first if row["kind"] == "turn"]
    items = [row["item_id"] for row in first if row["kind"] == "item"]
    if not turns and not items:
        return rows
    found = await in_recall_transaction(
        conn,
        settings,
        "recall_vector_distances",
        {
            "tenant_id": scope["tenant_id"],
            "user_id": scope["user_id"],
            "conversation_ids": [conversation for conversation, _ in turns],
            "sequences": [sequence for _, sequence in turns],
            "item_ids": items,
            "model": vector["model"],
            "query_vector": vector["query_vector"],
            "vector_min_similarity": settings.vector_min_similarity,
        },
    )
    # Nearest first; among equal distances turns before items, as the vector path ranks them.
    found.sort(key=lambda near: (near["distance"], near["kind"] != "turn"))
    rank_of = {_key(near): rank for rank, near in enumerate(found, 1)}
    rescored = []
    for row in rows:
        rank = rank_of.get(_key(row))
        if rank is not None:
            score = row["score"] + settings.vector_weight / (settings.rrf_k + rank)
            row = {**row, "score": score, "paths": sorted([*row["paths"], "vector"])}
        rescored.append({**row, "vector_hits": len(found)})
    return sorted(rescored, key=_row_order)


def can_place_vector_hits(rows: list[dict[str, Any]], block_rows: int, settings: RecallSettings) -> bool:
    """Whether a hit only the vector path finds could rank among the first `block_rows`: a full-text or trigram
    hit scores at least `1 / (rrf_k + candidates)`, a hit of vectors alone at most `vector_weight / (rrf_k + 1)`,
    so with the defaults (0.5 / 61 < 1 / 110) such a hit only fills places full text left empty, and the pass over
    all of the user's vectors (docs/measurements/code.md) runs only when there are some."""
    lexical = sum(1 for row in rows if row["kind"])
    below = settings.vector_weight / (settings.rrf_k + 1) < 1 / (settings.rrf_k + settings.candidates)
    return lexical < block_rows or not below


def vector_only(params: dict[str, Any], rows: int) -> dict[str, Any]:
    """`recall_search`'s parameters for its vector path alone (full text, trigrams and the latest turns off): the
    user's nearest turns, items and summaries ranked among `candidates`, the first `rows` of them with their rows
    (text, neighbours, date). A hit only vectors found scores at most `vector_weight / 61`, under the 10th of full
    text's: only the nearest few can reach the block, and each row costs its neighbours' lookups."""
    return {**params, "use_fts": False, "trgm_always": False, "trgm_fallback": False, "recent": 0, "fused_limit": rows}


def fused(
    lexical: list[dict[str, Any]], nearest: list[dict[str, Any]], conversation_id: str | None
) -> list[dict[str, Any]]:
    """Full text's and trigrams' fused rows (`lexical`, re-ranked by their own vectors) and the hits only the
    vector path found (`nearest`, scored `vector_weight / (rrf_k + rank)` among all of the user's vectors by the
    same statement) in one ranking. Turns of other conversations that vectors found are kept only when full text's
    scope was the whole user (its `user_wide`)."""
    first = lexical[0]
    user_wide = bool(first["user_wide"])
    counts = {"vector_hits": max(first["vector_hits"], nearest[0]["vector_hits"] if nearest else 0)}
    merged: dict[tuple[Any, ...], dict[str, Any]] = {}
    for row in lexical:
        if row["kind"]:
            merged[_key(row)] = {**row, **counts}
    for row in nearest:
        if not row["kind"]:
            continue
        if row["kind"] == "turn" and not user_wide and row["conversation_id"] != conversation_id:
            continue
        if _key(row) not in merged:  # full text's hits have their vector score from their own vector (reranked)
            merged[_key(row)] = {**row, **{k: first[k] for k in COUNTS}, **counts}
    rows = sorted(merged.values(), key=_row_order)
    return rows or [{**first, **counts}]


# The figures every row of `recall_search` repeats (its `counts`): full text's, for the fused rows too.
COUNTS = ("fts_hits", "trgm_hits", "recent_hits", "trgm_ran", "user_wide")
