"""Recall's vectors beside full text (search.py runs them): the query's embedding, started at once and bounded in
text and time, whose failure costs the vectors and not the recall; the re-ranking of full text's first hits with
their own vectors (`recall_vector_distances`: a lookup a hit), and the hits only the vector path found (the
user's nearest turns, items and summaries) added to that ranking; when full text found too little, the vector
path's hits fused with its few by ranks (`with_nearest`)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from dataclasses import dataclass
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


@dataclass(frozen=True)
class Scale:
    """What a hit's scores are measured against in the fusion of full text with vectors: the best BM25 score of
    the re-ranked hits, the lowest and highest similarity among their vectors, and the least range their
    similarities are placed over (`spread`)."""

    best_bm25: float
    low: float
    high: float
    spread: float = 0.0

    def lexical(self, bm25: float | None) -> float:
        """A BM25 score as a share of the best one (0 without one)."""
        return bm25 / self.best_bm25 if bm25 is not None and self.best_bm25 > 0 else 0.0

    def vector(self, similarity: float | None) -> float:
        """A similarity placed between the lowest (0) and the highest (1) of the re-ranked hits' vectors, over
        `spread` at least: vectors closer together than that say little about which hit is better, and their
        scores stay as close (min-max alone placed a few hundredths of similarity as far apart as BM25's whole range). 1 when they are all equal
        without a spread; 0 without a vector."""
        if similarity is None:
            return 0.0
        width = max(self.high - self.low, self.spread)
        if width <= 0:
            return 1.0 if similarity >= self.high else 0.0
        return min(1.0, max(0.0, (similarity - self.low) / width))


async def reranked(
    conn: AsyncConnection[Any],
    rows: list[dict[str, Any]],
    scope: dict[str, Any],
    vector: dict[str, Any],
    settings: RecallSettings,
) -> tuple[list[dict[str, Any]], Scale | None]:
    """`rows` (full text's and trigrams' fused hits) re-scored with the query's vector: the turn or item vector of
    each of the first `rerank_hits` is read (`recall_vector_distances`: a lookup a hit, none of the user's other
    vectors), and each of them scores the convex combination `(1 − vector_weight) × bm25 / best bm25 +
    vector_weight × (similarity − lowest) / max(highest − lowest, vector_min_spread)` of its scores, each
    normalized over these hits (min-max: what the two scores say, not only their ranks; a hit without a BM25 score, found by trigrams, has
    its share of the best fused score instead). The hits after the first `rerank_hits` follow them in their order.
    Returns the rows and the scale a hit only the vector path found is scored on (None when none of the hits has
    a vector: the rows are returned as they were). `scope`: the user's `tenant_id` and `user_id`; `vector`: the
    query's `query_vector` and the embedder's `model`."""
    first = rows[: settings.rerank_hits]  # the same hits whatever the caller's limit (the statement returns more)
    turns = [(row["conversation_id"], row["sequence_number"]) for row in first if row["kind"] == "turn"]
    items = [row["item_id"] for row in first if row["kind"] == "item"]
    if not turns and not items:
        return rows, None
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
    if not found:
        return rows, None
    similarity = {_key(near): 1 - near["distance"] for near in found}
    bm25 = [row["bm25"] for row in first if row["bm25"] is not None]
    # A turn or item without a vector above the floor lies below it: the scale starts at the floor then, so that
    # one vector found among such hits counts fully (not min = max, which would count none).
    below = len(found) < len(turns) + len(items)
    low = settings.vector_min_similarity if below else min(similarity.values())
    scale = Scale(max(bm25, default=0.0), low, max(similarity.values()), settings.vector_min_spread)
    best = max((row["score"] for row in first), default=0.0)
    weight = settings.vector_weight
    rescored = []
    for index, row in enumerate(rows):
        if index >= len(first):  # after the re-ranked hits, in their order (their fused scores are below 1)
            rescored.append({**row, "score": row["score"] - 1, "vector_hits": len(found)})
            continue
        near = similarity.get(_key(row))
        lexical = scale.lexical(row["bm25"]) if row["bm25"] is not None else row["score"] / best if best else 0.0
        paths = sorted([*row["paths"], "vector"]) if near is not None else row["paths"]
        score = (1 - weight) * lexical + weight * scale.vector(near)
        rescored.append({**row, "score": score, "paths": paths, "similarity": near, "vector_hits": len(found)})
    return sorted(rescored, key=_row_order), scale


def can_place_vector_hits(rows: list[dict[str, Any]], block_rows: int) -> bool:
    """Whether the pass over all of the user's vectors runs: when full text and trigrams returned fewer hits than
    the rows the block and the ranking use (`block_rows`). A hit only vectors find scores at most `vector_weight`
    (no BM25 share) and could outrank full text's, but running the pass on every recall gained next to nothing on
    the LoCoMo development split for much more of the server's CPU a round (docs/measurements/code.md)."""
    return sum(1 for row in rows if row["kind"]) < block_rows


def vector_only(params: dict[str, Any], rows: int) -> dict[str, Any]:
    """`recall_search`'s parameters for its vector path alone (full text, trigrams and the latest turns off): the
    user's nearest turns, items and summaries ranked among `candidates`, the first `rows` of them with their rows
    (text, neighbours, date, similarity); each row costs its neighbours' lookups."""
    return {**params, "use_fts": False, "trgm_always": False, "trgm_fallback": False, "recent": 0, "fused_limit": rows}


def fused(
    lexical: list[dict[str, Any]],
    nearest: list[dict[str, Any]],
    conversation_id: str | None,
    scale: Scale | None,
    weight: float,
) -> list[dict[str, Any]]:
    """Full text's and trigrams' rows (`lexical`, re-scored with their own vectors on `scale`) and the hits only
    the vector path found (`nearest`) in one ranking: such a hit scores `weight` × its similarity on `scale` (it has
    no BM25 share); without a scale (no re-ranked hit had a vector), `weight / (rrf_k + rank)` among all of the
    user's vectors, as the statement scored it. Turns of other conversations that vectors found are kept only when
    full text's scope was the whole user (its `user_wide`)."""
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
            score = row["score"] if scale is None else weight * scale.vector(row["similarity"])
            merged[_key(row)] = {**row, **{k: first[k] for k in COUNTS}, **counts, "score": score}
    rows = sorted(merged.values(), key=_row_order)
    return rows or [{**first, **counts}]


def with_nearest(
    lexical: list[dict[str, Any]], nearest: list[dict[str, Any]], conversation_id: str | None, limit: int
) -> list[dict[str, Any]]:
    """`recall_search` with every path, vectors included, from its two parts when full text and trigrams found
    too little: their rows (`lexical`, run without vectors, all of them: fewer than the limit) and the vector
    path's (`nearest`, run alone: its first `limit`, the only ones that can make the limit). A hit both found
    scores the sum of its reciprocal ranks (and has both paths); turns of other conversations are kept only when
    full text's scope was the whole user; the latest turns (path `recent`, the statement's answer when nothing
    matched) only when vectors found nothing either. Rows in the statement's order, at most `limit`."""
    first = lexical[0]
    found = nearest[0]["vector_hits"] if nearest else 0
    counts = {"vector_hits": found, "recent_hits": first["recent_hits"] if not found else 0}
    merged: dict[tuple[Any, ...], dict[str, Any]] = {}
    for row in lexical:
        if row["kind"] and not (found and row["paths"] == ["recent"]):
            merged[_key(row)] = {**row, **counts}
    for row in nearest:
        if not row["kind"]:
            continue
        if row["kind"] == "turn" and not first["user_wide"] and row["conversation_id"] != conversation_id:
            continue
        both = merged.get(_key(row))
        if both is None:
            merged[_key(row)] = {**row, **{k: first[k] for k in COUNTS}, **counts}
        else:
            paths = sorted({*both["paths"], *row["paths"]})
            score = both["score"] + row["score"]
            merged[_key(row)] = {**both, "score": score, "paths": paths, "similarity": row["similarity"]}
    rows = sorted(merged.values(), key=_row_order)[:limit]
    return rows or [{**first, **counts, "kind": None}]


# The figures every row of `recall_search` repeats (its `counts`): full text's, for the fused rows too.
COUNTS = ("fts_hits", "trgm_hits", "recent_hits", "trgm_ran", "user_wide")
