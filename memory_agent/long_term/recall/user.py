"""Recall for a named user outside a round (LongTermMemory.recall: memory.long_term.recall, the HTTP route and
the retriever): on a connection of its own, in the tenant's transaction."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from langchain_core.embeddings import Embeddings

from memory_agent.long_term.recall.search import ALL_PATHS, SEARCH_PATHS, RecallResult, recall
from memory_agent.long_term.recall.settings import RecallSettings
from memory_agent.long_term.tenancy import tenant_transaction

if TYPE_CHECKING:
    from memory_agent.db.connector import Connector


async def user_recall(
    backend: Connector,
    *,
    tenant_id: str,
    user_id: str,
    query: str,
    settings: RecallSettings,
    embedder: Embeddings | None,
    limit: int = 10,
    as_of: datetime | None = None,
    recent_fallback: bool = True,
    now: datetime | None = None,
) -> RecallResult:
    """Recall across every conversation and long-term item of the user; `recent_fallback` False gives nothing
    (rather than the latest turns) when nothing matches: a search. `now`: the clock's time, for a date expression
    in the query (search.recall)."""
    # In the tenant's transaction: a role bound by row-level security reads the tenant's rows only (it would
    # otherwise hide every item and note of the user, and recall would find turns only).
    async with backend.session() as conn, tenant_transaction(conn, tenant_id):
        return await recall(
            conn,
            tenant_id=tenant_id,
            user_id=user_id,
            query=query,
            limit=limit,
            as_of=as_of,
            settings=settings,
            embedder=embedder,
            paths=ALL_PATHS if recent_fallback else SEARCH_PATHS,
            now=now,
        )
