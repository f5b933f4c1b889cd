"""An item stated from outside a conversation: `remember("prefers window seats")` from the service or an MCP client.

It goes through the same writer and validity rules as the items a summary extracts (writer.remember): one current
row per slot, a new value of a named single-valued key supersedes the old one, history kept. Without a key, each
distinct content is an item of its own under the key `note` (multi-valued), so two statements never replace each
other by accident. Written under the user's forget lock, like every background writer: a forget of the user in
progress is waited for, so a remember can never resurrect a user a forget erased.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, get_args

import psycopg
from pydantic import ValidationError

from memory_agent.errors import InvalidInputError
from memory_agent.long_term.lineage import sources_held
from memory_agent.long_term.scope import ItemOrigin, ItemScope
from memory_agent.long_term.writer import RememberOutcome, remember
from memory_agent.schemas.items import ITEM_LISTS, MAX_CONTENT_CHARS, ItemType, StructuredItems, SummaryItem

NOTE_KEY = "note"
ITEM_TYPES: tuple[str, ...] = get_args(ItemType)


def stated_items(content: Any, *, item_type: Any, key: Any, importance: Any) -> StructuredItems:
    """The one item a caller stated, validated like model output; InvalidInputError naming what is wrong."""
    if not isinstance(content, str) or not content.strip():
        raise InvalidInputError("content must be a non-empty string (the memory to keep)")
    if len(content) > MAX_CONTENT_CHARS:
        raise InvalidInputError(f"content is {len(content)} characters; an item holds at most {MAX_CONTENT_CHARS}")
    if item_type not in ITEM_TYPES:
        raise InvalidInputError(f"item_type must be one of {', '.join(ITEM_TYPES)}, got {item_type!r}")
    if key is not None and not isinstance(key, str):
        raise InvalidInputError(f"key must be a string or None, got {type(key).__name__}")
    if isinstance(importance, bool) or not isinstance(importance, int | float) or not 0.0 <= importance <= 1.0:
        raise InvalidInputError(f"importance must be a number between 0 and 1, got {importance!r}")
    try:
        item = SummaryItem(
            key=key or NOTE_KEY,
            content=content,
            importance=float(importance),
            single_valued=None if key else False,
        )
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise InvalidInputError(f"the item is not valid: {problems}") from None
    field = next(name for name, kind in ITEM_LISTS.items() if kind == item_type)
    return StructuredItems(**{field: [item]})


async def remember_stated(
    conn: psycopg.AsyncConnection[Any], scope: ItemScope, items: StructuredItems, *, now: datetime
) -> RememberOutcome:
    """Write the stated item in the caller's transaction, after the user's forget lock (shared)."""
    await sources_held(conn, {"tenant_id": scope.tenant_id, "user_id": scope.user_id})
    (outcome,) = await remember(conn, scope=scope, items=items, source=ItemOrigin(), now=now)
    return outcome
