"""A user's memory as one JSON document (the right of access; moving a user to another database or tenant).

The document holds, for one (tenant, user): the conversations with their messages and memory versions (completed
and failed), the long-term items (every version, with its validity and sources), the consolidation notes, batch
summaries and consolidation schedules, each with its times. Everything is read in one repeatable-read snapshot, in
key order, and written as canonical JSON (sorted keys, UTC times, no time of export): exporting twice with nothing
changed gives the same bytes. Vectors, round metrics and the cost ledger are not part of it (recomputed, or
operational records). `FORMAT` and `SCHEMA_VERSION` say how to read it; load.py writes it back.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import UTC, date, datetime
from typing import Any

import psycopg
from psycopg import pq

from memory_agent.long_term.tenancy import set_tenant
from memory_agent.transfer.queries import QUERIES as Q
from memory_agent.transfer.queries import SECTIONS as SECTIONS

FORMAT = "memory_agent.user_memory"
SCHEMA_VERSION = 1

# The document's lists: (its key, the query that reads it).

# The fields of each section's records: the columns its query reads (the batch summary's own id is not needed to
# write it back: nothing refers to it).
COLUMNS: dict[str, Sequence[str]] = {
    "conversations": ("conversation_id", "round_count", "created_at", "updated_at"),
    "messages": ("conversation_id", "sequence_number", "round_number", "role", "content", "message", "created_at"),
    "memory_versions": [
        "memory_id",
        "conversation_id",
        "memory_text",
        "start_sequence",
        "end_sequence",
        "base_memory_id",
        "status",
        "created_at",
        "generation_time_ms",
        "error",
        "model_name",
        "input_tokens",
        "output_tokens",
        "summarized_start",
        "summarized_end",
        "attempts",
        "started_at",
        "finished_at",
        "items",
    ],
    "items": [
        "item_id",
        "project",
        "environment",
        "item_type",
        "key",
        "value_slot",
        "content",
        "content_norm",
        "importance",
        "confidence",
        "valid_from",
        "valid_to",
        "is_summary",
        "source_item_ids",
        "created_at",
        "updated_at",
        "store_namespace",
        "value",
    ],
    "item_sources": ("item_id", "conversation_id", "memory_id", "sequence_number", "created_at"),
    "consolidation_notes": [
        "note_id",
        "period",
        "period_start",
        "period_end",
        "content",
        "consolidated",
        "insights",
        "key_insights",
        "key_insights_text",
        "notes_consolidated",
        "model",
        "input_tokens",
        "output_tokens",
        "compacted_at",
        "created_at",
        "source_item_ids",
        "source_memory_ids",
        "source_note_ids",
        "source_conversation_ids",
    ],
    "batch_summaries": [
        "project",
        "environment",
        "content",
        "first_item_id",
        "summarized_ids",
        "summarized_from",
        "summarized_until",
        "model",
        "input_tokens",
        "output_tokens",
        "created_at",
        "source_conversation_ids",
    ],
    "consolidation_schedules": ("job", "schedule", "interval_days", "covered_until", "last_run", "next_run"),
}


def jsonable(value: Any) -> Any:
    """A value of a row as the document writes it: times in UTC, ISO 8601; days ISO 8601."""
    if isinstance(value, datetime):
        return value.astimezone(UTC).isoformat().replace("+00:00", "Z")
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, Mapping):
        return {str(key): jsonable(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(item) for item in value]
    return value


async def read_user(conn: psycopg.AsyncConnection[Any], tenant_id: str, user_id: str) -> dict[str, Any]:
    """The document of (tenant_id, user_id), read in one snapshot on `conn` (a transaction of its own)."""
    who = {"tenant_id": tenant_id, "user_id": user_id}
    document: dict[str, Any] = {"format": FORMAT, "schema_version": SCHEMA_VERSION, **who}
    fresh = conn.info.transaction_status == pq.TransactionStatus.IDLE  # else a transaction the pool opened
    async with conn.transaction():
        if fresh:
            await Q.snapshot_reads(conn)
        await set_tenant(conn, tenant_id)  # row-level security: the tenant's rows
        for section, name in SECTIONS:
            document[section] = [jsonable(dict(row)) for row in await Q.export_section(conn, name, who)]
    return document


def dumps(document: Mapping[str, Any]) -> bytes:
    """The canonical bytes of a document: sorted keys, no spaces, UTF-8, one trailing newline."""
    return (json.dumps(document, sort_keys=True, ensure_ascii=False, separators=(",", ":")) + "\n").encode()
