"""remember(): a summary's structured items into the long-term tier — one current row per fact, history kept.

Per item, in the caller's transaction (one savepoint for the whole call):
- the same content as the current version → `unchanged` (lineage added, importance and confidence keep their
  highest value);
- a new value of a single-valued key → `superseded`: the current version is closed (valid_to) and a new one
  opened; nothing is deleted, and only that (type, key) is ever closed;
- a multi-valued key (allergies, decisions, todos) keeps one current row per distinct normalized content
  (value_slot = md5 of it), so a new value is `inserted` beside the others;
- a todo whose content starts with "done:" closes every open todo of its key → `closed`.

The database decides every race: the items_one_version_at_a_time constraint (PostgreSQL 18 WITHOUT OVERLAPS)
makes a concurrent writer of the same slot block, fail with 23P01 once the first commits, and retry from the
savepoint — it then sees the committed row and restates or supersedes it. Writers of one slot also take turns
on an advisory lock first, so in practice they queue instead of failing (the constraint stays the arbiter).
Validity is ordered by commit: a version never starts before the one it replaces (a stale clock is moved 1 µs
past it), so history never overlaps.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal

import psycopg
from psycopg import errors

from memory_agent.errors import InvalidInputError, MemoryAgentError
from memory_agent.long_term.queries import QUERIES as Q
from memory_agent.long_term.scope import Cluster, ItemOrigin, ItemScope, check_now
from memory_agent.schemas.items import ItemType, StructuredItems, SummaryItem, is_single_valued, normalize_content

logger = logging.getLogger("memory_agent.long_term")

Outcome = Literal["inserted", "unchanged", "superseded", "closed", "nothing_to_close"]
DONE_PREFIX = "done:"
# Every retry follows another writer's commit on the same slot, so retries are bounded by the writers racing;
# the cap only stops a transaction that can never see the winner (REPEATABLE READ or stricter).
MAX_ATTEMPTS = 100
ONE_TICK = timedelta(microseconds=1)


class LongTermWriteError(MemoryAgentError):
    """An item could not be written (the slot stayed contended past every retry)."""


@dataclass(frozen=True)
class RememberOutcome:
    """What remember() did with one item. `item_id` is the current row (none for a closed todo);
    `closed_item_ids` the versions it ended."""

    outcome: Outcome
    cluster: Cluster
    item_id: int | None
    content: str
    closed_item_ids: tuple[int, ...] = field(default=())

    @property
    def changes_cluster(self) -> bool:
        """Whether the cluster's current members changed (its summary is due for a refresh)."""
        return self.outcome in ("inserted", "superseded", "closed")


def is_done(item_type: str, item: SummaryItem) -> bool:
    """A todo stated as done: its content starts with "done:" (any case), under the key of the todo it closes."""
    return item_type == "todo" and item.content.strip().casefold().startswith(DONE_PREFIX)


def value_slot(item_type: ItemType, item: SummaryItem, content_norm: str) -> str:
    return "" if is_single_valued(item_type, item) else hashlib.md5(content_norm.encode("utf-8")).hexdigest()


