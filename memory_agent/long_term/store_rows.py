"""The LangGraph store's rows among the long-term items: how a (namespace, key) maps to columns, and the statements.

A namespace is `(category, user_id, *more)`; the tenant is the store's. A row is an item with:
- user_id = namespace[1], tenant_id = the store's, project and environment '' (the store has no partition);
- item_type from the category: "facts"/"fact" → fact, "preferences" → preference, … ; any other category
  ("memories", LangMem's default) → fact;
- key = the store key as given (LangMem's keys are opaque uuids), value = the JSON object put, content = its
  "content" field (JSON text when it is not a string; the whole value when it has none), searched as text;
- value_slot = 'store:' + the namespace joined by '.', so one key has one current version per namespace and
  the items_one_version_at_a_time constraint decides concurrent puts as it does for every item.
Functions take an autocommit connection of the backend's pool and run in the caller's transaction.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
from psycopg import errors
from psycopg.types.json import Jsonb

from memory_agent.errors import InvalidInputError
from memory_agent.long_term.forget import ForgetReport, forget_item
from memory_agent.long_term.queries import QUERIES as Q
from memory_agent.long_term.scope import Row
from memory_agent.long_term.store_keys import (
    DERIVED_ITEM_KEY,
    StoreKey,
    check_value,
    content_of,
    user_of,
)
from memory_agent.long_term.writer import MAX_ATTEMPTS, LongTermWriteError
from memory_agent.schemas.items import normalize_content
from memory_agent.schemas.keys import UserKey

logger = logging.getLogger("memory_agent.long_term")

ONE_TICK = timedelta(microseconds=1)
TRGM_THRESHOLD = 0.3  # word_similarity a trigram hit needs; short CJK queries score about 0.33


async def get_row(conn: psycopg.AsyncConnection[Any], at: StoreKey) -> Row | None:
    return await Q.store_get(conn, at.params())


async def put_row(
    conn: psycopg.AsyncConnection[Any],
    at: StoreKey,
    value: dict[str, Any],
    now: datetime | None = None,
    *,
    index: Sequence[str] | None = None,
) -> str:
    """Write `value` as the current version of `at`: 'unchanged' (same value), 'inserted' or 'superseded'. Its
    searched text: content_of(value, index)."""
    params = at.params()
    content = content_of(value, index)
    now = now or datetime.now(UTC)
    # As remember(): writers of one key queue on the slot lock; the constraint stays the arbiter, a writer that
    # loses to it retries from the savepoint over what the winner committed.
    for _ in range(MAX_ATTEMPTS):
        try:
            async with conn.transaction():
                await Q.lock_item_slot(conn, params)
                if await derived_item(conn, at) is not None:
                    raise InvalidInputError(
                        f"{at.key!r} is a memory the summaries extracted, shown by search; the store cannot update "
                        "it: put the new memory under a key of its own, and delete this one to forget it"
                    )
                current = await Q.store_lock_current(conn, params)
                if current and current["item_id"] is not None and current["value"] == value:
                    await Q.store_touch(conn, {**params, "item_id": current["item_id"], "now": now})
                    return "unchanged"
                valid_from = now
                if current and current["until"] is not None:
                    valid_from = max(valid_from, current["until"])
                superseded = bool(current and current["item_id"] is not None)
                if current and superseded:
                    valid_from = max(valid_from, current["valid_from"] + ONE_TICK)
                    await Q.close_item(conn, {**params, "item_id": current["item_id"], "until": valid_from})
                await Q.store_insert(
                    conn,
                    {
                        **params,
                        "content": content,
                        "content_norm": normalize_content(content),
                        "value": Jsonb(value),
                        "valid_from": valid_from,
                        "now": max(now, valid_from),
                    },
                )
                return "superseded" if superseded else "inserted"
        except (errors.ExclusionViolation, errors.DeadlockDetected) as exc:
            logger.debug("store put retried after %s: %s", exc.sqlstate, exc)
    raise LongTermWriteError(f"store key {at.key!r} stayed contended after {MAX_ATTEMPTS} attempts")


async def derived_item(conn: psycopg.AsyncConnection[Any], at: StoreKey) -> int | None:
    """The item `at` names when its key is one a search gave a memory the store did not put (derived_item_key under
    `(category, user_id)`, no store row of that key): LangMem deletes or updates what its search found by key."""
    match = DERIVED_ITEM_KEY.match(at.key)
    if match is None or len(at.namespace) != 2:
        return None
    row = await Q.store_derived_item(conn, {**at.params(), "item_id": int(match[1], 16)})
    return row["item_id"] if row else None


async def delete_rows(conn: psycopg.AsyncConnection[Any], at: StoreKey) -> ForgetReport:
    """Forget every version of `at` with its lineage (forget_item, which also re-derives cluster summaries); a
    key a search gave a derived item (derived_item_key) forgets that item."""
    params = at.params()
    deleted: list[int] = []
    async with conn.transaction():
        await Q.lock_item_slot(conn, params)
        versions = [row["item_id"] for row in await Q.store_versions(conn, params)]
        if not versions and (item_id := await derived_item(conn, at)) is not None:
            versions = [item_id]
        for item_id in versions:
            report = await forget_item(conn, UserKey(at.tenant_id, at.user_id), item_id)
            deleted.extend(report.items_deleted)
    return ForgetReport(items_deleted=tuple(deleted))


def or_terms(query: str) -> str:
    """websearch_to_tsquery input that ORs the query's words: AND-ed terms match almost no natural question."""
    return " or ".join(re.findall(r"\w+", query, flags=re.UNICODE))


