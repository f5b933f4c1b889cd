"""Reading consolidation notes: a period's notes (what `memory-agent summaries` shows) and the keyword search
over key insights (the full-text index of sql/migrations/0010_consolidation.sql) that recall's tiers can call."""

from __future__ import annotations

from typing import Any

import psycopg

from memory_agent.consolidation.periods import PERIODS
from memory_agent.consolidation.queries import ConsolidationQueries
from memory_agent.errors import InvalidInputError
from memory_agent.long_term.scope import Row, check_identity


async def list_notes(
    conn: psycopg.AsyncConnection[Any],
    period: str,
    *,
    tenant_id: str | None = None,
    user_id: str | None = None,
    limit: int = 50,
) -> list[Row]:
    """Notes of `period`, newest first (every user unless one is named)."""
    if period not in PERIODS:
        raise InvalidInputError(f"period must be one of {', '.join(PERIODS)}, got {period!r}")
    params = {"period": period, "tenant_id": tenant_id, "user_id": user_id, "limit": limit}
    return await ConsolidationQueries.list_notes(conn, params)


async def search_key_insights(
    conn: psycopg.AsyncConnection[Any], tenant_id: str, user_id: str, words: str, *, limit: int = 10
) -> list[Row]:
    """The user's notes whose key insights contain every word of `words`, newest first."""
    check_identity(tenant_id, user_id)
    if not isinstance(words, str) or not words.strip():
        raise InvalidInputError("words must be a non-empty string")
    return await ConsolidationQueries.search_key_insights(
        conn, {"tenant_id": tenant_id, "user_id": user_id}, words, limit
    )