async def remember(
    conn: psycopg.AsyncConnection[Any],
    *,
    scope: ItemScope,
    items: StructuredItems,
    source: ItemOrigin,
    now: datetime,
) -> list[RememberOutcome]:
    """Write `items` of `scope` (from `source`) as of `now`. Runs in the caller's transaction when there is one,
    else in its own."""
    tenant_id, user_id, project, environment = scope.tenant_id, scope.user_id, scope.project, scope.environment
    conversation_id, memory_id, confidence = source.conversation_id, source.memory_id, source.confidence
    check_now(now)  # the scope was checked when it was built
    if not isinstance(items, StructuredItems):
        raise InvalidInputError(f"items must be StructuredItems, got {type(items).__name__}")
    if not 0.0 <= confidence <= 1.0:
        raise InvalidInputError(f"confidence must be between 0 and 1, got {confidence!r}")
    if conversation_id is not None and (not isinstance(conversation_id, str) or not conversation_id):
        raise InvalidInputError(f"conversation_id must be a non-empty string or None, got {conversation_id!r}")
    base = {
        "tenant_id": tenant_id,
        "user_id": user_id,
        "project": project,
        "environment": environment,
        "conversation_id": conversation_id,
        "memory_id": memory_id,
        "now": now,
        "confidence": confidence,
    }
    # Slots in one order for every writer, so two jobs writing overlapping items lock them in the same order;
    # "done" todos last, so a todo opened and done within one summary ends closed.
    typed = sorted(
        items.typed(), key=lambda pair: (is_done(*pair), pair[0], pair[1].key, normalize_content(pair[1].content))
    )
    # One savepoint for the batch: a conflict (a writer that bypassed the slot lock, or a deadlock) undoes the
    # batch, which is then written again over what the winner committed.
    for _ in range(MAX_ATTEMPTS):
        try:
            async with conn.transaction():
                return [await _remember_one(conn, base, item_type, item) for item_type, item in typed]
        except (errors.ExclusionViolation, errors.DeadlockDetected) as exc:
            logger.debug("long-term write retried after %s: %s", exc.sqlstate, exc)
    raise LongTermWriteError(
        f"items stayed contended after {MAX_ATTEMPTS} attempts; long-term writes need READ COMMITTED isolation "
        "(a stricter level never sees the concurrent writer's row)"
    )


async def _remember_one(
    conn: psycopg.AsyncConnection[Any], base: dict[str, Any], item_type: ItemType, item: SummaryItem
) -> RememberOutcome:
    if is_done(item_type, item):
        return await _close_todo(conn, base, item_type, item)
    return await _write(conn, base, item_type, item)


def _cluster(base: dict[str, Any], item_type: str, key: str) -> Cluster:
    return Cluster(base["tenant_id"], base["user_id"], base["project"], base["environment"], item_type, key)


async def _write(
    conn: psycopg.AsyncConnection[Any], base: dict[str, Any], item_type: ItemType, item: SummaryItem
) -> RememberOutcome:
    content_norm = normalize_content(item.content)
    slot = {
        **base,
        "item_type": item_type,
        "key": item.key,
        "value_slot": value_slot(item_type, item, content_norm),
        "sequences": _sequences(item),
    }
    cluster = _cluster(base, item_type, item.key)
    await Q.lock_item_slot(conn, slot)
    current = await Q.lock_current_item(conn, slot)
    closed: tuple[int, ...] = ()
    if current and current["item_id"] is not None and current["content_norm"] == content_norm:
        await Q.restate_item(conn, {**slot, "item_id": current["item_id"], "importance": item.importance})
        return RememberOutcome("unchanged", cluster, current["item_id"], item.content)
    valid_from = base["now"]
    if current and current["until"] is not None:
        valid_from = max(valid_from, current["until"])
    if current and current["item_id"] is not None:
        valid_from = max(valid_from, current["valid_from"] + ONE_TICK)
        await Q.close_item(conn, {**slot, "item_id": current["item_id"], "until": valid_from})
        closed = (current["item_id"],)
    row = await Q.insert_item(
        conn,
        {
            **slot,
            "content": item.content,
            "content_norm": content_norm,
            "importance": item.importance,
            "valid_from": valid_from,
        },
    )
    assert row is not None
    return RememberOutcome("superseded" if closed else "inserted", cluster, row["item_id"], item.content, closed)


async def _close_todo(
    conn: psycopg.AsyncConnection[Any], base: dict[str, Any], item_type: ItemType, item: SummaryItem
) -> RememberOutcome:
    cluster = _cluster(base, item_type, item.key)
    rows = await Q.close_key(conn, {**base, "item_type": item_type, "key": item.key, "until": base["now"]})
    closed = tuple(row["item_id"] for row in rows)
    if closed:
        # Why the todo closed stays on record with it.
        await Q.add_item_sources(conn, {**base, "item_ids": list(closed), "sequences": _sequences(item)})
    return RememberOutcome("closed" if closed else "nothing_to_close", cluster, None, item.content, closed)


def _sequences(item: SummaryItem) -> list[int | None]:
    # An item that cites no message still records its conversation and memory version: one null sequence.
    return list(item.source_sequences) or [None]
