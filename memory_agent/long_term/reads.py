"""Reading the long-term tier: what a user's memory holds now or held at a date, and the history of a key.

"What did we hold on date D" is one statement: the versions whose validity contains D. Cluster summaries are a
view of the present (refreshed in place), so they come with current reads and never with `as_of` ones.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg

from memory_agent.errors import InvalidInputError
from memory_agent.long_term.queries import QUERIES as Q
from memory_agent.long_term.scope import ItemScope, Row, check_now
from memory_agent.schemas.keys import UserKey


@dataclass(frozen=True)
class ItemSource:
    """One message an item came from (conversation and memory version null for items stated outside one)."""

    conversation_id: str | None
    memory_id: int | None
    sequence_number: int | None


@dataclass(frozen=True)
class LongTermItem:
    """One version of an item, or a cluster summary (is_summary, with the ids of its members)."""

    item_id: int
    tenant_id: str
    user_id: str
    project: str
    environment: str
    item_type: str
    key: str
    content: str
    importance: float
    confidence: float
    valid_from: datetime
    valid_to: datetime | None
    is_summary: bool
    source_item_ids: tuple[int, ...]
    created_at: datetime
    updated_at: datetime
    sources: tuple[ItemSource, ...] = ()

    @property
    def is_current(self) -> bool:
        return self.valid_to is None


def _item(row: Row) -> LongTermItem:
    sources = tuple(ItemSource(s["conversation_id"], s["memory_id"], s["sequence_number"]) for s in row["sources"])
    return LongTermItem(
        **{k: v for k, v in row.items() if k not in ("sources", "source_item_ids")},
        source_item_ids=tuple(row["source_item_ids"]),
        sources=sources,
    )


@dataclass(frozen=True)
class ItemFilter:
    """Which of a user's items list_items returns: held at `as_of` (None: now), of one type, key, project or
    environment (None: every one), with cluster summaries or without."""

    as_of: datetime | None = None
    item_type: str | None = None
    key: str | None = None
    project: str | None = None
    environment: str | None = None
    include_summaries: bool = True


async def list_items(
    conn: psycopg.AsyncConnection[Any], key: UserKey, where: ItemFilter | None = None
) -> list[LongTermItem]:
    """The items of the user `key` current now (with cluster summaries unless told otherwise), or held at `as_of`;
    most important first."""
    where = where or ItemFilter()
    if where.as_of is not None:
        check_now(where.as_of, "as_of")
    rows = await Q.list_items(conn, {**key.params(), **dataclasses.asdict(where)})
    return [_item(row) for row in rows]


async def item_history(
    conn: psycopg.AsyncConnection[Any], scope: ItemScope, item_type: str, key: str
) -> list[LongTermItem]:
    """Every version of one key of `scope`, oldest first: closed ones with their valid_to, then the current ones."""
    if not key:
        raise InvalidInputError("key must be a non-empty string")
    rows = await Q.item_history(conn, {**dataclasses.asdict(scope), "item_type": item_type, "key": key})
    return [_item(row) for row in rows]
