"""Writing a LoCoMo-format sample straight into the tables, for `eval recall` and the recall tests: turns as
conversations and messages of one user, items from the offline extraction (the round path is not run)."""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from psycopg import AsyncConnection
from psycopg.types.json import Jsonb

from memory_agent.evaluation.dataset import EVAL_TENANT, Sample
from memory_agent.llm.extract import Statement, extract_items
from memory_agent.long_term.scope import ItemScope
from memory_agent.schemas.items import is_single_valued, normalize_content
from memory_agent.testing.queries import insert_conversation, insert_item


async def store_conversation(
    conn: AsyncConnection[Any],
    conversation_id: str,
    turns: Sequence[tuple[str, str, datetime]] | Sequence[tuple[str, str, datetime, str | None]],
    *,
    tenant_id: str,
    user_id: str,
) -> None:
    """Store (role, text, created_at[, name]) turns as the messages of a conversation of (tenant_id, user_id),
    rounds numbered by user turns; a name is the chat message's `name` (a speaker's), as a round stores it."""
    keys = {"tenant_id": tenant_id, "user_id": user_id}
    rows, round_number = [], 0
    for sequence, (role, text, created_at, *named) in enumerate(turns):
        if role == "user" or round_number == 0:
            round_number += 1
        data = {"content": text, "type": "human" if role == "user" else "ai", "name": named[0] if named else None}
        message = {"type": data["type"], "data": data}
        rows.append(
            {
                **keys,
                "conversation_id": conversation_id,
                "sequence_number": sequence,
                "round_number": round_number,
                "role": role,
                "content": text,
                "message": Jsonb(message),
                "created_at": created_at,
            }
        )
    conversation = {
        **keys,
        "conversation_id": conversation_id,
        "next_sequence": len(rows),
        "round_count": round_number,
        "created_at": turns[0][2] if turns else datetime.now(UTC),
    }
    async with conn.transaction():
        await insert_conversation(conn, conversation, rows)


@dataclass(frozen=True)
class StoredItem:
    """One item as store_item writes it: type, key and content, its validity, the turns it came from, and for a
    summary the items it stands for."""

    item_type: str
    key: str
    content: str
    valid_from: datetime
    valid_to: datetime | None = None
    sources: Sequence[tuple[str, int]] = ()
    importance: float = 0.5
    is_summary: bool = False
    source_item_ids: Sequence[Any] = ()
    single_valued: bool = False


async def store_item(conn: AsyncConnection[Any], *, scope: ItemScope, item: StoredItem) -> Any:
    """Write one item of `scope` directly (single-valued: closing the current value of its key); returns its id,
    None when the same content was current already. Evaluation and tests only: items are the long-term writer's."""
    tenant_id, user_id = scope.tenant_id, scope.user_id
    content_norm = normalize_content(item.content)
    value_slot = (
        "summary" if item.is_summary else "" if item.single_valued else hashlib.md5(content_norm.encode()).hexdigest()
    )
    params = {
        "tenant_id": tenant_id,
        "user_id": user_id,
        "item_type": item.item_type,
        "key": item.key,
        "content": item.content,
        "content_norm": content_norm,
        "value_slot": value_slot,
        "importance": item.importance,
        "valid_from": item.valid_from,
        "valid_to": item.valid_to,
        "is_summary": item.is_summary,
        "source_item_ids": list(item.source_item_ids),
        "now": item.valid_from,
    }
    sources = [
        {"user_id": user_id, "tenant_id": tenant_id, "conversation_id": conversation_id, "sequence_number": sequence}
        for conversation_id, sequence in item.sources
    ]
    async with conn.transaction():
        return await insert_item(conn, params, sources, single_valued=item.single_valued)


async def ingest_directly(conn: AsyncConnection[Any], sample: Sample) -> dict[tuple[str, int], str]:
    """Store a sample's sessions as messages rows and its items by the offline extraction; returns
    (conversation_id, sequence) → dia_id. The integrator swaps this for rounds through the real round path
    (offline summarizer, items written by the background job) via `evaluate(..., direct=DirectLoad(ingest=...))`."""
    provenance: dict[tuple[str, int], str] = {}
    for session in sample.sessions:
        conversation_id = f"{sample.sample_id}:session_{session.number}"
        turns = [
            (
                "user" if t.speaker == sample.speaker_a else "assistant",
                t.text,
                session.started_at + timedelta(seconds=i),
                t.speaker,
            )
            for i, t in enumerate(session.turns)
        ]
        await store_conversation(conn, conversation_id, turns, tenant_id=EVAL_TENANT, user_id=sample.sample_id)
        provenance.update({(conversation_id, i): t.dia_id for i, t in enumerate(session.turns)})
        statements = [Statement(i, role, text) for i, (role, text, *_) in enumerate(turns)]
        for item_type, item in extract_items(statements).typed():
            await store_item(
                conn,
                scope=ItemScope(tenant_id=EVAL_TENANT, user_id=sample.sample_id),
                item=StoredItem(
                    item_type=item_type,
                    key=item.key,
                    content=item.content,
                    valid_from=session.started_at,
                    sources=[(conversation_id, s) for s in item.source_sequences],
                    importance=item.importance,
                    single_valued=is_single_valued(item_type, item),
                ),
            )
    return provenance


Ingest = Callable[[AsyncConnection[Any], Sample], Awaitable[dict[tuple[str, int], str]]]
