"""Recall at round start, as the round sees it: the query (the round's newest user message), the recalled
block of a round whose user is named (search.py retrieves it, in one statement, never through a
model), and what round_metrics records of it.

A round without a user (its scope is the conversation itself, 'conversation:<thread id>') never recalls: there
is no one whose other conversations could be searched. A recall that fails never fails the round: the round
runs without the block and its metrics row says error_stage 'retrieval'.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from langchain_core.embeddings import Embeddings

from memory_agent.db.backend import MemoryBackend
from memory_agent.long_term import ledger
from memory_agent.long_term.recall.block import estimate_tokens, format_block
from memory_agent.long_term.recall.search import RecallResult, recall
from memory_agent.long_term.recall.settings import RecallSettings
from memory_agent.schemas.keys import ConversationKey, default_user_id
from memory_agent.schemas.recall import absent_recall_metrics
from memory_agent.schemas.recall import recall_query as recall_query

logger = logging.getLogger("memory_agent")


@dataclass
class RoundRecall:
    """What recall gave a round: its result (None when it did not run or failed) and the failure."""

    result: RecallResult | None = None
    error: str | None = None
    latency_ms: float | None = None
    status: str | None = None  # 'over_budget': the tenant's cost ceiling left the summaries out

    @property
    def block(self) -> str:
        return self.result.block if self.result is not None else ""

    def without_window(self, conversation_id: str, gap_start_sequence: int | None) -> RoundRecall:
        """Without the turns the model gets in the round's own context (the gap): they would be there twice."""
        result = self.result
        if result is None or gap_start_sequence is None:
            return self
        in_gap = [
            hit
            for hit in result.results
            if hit.kind == "turn" and hit.conversation_id == conversation_id and hit.sequences[0] >= gap_start_sequence
        ]
        if not in_gap:
            return self
        # A subset of hits that held the guardrails holds them too: only the block is written again.
        rest = [hit for hit in result.results if hit not in in_gap]
        block = format_block(rest)
        trimmed = replace(result, results=rest, block=block, estimated_tokens=estimate_tokens(block))
        return RoundRecall(trimmed, self.error, self.latency_ms, self.status)

    def metrics(self, query: str) -> dict[str, Any]:
        """The round_metrics fields of recall (all null when the round did not recall)."""
        result = self.result
        if result is None:
            return absent_recall_metrics(query if self.error is not None else None, self.latency_ms)
        return {
            "query": result.query,
            "fts_hits": result.fts_hits,
            "trgm_hits": result.trgm_hits,
            "used_fallback": result.used_fallback,
            "recall_path": result.retrieval_path,
            "context_items": result.context_items,
            "estimated_tokens": result.estimated_tokens,
            "recall_truncated": result.truncated,
            "latency_retrieval_ms": self.latency_ms,
            "recall_status": self.status,
            # What the model was given, for `memory-agent at`: the block as injected, each hit's provenance.
            "recall_block": result.block or None,
            "recall_hits": [hit.provenance() for hit in result.results] if result.results else None,
        }


def recalls(key: ConversationKey, query: str, settings: RecallSettings | None) -> bool:
    """Whether a round of `key` recalls: recall is on, the round has a query, and a user of its own (a
    conversation's own scope has no other conversations to recall from)."""
    return settings is not None and bool(query) and key.user_id != default_user_id(key.conversation_id)


async def round_recall(
    backend: MemoryBackend,
    key: ConversationKey,
    query: str,
    settings: RecallSettings | None,
    *,
    cost_ceiling: float | None = None,
    now: datetime | None = None,
    embedder: Embeddings | None = None,
) -> RoundRecall:
    """Recall for a round of `key`'s user on a connection of its own; never raises (but for cancellation).
    With an `embedder`, the query is embedded through its async method (a CPU-bound model runs in a thread) beside
    full text, and the user's nearest vectors are fused with full text's hits (search.recall).
    With a `cost_ceiling` the tenant's month has reached (at `now`, default the current time), recall returns
    raw items and turns only, no cluster summaries: status 'over_budget', and a WARNING."""
    if not recalls(key, query, settings):
        return RoundRecall()
    started = time.perf_counter()
    try:
        async with backend.connection() as conn:
            budget = await ledger.tenant_budget(conn, key.tenant_id, cost_ceiling, now or datetime.now(UTC))
            if budget.over:
                logger.warning("%s: recall returns raw items, no summaries", budget.describe())
            result = await recall(
                conn,
                tenant_id=key.tenant_id,
                user_id=key.user_id,
                query=query,
                conversation_id=key.conversation_id,
                settings=settings,
                include_summaries=not budget.over,
                embedder=embedder,
                now=now,
            )
    except Exception as exc:
        logger.warning("Recall failed for a round of %s; the round runs without it: %s", key.conversation_id, exc)
        return RoundRecall(
            error=f"{type(exc).__name__}: {exc}"[:2000], latency_ms=(time.perf_counter() - started) * 1000
        )
    status = "over_budget" if budget.over else None
    return RoundRecall(result, None, (time.perf_counter() - started) * 1000, status)


@dataclass(frozen=True)
class LongTermRecall:
    """Recall at round start as the service hands it to the round (schemas.recall.RoundRecaller): the user's
    long-term memory and other conversations, within the tenant's cost ceiling."""

    backend: MemoryBackend
    settings: RecallSettings | None  # None: recall is off
    cost_ceiling: float | None = None
    embedder: Embeddings | None = None

    def recalls(self, key: ConversationKey, query: str) -> bool:
        return recalls(key, query, self.settings)

    async def __call__(self, key: ConversationKey, query: str, now: datetime) -> RoundRecall:
        return await round_recall(
            self.backend, key, query, self.settings, cost_ceiling=self.cost_ceiling, now=now, embedder=self.embedder
        )