async def search_rows(
    conn: psycopg.AsyncConnection[Any],
    tenant_id: str,
    prefix: tuple[str, ...],
    *,
    query: str | None,
    filter: Mapping[str, Any] | None,
    limit: int,
    offset: int,
    text_search_config: str,
) -> list[Row]:
    """The store's search: a user's current rows under `prefix`, filtered by equality on value fields, ranked
    by text match when there is a query (rows: namespace, key, value, created_at, updated_at, score, item_id)."""
    user_id = user_of(prefix, "namespace prefix")
    if not isinstance(limit, int) or not isinstance(offset, int) or limit < 0 or offset < 0:
        raise InvalidInputError(f"limit and offset must be integers >= 0, got {limit!r} and {offset!r}")
    if query is not None and not isinstance(query, str):
        raise InvalidInputError(f"query must be a string or None, got {type(query).__name__}")
    equal = equality_filter(filter)
    return await Q.store_search(
        conn,
        {
            "tenant_id": tenant_id,
            "user_id": user_id,
            "prefix": list(prefix),
            "query": query or None,
            "terms": or_terms(query or ""),
            "filter": Jsonb(equal),
            "config": text_search_config,
            "trgm_threshold": TRGM_THRESHOLD,
            "limit": limit,
            "offset": offset,
        },
    )


def equality_filter(filter: Mapping[str, Any] | None) -> dict[str, Any]:
    """{field: value} or {field: {"$eq": value}}: the value's top-level field equals it (JSON equality)."""
    equal: dict[str, Any] = {}
    for field, wanted in (filter or {}).items():
        if isinstance(wanted, Mapping) and any(str(k).startswith("$") for k in wanted):
            if set(wanted) != {"$eq"}:
                raise InvalidInputError(
                    f"filter on {field!r}: only equality ($eq or a plain value) is supported, got {sorted(wanted)}"
                )
            wanted = wanted["$eq"]
        equal[str(field)] = wanted
    return check_value(equal)


async def namespaces_of(conn: psycopg.AsyncConnection[Any], tenant_id: str, user_id: str) -> list[tuple[str, ...]]:
    rows = await Q.store_namespaces(conn, {"tenant_id": tenant_id, "user_id": user_id})
    return [tuple(row["namespace"]) for row in rows]
