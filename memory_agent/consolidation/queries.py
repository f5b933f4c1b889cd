"""ConsolidationQueries: the statements of scheduled consolidation (sql/queries/consolidation.sql and the guards'
of sql/queries/guards.sql), one method per operation; the only code of consolidation/ that runs a statement.

A consolidation job works on one connection it holds from start to end: its transactions, the note's claim and
the tenant's slot (session advisory locks) live on it. So every operation takes that connection (`conn`) and runs
there; the one read that needs no unit of work of its own (the due users of a tick) runs on the connector's pool.
"""

from __future__ import annotations

from datetime import date, datetime
from typing import Any

import psycopg

from memory_agent.db.connector import Connector, fetch_all, fetch_one

Conn = psycopg.AsyncConnection[Any]
Row = dict[str, Any]


class ConsolidationQueries:
    """The consolidation tier's statements over `connector` (the due users) or a job's own connection."""

    def __init__(self, connector: Connector) -> None:
        self.connector = connector

    async def due_users(self, job: str, now: datetime) -> list[Row]:
        """(tenant_id, user_id) rows of every user whose `job` is due at `now`."""
        return await self.connector.fetch_all("consolidation_due_users", {"job": job, "now": now})

    # The schedule of one user and job.

    @staticmethod
    async def schedule(conn: Conn, scope: Row, job: str) -> Row:
        """covered_until and first_day of the user's `job` (always one row)."""
        row = await fetch_one(conn, "consolidation_schedule", {**scope, "job": job})
        assert row is not None  # the query always returns its one row
        return row

    @staticmethod
    async def covered_until(conn: Conn, scope: Row, job: str) -> date | None:
        """The user's covered_until of `job` as it is now (a forget that dropped notes moved it back)."""
        row = await fetch_one(conn, "schedule_covered", {**scope, "job": job})
        return row["covered_until"] if row else None

    @staticmethod
    async def advance_schedule(conn: Conn, schedule: Row) -> None:
        """Record progress: covered_until, last_run and next_run only move forward (advance_schedule)."""
        await fetch_all(conn, "advance_schedule", schedule)

    @staticmethod
    async def user_known(conn: Conn, scope: Row) -> bool:
        """Whether the tenant holds anything of the user (what a manual run checks first)."""
        known = await fetch_one(conn, "tenant_user_known", scope)
        return bool(known and known["known"])

    # Period notes.

    @staticmethod
    async def claim_note(conn: Conn, key: Row) -> None:
        """Wait for, then hold, the note's claim: a session advisory lock on `conn`."""
        await fetch_all(conn, "claim_note", key)

    @staticmethod
    async def release_note(conn: Conn, key: Row) -> None:
        await fetch_all(conn, "release_note", key)

    @staticmethod
    async def note(conn: Conn, key: Row) -> Row | None:
        """The note of (user, period, period_start) when written: its note_id and notes_consolidated."""
        return await fetch_one(conn, "note_exists", key)

    @staticmethod
    async def insert_note(conn: Conn, note: Row) -> Row | None:
        """The written note's note_id; None when another run wrote it first (and `force` is off)."""
        return await fetch_one(conn, "insert_note", note)

    @staticmethod
    async def compact_dailies(conn: Conn, scope: Row, before: date, now: datetime) -> list[int]:
        """The ids of the daily notes begun before `before` whose raw content this call compacted."""
        rows = await fetch_all(conn, "compact_dailies", {**scope, "before": before, "now": now})
        return [row["note_id"] for row in rows]

    @staticmethod
    async def daily_inputs(conn: Conn, scope: Row, start: datetime, end: datetime) -> list[Row]:
        """The user's items and latest memories of [start, end), with their lineage."""
        return await fetch_all(conn, "daily_inputs", {**scope, "start": start, "end": end})

    @staticmethod
    async def notes_ending_between(conn: Conn, scope: Row, period: str, first_day: date, last_day: date) -> list[Row]:
        """The user's `period` notes whose last day falls in [first_day, last_day], oldest first."""
        params = {**scope, "period": period, "first_day": first_day, "last_day": last_day}
        return await fetch_all(conn, "notes_ending_between", params)

    @staticmethod
    async def list_notes(conn: Conn, filters: Row) -> list[Row]:
        """Notes of a period (tenant and user optional), newest first."""
        return await fetch_all(conn, "list_notes", filters)

    @staticmethod
    async def search_key_insights(conn: Conn, scope: Row, words: str, limit: int) -> list[Row]:
        return await fetch_all(conn, "search_key_insights", {**scope, "words": words, "limit": limit})

    # Batch summaries.

    @staticmethod
    async def batch_partitions(conn: Conn, scope: Row, before: datetime) -> list[Row]:
        return await fetch_all(conn, "batch_partitions", {**scope, "before": before})

    @staticmethod
    async def next_batch(conn: Conn, where: Row) -> list[Row]:
        return await fetch_all(conn, "next_batch", where)

    @staticmethod
    async def lock_batch_summaries(conn: Conn, where: Row) -> None:
        """The user's batch summarizers take turns until the transaction ends."""
        await fetch_all(conn, "lock_batch_summaries", where)

    @staticmethod
    async def insert_batch_summary(conn: Conn, summary: Row) -> int | None:
        """The summary's id; None when one of its items was summarized meanwhile."""
        row = await fetch_one(conn, "insert_batch_summary", summary)
        return row["summary_id"] if row else None

    @staticmethod
    async def expired_originals(conn: Conn, scope: Row, before: datetime) -> list[int]:
        """Items a batch summary stands for whose keep_original_days are over."""
        return [row["item_id"] for row in await fetch_all(conn, "expired_originals", {**scope, "before": before})]

    # The tenant guards.

    @staticmethod
    async def claim_scheduler_run(conn: Conn, tenant_id: str, now: datetime, cutoff: datetime) -> bool:
        """Record the tenant's run at `now` unless one ran after `cutoff`; whether this one was recorded."""
        params = {"tenant_id": tenant_id, "now": now, "cutoff": cutoff}
        return await fetch_one(conn, "claim_scheduler_run", params) is not None

    @staticmethod
    async def scheduler_last_run(conn: Conn, tenant_id: str) -> datetime | None:
        row = await fetch_one(conn, "scheduler_last_run", {"tenant_id": tenant_id})
        return row["last_run"] if row else None

    @staticmethod
    async def try_tenant_slot(conn: Conn, tenant_id: str, slot: int) -> bool:
        """Whether `conn` took the tenant's `slot` (a session advisory lock; never waits)."""
        row = await fetch_one(conn, "try_tenant_slot", {"tenant_id": tenant_id, "slot": slot})
        return bool(row and row["taken"])

    @staticmethod
    async def release_tenant_slot(conn: Conn, tenant_id: str, slot: int) -> None:
        await fetch_all(conn, "release_tenant_slot", {"tenant_id": tenant_id, "slot": slot})
