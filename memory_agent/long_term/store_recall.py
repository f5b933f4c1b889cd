"""The store's search with a query: recall's ranked memories as LangGraph SearchItems.

A BaseStore over this memory shows all of it, not only the rows put through the store: a search of
`(category, user_id)` with a query runs recall (long_term/recall/, the statement a round starts with) and
returns, in recall's order,
- rows put through the store as they were put (their namespace, key and value), when their namespace is under
  the prefix;
- every other memory of the user — items the summaries extracted, cluster summaries, batch summaries, key
  insights of consolidation notes, earlier turns — under the prefix itself, keyed by what it is (an item: a
  UUID holding its id, which LangMem can delete by; `batch:<id>`, `note:<id>:<n>`,
  `turn:<conversation>:<sequence>`), its value the text as
  "content" beside its provenance (kind, is_summary, item ids, source item ids, sources, ...). A prefix deeper
  than (category, user_id) is an application's own partition: it shows store rows only.
`filter` is equality on the values' top-level fields, applied to both. Nothing matching gives nothing (not the
latest turns recall falls back to at round start). The results are what recall returns for
`offset + limit` (its guardrails bound them: the block's tokens and turns), then filtered and paged.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import psycopg
from langchain_core.embeddings import Embeddings
from langgraph.store.base import SearchItem

from memory_agent.long_term.queries import QUERIES as Q
from memory_agent.long_term.recall import SEARCH_PATHS, RecallSettings, recall
from memory_agent.long_term.recall.block import RecallHit
from memory_agent.long_term.store_keys import derived_item_key, user_of

USER_PREFIX_LENGTH = 2  # (category, user_id): the whole of a user's memory


def derived_key(hit: RecallHit) -> str:
    """The store key of a memory that was not put through the store: what it is and its id."""
    if hit.batch_summary_id is not None:
        return f"batch:{hit.batch_summary_id}"
    if hit.note_id is not None:
        return f"note:{hit.note_id}:{hit.sequences[0] if hit.sequences else 0}"
    if hit.kind == "turn":
        return f"turn:{hit.conversation_id}:{hit.sequences[0]}"
    return derived_item_key(hit.item_ids[0])


def _matches(value: Mapping[str, Any], equal: Mapping[str, Any]) -> bool:
    return all(field in value and value[field] == wanted for field, wanted in equal.items())


async def recall_search(
    conn: psycopg.AsyncConnection[Any],
    tenant_id: str,
    prefix: tuple[str, ...],
    *,
    query: str,
    equal: Mapping[str, Any],
    limit: int,
    offset: int,
    settings: RecallSettings,
    embedder: Embeddings | None,
) -> list[SearchItem]:
    user_id = user_of(prefix, "namespace prefix")
    if limit == 0:
        return []
    found = await recall(
        conn,
        tenant_id=tenant_id,
        user_id=user_id,
        query=query,
        limit=offset + limit,
        settings=settings,
        embedder=embedder,
        paths=SEARCH_PATHS,
    )
    item_ids = [hit.item_ids[0] for hit in found.results if hit.item_ids]
    stored = {
        row["item_id"]: row
        for row in await Q.store_rows_by_id(conn, {"tenant_id": tenant_id, "user_id": user_id, "item_ids": item_ids})
    }
    results: list[SearchItem] = []
    for hit in found.results:
        row = stored.get(hit.item_ids[0]) if hit.item_ids else None
        if row is not None:
            namespace = tuple(row["namespace"])
            if namespace[: len(prefix)] != prefix:
                continue  # another category's (or partition's) row
            item = SearchItem(namespace, row["key"], row["value"], row["created_at"], row["updated_at"], hit.score)
        elif len(prefix) == USER_PREFIX_LENGTH:
            created = hit.created_at
            value = hit.record()
            item = SearchItem(prefix, derived_key(hit), value, created, created, hit.score)  # type: ignore[arg-type]
        else:
            continue
        if _matches(item.value, equal):
            results.append(item)
    return results[offset : offset + limit]
