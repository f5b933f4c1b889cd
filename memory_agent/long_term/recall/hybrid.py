"""Recall's vectors beside full text (search.py runs them): the query's embedding, started at once and bounded in
text and time, whose failure costs the vectors and not the recall, and the fusion of the vector path's hits (the
user's nearest turns, items and summaries) with full text's and trigrams'."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from typing import Any

from langchain_core.embeddings import Embeddings

from memory_agent.long_term.embeddings import model_name, to_vector_literal
from memory_agent.long_term.recall.query_text import embedded_query
from memory_agent.long_term.recall.settings import RecallSettings

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


def vector_only(params: dict[str, Any], settings: RecallSettings) -> dict[str, Any]:
    """`recall_search`'s parameters for its vector path alone (full text, trigrams and the latest turns off): the
    user's nearest turns, items and summaries, `candidates` of them, each with its row (text, neighbours, date)."""
    return {
        **params,
        "use_fts": False,
        "trgm_always": False,
        "trgm_fallback": False,
        "recent": 0,
        "fused_limit": settings.candidates,
    }


def fused(
    lexical: list[dict[str, Any]], nearest: list[dict[str, Any]], conversation_id: str | None
) -> list[dict[str, Any]]:
    """Full text's and trigrams' fused rows (`lexical`) and the vector path's (`nearest`, scored
    `vector_weight / (rrf_k + rank)` by the same statement) fused as `recall_search` fuses its paths: a hit on both
    adds the two scores, a hit of one keeps its own. Turns of other conversations that vectors found are kept only
    when full text's scope was the whole user (its `user_wide`)."""
    first = lexical[0]
    user_wide = bool(first["user_wide"])
    counts = {
        "vector_hits": nearest[0]["vector_hits"] if nearest else 0,
    }
    merged: dict[tuple[Any, ...], dict[str, Any]] = {}
    for row in lexical:
        if row["kind"]:
            merged[_key(row)] = {**row, **counts}
    for row in nearest:
        if not row["kind"]:
            continue
        if row["kind"] == "turn" and not user_wide and row["conversation_id"] != conversation_id:
            continue
        known = merged.get(_key(row))
        if known is None:
            merged[_key(row)] = {**row, **{k: first[k] for k in COUNTS}, **counts}
        else:
            paths = sorted({*known["paths"], *row["paths"]})
            merged[_key(row)] = {**known, "score": known["score"] + row["score"], "paths": paths}
    rows = sorted(merged.values(), key=_row_order)
    return rows or [{**first, **counts}]


# The figures every row of `recall_search` repeats (its `counts`): full text's, for the fused rows too.
COUNTS = ("fts_hits", "trgm_hits", "recent_hits", "trgm_ran", "user_wide")
