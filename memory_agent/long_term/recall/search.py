"""Recall at round start: a user's relevant items, cluster summaries, key insights of their weekly and monthly
consolidation notes, and earlier turns, as a bounded block.

Paths: full-text search ranked by BM25 over turns (with their speaker's name: the named speaker's turns first),
items, summaries and key insights → trigram fallback (CJK queries, or too few full-text hits) → vectors of turns,
items and summaries when an embedder is configured (on every recall: hybrid; or as a fallback, `vectors_always`
False) → the latest turns when nothing matched; the lists are fused by weighted reciprocal rank in one statement
(`recall_search` in sql/queries/recall.sql). A recalled turn comes with its neighbours and its date. With the stored
'english' vectors the statement is prepared once per connection and runs on a generic plan. Scope: this
conversation's turns first, the user's other conversations too when this one has few hits or the message points to
the past ("last time", "之前", …). Guardrails: a token budget for the block, a number of turns, a per-turn
character cap (block.py). Every result says where it came from (conversation + sequences, item ids, source items, a
key insight's note), so a caller can re-expand it. With an embedder, hybrid.py embeds the query beside the
statement, re-ranks full text's hits with their own vectors, and adds the hits only its vector path found. No LLM.
Measurements: docs/measurements/recall.md.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from langchain_core.embeddings import Embeddings
from psycopg import AsyncConnection, sql

from memory_agent import resources
from memory_agent.errors import InvalidInputError
from memory_agent.long_term.embeddings import model_name, vectors_available
from memory_agent.long_term.queries import QUERIES as Q
from memory_agent.long_term.recall.block import RecallHit, apply_guardrails, without_repeats
from memory_agent.long_term.recall.dated import with_date_boost
from memory_agent.long_term.recall.hybrid import (
    can_place_vector_hits,
    fused,
    query_vector,
    reranked,
    start_embedding,
    vector_only,
    with_nearest,
)
from memory_agent.long_term.recall.query_text import (
    bounded_query,
    cjk_bigrams,
    embedded_query,
    has_cjk,
    points_to_past,
    with_irregular_forms,
)
from memory_agent.long_term.recall.replies import shown_hits
from memory_agent.long_term.recall.settings import RecallSettings
from memory_agent.long_term.recall.transaction import in_recall_transaction, stored_vectors
from memory_agent.schemas.text import storable_text
from memory_agent.tracing import traced_recall

RetrievalPath = Literal["fts", "trgm", "vector", "date", "window", "summaries_only"]
SearchPath = Literal["fts", "trgm", "vector", "recent"]
ALL_PATHS: tuple[SearchPath, ...] = ("fts", "trgm", "vector", "recent")
# A search (the store, the retriever): nothing rather than the latest turns when nothing matches.
SEARCH_PATHS: tuple[SearchPath, ...] = ("fts", "trgm", "vector")


@dataclass
class RecallResult:
    """What recall returns: the hits that fit the block, and the figures round_metrics records."""

    results: list[RecallHit]
    query: str
    fts_hits: int = 0
    trgm_hits: int = 0
    vector_hits: int = 0
    retrieval_path: RetrievalPath = "window"
    used_fallback: bool = False
    user_wide: bool = False
    estimated_tokens: int = 0
    truncated: bool = False
    latency_ms: float = 0.0
    block: str = ""
    # The fused ranking before the guardrails, up to `limit`: what the block was filled from (`results` are the
    # ones that fit it). The evaluation reads @k here.
    ranked: list[RecallHit] = field(default_factory=list)

    @property
    def context_items(self) -> int:
        return len(self.results)


@functools.cache
def _statement(vectors: bool, stored: bool) -> sql.Composed:
    queries = resources.queries()
    fts = "stored" if stored else "computed"
    return sql.SQL(queries["recall_search"]).format(
        vector_hits=sql.SQL(queries["recall_vector_hits" if vectors else "recall_no_vector_hits"]),
        message_fts=sql.SQL(queries[f"recall_message_fts_{fts}"]),
        item_fts=sql.SQL(queries[f"recall_item_fts_{fts}"]),
        note_fts=sql.SQL(queries[f"recall_note_fts_{fts}"]),
        batch_fts=sql.SQL(queries[f"recall_batch_fts_{fts}"]),
        turn_context=sql.SQL(queries["recall_turn_context"]),
    )


async def _search(
    conn: AsyncConnection[Any], params: dict[str, Any], settings: RecallSettings, vectors: dict[str, Any] | None
) -> list[dict[str, Any]]:
    """One run of `recall_search`; with `vectors` (the vector path's parameters), its vector path searches all of
    the user's vectors."""
    statement = _statement(vectors is not None, stored_vectors(settings))
    return await in_recall_transaction(conn, settings, statement, {**params, **(vectors or {})})


async def _with_nearest(
    conn: AsyncConnection[Any],
    lexical: list[dict[str, Any]],
    params: dict[str, Any],
    settings: RecallSettings,
    vectors: dict[str, Any],
) -> list[dict[str, Any]]:
    """Full text's and trigrams' too few rows (`lexical`, the statement's first run) with the user's nearest
    vectors: the statement's vector path alone, fused by ranks as the statement with every path would have (its
    full text and trigrams are not run twice: hybrid.with_nearest)."""
    nearest = await _search(conn, vector_only(params, params["fused_limit"]), settings, vectors=vectors)
    return with_nearest(lexical, nearest, params["conversation_id"], params["fused_limit"])


def _retrieval_path(hits: Sequence[RecallHit]) -> RetrievalPath:
    if not hits or all(hit.paths == ["recent"] for hit in hits):
        return "window"
    found = {path for hit in hits for path in hit.paths}
    # What vectors alone found (turns, items or summaries) says `vector`, whatever its kind.
    if "vector" in found and not found & {"fts", "trgm"}:
        return "vector"
    if all(hit.kind != "turn" for hit in hits):
        return "summaries_only"
    paths: tuple[RetrievalPath, ...] = ("fts", "trgm", "vector", "date")
    # `date`: only the query's date expression found them (turns of that time sharing no word with the query).
    return next((path for path in paths if any(path in hit.paths for hit in hits)), "window")


@traced_recall
async def recall(
    conn: AsyncConnection[Any],
    *,
    tenant_id: str,
    user_id: str,
    query: str,
    conversation_id: str | None = None,
    limit: int = 10,
    as_of: datetime | None = None,
    embedder: Embeddings | None = None,
    settings: RecallSettings | None = None,
    paths: Collection[SearchPath] = ALL_PATHS,
    include_summaries: bool = True,
    now: datetime | None = None,
) -> RecallResult:
    """Recall for one user: turns of every conversation of theirs, `conversation_id` (the round's) first; `as_of`
    reads items valid then and turns stored by then; `paths` restricts the retrieval paths (one named alone always
    runs, trigrams included). Vectors run only with an `embedder` and pgvector on the server. `include_summaries`
    False leaves cluster summaries out of the results (their source items still compete). `now` (the service's
    clock, in the user's zone): a date expression in the query ranks that time's turns first (dated.py)."""
    started = time.perf_counter()
    settings = settings or RecallSettings()
    if not tenant_id or not user_id:
        raise InvalidInputError(
            "recall needs a tenant_id and a user_id (a conversation without a user has user scope 'conversation:<id>')"
        )
    if limit < 1:
        raise InvalidInputError(f"recall limit must be >= 1, got {limit}")
    unknown = set(paths) - set(ALL_PATHS)
    if unknown:
        raise InvalidInputError(f"unknown recall paths {sorted(unknown)}; choose among {list(ALL_PATHS)}")
    if query is not None and not isinstance(query, str):
        raise InvalidInputError(f"recall query must be a string, got {type(query).__name__}")
    # As the round stores a message: a NUL or a lone surrogate (PostgreSQL and UTF-8 refuse them) is replaced.
    query = bounded_query(storable_text(query or ""), settings.max_query_chars)
    if not query:
        return RecallResult(results=[], query=query, latency_ms=(time.perf_counter() - started) * 1000)
    params: dict[str, Any] = {
        "tenant_id": tenant_id,
        "user_id": user_id,
        "query": query,
        "fts_query": with_irregular_forms(query),
        "conversation_id": conversation_id,
        "as_of": as_of,
        "config": settings.text_search_config,
        "or_terms": settings.or_terms,
        "use_fts": "fts" in paths,
        "trgm_always": "trgm" in paths and "fts" not in paths,
        "trgm_fallback": "trgm" in paths,
        "cjk": has_cjk(query),
        "bigrams": cjk_bigrams(query),
        "trgm_threshold": settings.trgm_threshold,
        "min_hits": settings.min_hits,
        "past": points_to_past(query),
        "candidates": settings.candidates,
        "speaker_boost": settings.speaker_boost,
        "rrf_k": settings.rrf_k,
        "vector_weight": settings.vector_weight,
        "recent": settings.recent_turns if "recent" in paths else 0,
        # Room for the hits without_repeats drops (a turn a better hit shows as its neighbour): twice what the block
        # keeps lost nothing on LoCoMo (three times: more CPU for rows never used, docs/measurements/code.md).
        "fused_limit": max(limit, settings.max_turns) * 2,
        "neighbours_before": settings.neighbours_before,
        "neighbours_after": settings.neighbours_after,
        # What hit_from_row keeps of a text, and one more character (it then knows it cut it): no more is read.
        "text_chars": settings.max_turn_chars + 1,
        "neighbour_chars": settings.max_neighbour_chars + 1,
    }
    # With an embedder: vectors on every recall (hybrid, `vectors_always`), or as a fallback. Hybrid embeds the
    # query (tens of milliseconds for a local model, in a thread) while full text and trigrams run; when they found
    # enough, their first `rerank_hits` fused hits are re-scored with their own vectors (hybrid.reranked: BM25 and
    # cosine similarity, each normalized, in a convex combination), then, when they left places in the block, the
    # statement runs its vector path alone (all of the user's vectors) and the hits only it found join the ranking
    # on the same scale (hybrid.fused): a turn that shares no word with the query is found.
    # When they found too little (either mode), the statement's vector path runs alone and its hits are fused with
    # theirs by ranks, as the statement with every path would (hybrid.with_nearest): full text and trigrams run once.
    # A vector weight of 0 fuses nothing: then vectors are only the fallback.
    block_rows = params["fused_limit"]
    always = (settings.vectors_always and settings.vector_weight > 0) or "fts" not in paths
    wanted = embedder is not None and "vector" in paths
    embedding = None
    if embedder is not None and wanted and always:
        embedding = start_embedding(embedder, query, settings)
        params["fused_limit"] = max(params["fused_limit"], settings.rerank_hits)
        await asyncio.sleep(0)  # the embedding is handed to its thread before the statement is built and sent
    try:
        lexical = bool({"fts", "trgm"} & set(paths))
        rows = await _search(conn, params, settings, vectors=None) if lexical or not wanted else None
        enough = rows is not None and rows[0]["fts_hits"] + rows[0]["trgm_hits"] >= max(settings.min_hits, 1)
        if wanted and (always or not enough) and await vectors_available(conn):
            assert embedder is not None
            pending = embedding or embedder.aembed_query(embedded_query(query, settings.max_embedded_chars))
            vector = await query_vector(pending, embedder, optional=rows is not None)
            vectors = {
                "vector_always": always,
                "model": model_name(embedder),
                "vector_min_similarity": settings.vector_min_similarity,
                "query_vector": vector,
            }
            if vector is not None and rows is not None and enough:
                rows, scale = await reranked(conn, rows, params, vectors, settings)
                if can_place_vector_hits(rows, block_rows):
                    nearest = await _search(conn, vector_only(params, block_rows), settings, vectors=vectors)
                    rows = fused(rows, nearest, conversation_id, scale, settings.vector_weight)
            elif vector is not None and rows is not None:  # full text and trigrams found too little
                rows = await _with_nearest(conn, rows, params, settings, vectors)
            elif vector is not None:
                rows = await _search(conn, params, settings, vectors=vectors)
    finally:  # not awaited when the check failed or the server has no pgvector
        if embedding is not None and not embedding.cancel() and not embedding.cancelled():
            embedding.exception()  # done: its failure, if any, is retrieved (no one waits for it)
    if rows is None:  # vectors asked for, but the server has no pgvector
        rows = await _search(conn, params, settings, vectors=None)
    first = rows[0]
    # A hit that asks a question is shown as its reply (replies.py), once full text and vectors have ranked it.
    found = shown_hits(rows, settings)
    if now is not None:
        found = await with_date_boost(conn, found, params, settings, now)
    hits = without_repeats(found)
    if not include_summaries:  # raw items and turns only (a tenant over its cost ceiling); the counts stay the search's
        hits = [hit for hit in hits if hit.kind != "summary"]
    kept, block, tokens, truncated = apply_guardrails(
        hits, limit=limit, max_tokens=settings.max_tokens, max_turns=settings.max_turns
    )
    return RecallResult(
        results=kept,
        query=query,
        fts_hits=first["fts_hits"],
        trgm_hits=first["trgm_hits"],
        vector_hits=first["vector_hits"],
        retrieval_path=_retrieval_path(kept),
        used_fallback=bool(first["trgm_ran"]) or first["recent_hits"] > 0 or (first["vector_hits"] > 0 and not always),
        user_wide=bool(first["user_wide"]),
        estimated_tokens=tokens,
        truncated=truncated,
        latency_ms=(time.perf_counter() - started) * 1000,
        block=block,
        ranked=hits[:limit],
    )


async def source_turns(
    conn: AsyncConnection[Any], hit: RecallHit, *, tenant_id: str, user_id: str
) -> list[dict[str, Any]]:
    """The stored turns behind a hit (its provenance re-expanded), only ever the user's own."""
    if not hit.sources:
        return []
    return await Q.recall_source_turns(
        conn,
        {
            "tenant_id": tenant_id,
            "user_id": user_id,
            "conversation_ids": [c for c, _ in hit.sources],
            "sequences": [s for _, s in hit.sources],
        },
    )
