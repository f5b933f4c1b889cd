"""SummaryQueries: the statements of the summary job (pick up, read the window, complete or fail a version), the
only code of summarize/ that names statements. Built on a Connector (db/connector.py runs them)."""

from __future__ import annotations

from typing import Any

import psycopg

from memory_agent.db.connector import Connector, Row
from memory_agent.schemas.started import StartedSummary


class SummaryQueries:
    """The summary job's statements on `connector`: one method per operation."""

    def __init__(self, connector: Connector) -> None:
        self.connector = connector

    async def start_memory(self, memory_id: int, *, user_id: str) -> StartedSummary | None:
        """Pick up a `processing` row: (the row with its base memory's text and end, the messages it summarizes,
        oldest first), in one statement; None when it is no longer processing."""
        rows = await self.connector.fetch_all("start_memory", {"user_id": user_id, "memory_id": memory_id})
        if not rows:
            return None
        return rows[0], [row for row in rows if row["sequence_number"] is not None]

    async def complete_memory(
        self,
        conn: psycopg.AsyncConnection[Row] | None,
        *,
        user_id: str,
        tenant_id: str,
        conversation_id: str,
        calls: dict[str, Any] | None = None,
        **fields: Any,
    ) -> bool:
        """Record a finished summary and the model calls made for it (`calls`: ledger.call_params) in `conn`'s
        transaction (None: one statement of its own), holding its conversation against erasure and naming the
        tenant for row-level security until commit; False when the conversation is gone or the row was
        reclaimed (nothing written)."""
        fields.setdefault("items", None)
        params = {**fields, "user_id": user_id, "tenant_id": tenant_id, "conversation_id": conversation_id}
        params["now"] = calls["now"] if calls else None
        params["calls"] = calls["calls"] if calls else None
        row = await self.connector.fetch_one("complete_memory", params, conn=conn)
        return row is not None and row["memory_id"] is not None

    async def fail_memory(self, *, user_id: str, **fields: Any) -> bool:
        return await self.connector.fetch_one("fail_memory", {**fields, "user_id": user_id}) is not None
