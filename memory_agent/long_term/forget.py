"""Forgetting with lineage: erase what was asked and every row derived from it, in the caller's transaction.
Each function takes the user's UserKey, checked when it was built (schemas/keys.py), and does not check it again.

- forget_conversation: the conversation's lineage rows; the items no other source is left for (an item the user
  also stated elsewhere stays, minus this lineage); the consolidation notes and batch summaries made from the
  conversation or an erased item; the conversation tier (messages, memory versions, round metrics, lease, the
  conversation); its summary jobs' rows.
- forget_item: that item version (its lineage goes with it), and the notes and batch summaries made from it.
  Forgetting a cluster summary forgets the members it stands for too — otherwise the next refresh would write
  the same text back.
- Both clear the recalled blocks (what `memory-agent at` shows a round was given) that quoted what they erased.
- forget_user: every long-term row of the user (consolidation notes and batch summaries too), every
  conversation of theirs, every round metrics row and lease, their jobs' rows; their cost-ledger rows move to
  user '' (no user). One fixed set of statements, each over all the user's rows of its tables, however many
  conversations they have.
- release_threads: after one of these committed, the owner rows of the erased threads (keyed by thread id, on
  Citus on other shards than the user's), each in a transaction of its own. In this order a failure between the
  two leaves an owner row and nothing it could lead to; the thread stays the user's until the erasure is run
  again (the owner rows are found by user: a retry releases them).
A dropped note is made again by the next nightly run from what is left (its schedule is moved back before it);
the items of a dropped batch summary are batched again.
A summary job holds its conversation while it writes (complete_memory); forget_conversation and forget_user
lock the conversations first, so a job racing a forget either commits before the forget reads or writes nothing.
Every forget then takes the user's forget lock (lineage.py): a writer of notes, batch summaries or cluster
summaries either committed before (and its row is found and erased) or checks its sources after and writes nothing.
Each then regenerates the cluster summaries built from an erased item without it (or deletes them below
min_items). A summary that cannot be regenerated — no summarizer given, or its new text rejected — is deleted
rather than kept: it would still carry the erased text. The periodic safety net rebuilds it from what is left.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import psycopg

from memory_agent.errors import InvalidInputError
from memory_agent.long_term.clusters import ClusterSummaries, refresh_cluster
from memory_agent.long_term.queries import QUERIES as Q
from memory_agent.long_term.scope import Cluster, check_now
from memory_agent.long_term.tenancy import tenant_transaction
from memory_agent.schemas.keys import UserKey


@dataclass(frozen=True)
class ForgetReport:
    """What a forget_* call erased or rewrote."""

    items_deleted: tuple[int, ...] = ()
    summaries_refreshed: tuple[int, ...] = ()
    summaries_deleted: tuple[int, ...] = ()
    conversations_deleted: tuple[str, ...] = ()
    notes_deleted: tuple[int, ...] = ()  # consolidation notes
    batch_summaries_deleted: tuple[int, ...] = ()


async def forget_conversation(
    conn: psycopg.AsyncConnection[Any],
    key: UserKey,
    conversation_id: str,
    *,
    summaries: ClusterSummaries | None = None,
    now: datetime | None = None,
) -> ForgetReport:
    """Erase a conversation of the user `key` and everything derived from it; the cluster summaries built from
    its items are made again by `summaries` (None: deleted)."""
    if not isinstance(conversation_id, str) or not conversation_id:
        raise InvalidInputError(f"conversation_id must be a non-empty string, got {conversation_id!r}")
    scope = key.params()
    async with conn.transaction():
        # First: a summary job writing this conversation's items commits before the lineage is read, or after
        # the conversation is gone (and then writes nothing).
        await Q.lock_user_conversations(conn, scope, conversation_id)
        await Q.lock_forget(conn, scope)
        deleted = await _erase_conversation_lineage(conn, scope, conversation_id)
        rederived = await _rederive(conn, scope, deleted, summaries, now)
        notes, batches = await _drop_derived(conn, scope, deleted, [conversation_id])
        await _erase_jobs(conn, scope, conversation_id)
        rows = await Q.erase_conversation_rows(conn, scope, conversation_id)
        await Q.erase_conversation_traces(conn, scope, conversation_id)
        erased = tuple(row["conversation_id"] for row in rows)
        await Q.clear_recalled_blocks(conn, scope, [*deleted, *rederived[0], *rederived[1]])
    return ForgetReport(tuple(deleted), *rederived, erased, notes, batches)


async def forget_item(
    conn: psycopg.AsyncConnection[Any],
    key: UserKey,
    item_id: int,
    *,
    summaries: ClusterSummaries | None = None,
    now: datetime | None = None,
) -> ForgetReport:
    """Erase one item version of the user (a summary: with its members) and everything derived from it; the
    cluster summaries built from it are made again by `summaries` (None: deleted). Unknown ids erase nothing."""
    return await _forget_item(conn, key, item_id, summaries, now)


async def expire_item(
    conn: psycopg.AsyncConnection[Any], key: UserKey, item_id: int, *, now: datetime | None = None
) -> ForgetReport:
    """The batch summaries' TTL pass: erase an original a batch summary stands for, as forget_item does, but
    keep the notes and batch summaries made from it (they are what is kept of it)."""
    return await _forget_item(conn, key, item_id, None, now, retention=True)


async def _forget_item(
    conn: psycopg.AsyncConnection[Any],
    key: UserKey,
    item_id: int,
    summaries: ClusterSummaries | None,
    now: datetime | None,
    *,
    retention: bool = False,
) -> ForgetReport:
    if not isinstance(item_id, int) or isinstance(item_id, bool):
        raise InvalidInputError(f"item_id must be an integer, got {item_id!r}")
    scope = key.params()
    async with conn.transaction():
        await Q.lock_forget(conn, scope)
        rows = await Q.delete_items(conn, scope, [item_id])
        members = [m for row in rows if row["is_summary"] for m in row["source_item_ids"]]
        if members:
            rows += await Q.delete_items(conn, scope, members)
        deleted = [row["item_id"] for row in rows]
        refreshed, summaries_deleted = await _rederive(conn, scope, deleted, summaries, now)
        notes, batches = ((), ()) if retention else await _drop_derived(conn, scope, deleted, [])
        await Q.clear_recalled_blocks(conn, scope, [*deleted, *refreshed, *summaries_deleted])
    summaries_deleted += tuple(row["item_id"] for row in rows if row["is_summary"])
    return ForgetReport(
        tuple(i for i in deleted if i not in summaries_deleted), refreshed, summaries_deleted, (), notes, batches
    )


async def forget_user(conn: psycopg.AsyncConnection[Any], key: UserKey) -> ForgetReport:
    """Erase every long-term row of the user (consolidation notes and batch summaries included) and every
    conversation of theirs; then (after the caller's transaction) release_threads. A fixed set of statements,
    however many conversations the user has: each erases all of the user's rows of its tables."""
    scope = key.params()
    async with conn.transaction():
        await Q.lock_user_conversations(conn, scope, None)
        await Q.lock_forget(conn, scope)
        await _erase_jobs(conn, scope, None)
        items = await Q.delete_user_items(conn, scope)
        notes = await Q.delete_user_consolidation(conn, scope)
        # In a statement of its own, before the traces: see erase_user_conversations (sql/queries/long_term.sql).
        erased = sorted(row["conversation_id"] for row in await Q.erase_user_conversations(conn, scope))
        await Q.erase_user_traces(conn, scope)
        await Q.pseudonymise_user_ledger(conn, scope)
    return ForgetReport(
        items_deleted=tuple(row["item_id"] for row in items),
        conversations_deleted=tuple(erased),
        notes_deleted=tuple(row["note_id"] for row in notes),
    )


async def release_threads(
    connection: Callable[[], AbstractAsyncContextManager[psycopg.AsyncConnection[Any]]],
    key: UserKey,
    conversation_id: str | None = None,
) -> tuple[str, ...]:
    """After forget_user (or forget_conversation of `conversation_id`) committed: release the owner rows naming the
    user (of that thread), so that another user may take the thread id. Each in a transaction of its own, on a
    connection of its own from `connection` (a pool's or a backend's `connection`): a transaction that wrote
    several threads' rows would, on Citus, commit in two phases. A thread the user stored a conversation in since,
    or holds a round's lease of (a round that began after the erasure), stays theirs. The threads released."""
    scope = key.params()
    if conversation_id is not None:
        threads = [conversation_id]
    else:
        async with connection() as conn, tenant_transaction(conn, key):
            threads = [row["conversation_id"] for row in await Q.user_threads(conn, scope)]
    released: list[str] = []
    for thread in threads:
        async with connection() as conn, tenant_transaction(conn, key):
            if await Q.release_thread(conn, scope, thread):
                released.append(thread)
    return tuple(released)


async def _drop_derived(
    conn: psycopg.AsyncConnection[Any], scope: dict[str, Any], item_ids: list[int], conversation_ids: list[str]
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Erase the notes and batch summaries made from the erased items or conversations: (note ids, batch ids)."""
    rows = await Q.drop_derived(conn, {**scope, "item_ids": item_ids, "conversation_ids": conversation_ids})
    notes = tuple(row["note_id"] for row in rows if row["note_id"] is not None)
    return notes, tuple(row["batch_id"] for row in rows if row["batch_id"] is not None)


async def _erase_jobs(conn: psycopg.AsyncConnection[Any], scope: dict[str, Any], conversation_id: str | None) -> None:
    """The job rows (waiting or finished; procrastinate's, when installed) whose arguments name the user and a
    memory version erased here, or (a whole user) the user in this tenant."""
    if not await Q.procrastinate_installed(conn):
        return
    memory_ids = [row["memory_id"] for row in await Q.user_memory_ids(conn, scope, conversation_id)]
    whole_user = conversation_id is None
    await Q.erase_user_jobs(conn, {**scope, "memory_ids": memory_ids, "whole_user": whole_user})


async def _erase_conversation_lineage(
    conn: psycopg.AsyncConnection[Any], scope: dict[str, Any], conversation_id: str
) -> list[int]:
    touched = sorted({row["item_id"] for row in await Q.erase_conversation_sources(conn, scope, conversation_id)})
    if not touched:
        return []
    return [row["item_id"] for row in await Q.delete_unsourced_items(conn, scope, touched)]


async def _rederive(
    conn: psycopg.AsyncConnection[Any],
    scope: dict[str, Any],
    deleted: list[int],
    summaries: ClusterSummaries | None,
    now: datetime | None,
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Regenerate (or delete) the summaries built from any deleted item: (refreshed ids, deleted ids)."""
    if not deleted:
        return (), ()
    now = check_now(now) if now is not None else datetime.now(UTC)
    refreshed: list[int] = []
    dropped: list[int] = []
    for row in await Q.summaries_over(conn, scope, deleted):
        if summaries is None:
            await Q.delete_items(conn, scope, [row["item_id"]])
            dropped.append(row["item_id"])
            continue
        cluster = Cluster(
            scope["tenant_id"], scope["user_id"], row["project"], row["environment"], row["item_type"], row["key"]
        )
        outcome = await refresh_cluster(conn, cluster, summaries, now=now, drop_when_unusable=True)
        (refreshed if outcome.outcome == "refreshed" else dropped).append(row["item_id"])
    return tuple(refreshed), tuple(dropped)
