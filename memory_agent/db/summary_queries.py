"""SummaryQueries: the statements of the summary job (pick up, read the window, complete or fail a version) and
the reads and deletes of a conversation's versions."""

from __future__ import annotations

from typing import Any

import psycopg

from memory_agent.db.connector import Connector, Row
from memory_agent.schemas import MemoryRecord

# A `processing` row picked up and what its summary reads: (the row with its base memory's text and end, the
# messages it summarizes, oldest first). start_memory's answer, or the claiming round's (picked_up_by_claim).
StartedSummary = tuple[Row, list[Row]]


def picked_up_by_claim(
    claimed: Row,
    *,
    memory_id: int,
    tenant_id: str,
    user_id: str,
    conversation_id: str,
    start_sequence: int,
    end_sequence: int,
    base_memory_id: int | None,
) -> StartedSummary:
    """What start_memory would have answered, from the round's metrics statement that claimed the row with
    `pick_up` (end_round: base_memory_text, base_end_sequence, picked_sequences, picked_messages)."""
    row = {
        "memory_id": memory_id,
        "user_id": user_id,
        "tenant_id": tenant_id,
        "conversation_id": conversation_id,
        "start_sequence": start_sequence,
        "end_sequence": end_sequence,
        "base_memory_id": base_memory_id,
        "attempts": 1,
        "base_memory_text": claimed["base_memory_text"],
        "base_end_sequence": claimed["base_end_sequence"],
    }
    sequences, messages = claimed["picked_sequences"] or [], claimed["picked_messages"] or []
    return row, [{"sequence_number": n, "message": m} for n, m in zip(sequences, messages, strict=True)]


class SummaryQueries(Connector):
    # ------------------------------------------------------------------ summarization

    async def start_memory(self, memory_id: int, *, user_id: str) -> StartedSummary | None:
        """Pick up a `processing` row: (the row with its base memory's text and end, the messages it summarizes,
        oldest first), in one statement; None when it is no longer processing."""
        rows = await self.fetch_all("start_memory", {"user_id": user_id, "memory_id": memory_id})
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
        row = await self.fetch_one("complete_memory", params, conn=conn)
        return row is not None and row["memory_id"] is not None

    async def fail_memory(self, *, user_id: str, **fields: Any) -> bool:
        return await self.fetch_one("fail_memory", {**fields, "user_id": user_id}) is not None

    # ------------------------------------------------------------------ reading

    async def get_memory(self, memory_id: int, *, user_id: str) -> MemoryRecord | None:
        row = await self.fetch_one("get_memory", {"user_id": user_id, "memory_id": memory_id})
        return MemoryRecord(**row) if row else None

    async def list_memory(self, conversation_id: str, *, user_id: str) -> list[MemoryRecord]:
        rows = await self.fetch_all("list_memory", {"user_id": user_id, "conversation_id": conversation_id})
        return [MemoryRecord(**row) for row in rows]

    async def last_sequence(self, conversation_id: str, *, user_id: str) -> int | None:
        row = await self.fetch_one("last_sequence", {"user_id": user_id, "conversation_id": conversation_id})
        return row["last_sequence"] if row else None
