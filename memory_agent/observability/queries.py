"""ObservabilityQueries: the read side's statements (sql/queries/observability.sql over the views and functions of
sql/definitions/, sql/queries/health.sql's bounded aggregates, and the weekly upgrade report), one method per
operation; the only code of observability/ that runs a statement. Nothing here writes."""

from __future__ import annotations

import datetime as dt
from datetime import date
from typing import Any

import psycopg

from memory_agent.db.connector import Connector, fetch_one

Row = dict[str, Any]

# Sort memory for the percentiles of health(), set for their transaction only: at PostgreSQL's default (4 MB)
# sorting the generation times of a few hundred thousand summaries spills to temporary files.
HEALTH_SORT_MEMORY = "32MB"


class ObservabilityQueries:
    """Observability's statements, each on a pooled connection of `connector` (a transaction where it says so)."""

    def __init__(self, connector: Connector) -> None:
        self.connector = connector

    async def conversation(self, key: Row) -> Row | None:
        """The conversation's memory_health row (`key`: conversation_id, user_id); None when none is stored."""
        return await self.connector.fetch_one("observe_conversation", key)

    async def version_chain(self, key: Row) -> list[Row]:
        return await self.connector.fetch_all("observe_version_chain", key)

    async def round_context(self, key: Row, round_number: int) -> Row | None:
        """The round's metrics as round_context shows them; None when the round has no metrics row."""
        return await self.connector.fetch_one("observe_round_context", {**key, "round_number": round_number})

    async def context_parts(self, key: Row, round_number: int) -> list[Row]:
        """The parts of the round's model input (memory, recall, gap, input), oldest message first."""
        return await self.connector.fetch_all("observe_context_at_round", {**key, "round_number": round_number})

    async def message_visibility(self, conversation_id: str, sequence_number: int, text: str | None) -> list[Row]:
        params = {"conversation_id": conversation_id, "sequence_number": sequence_number, "text": text}
        return await self.connector.fetch_all("observe_message_visibility", params)

    async def stuck_processing(self, older_than_s: float) -> list[Row]:
        return await self.connector.fetch_all("observe_stuck_processing", {"older_than_s": older_than_s})

    async def last_hour(self, now: dt.datetime) -> Row:
        row = await self.connector.fetch_one("health_last_hour", {"now": now})
        assert row is not None  # aggregates: always one row
        return row

    async def round_totals(self) -> Row:
        row = await self.connector.fetch_one("health_round_totals", {})
        assert row is not None  # aggregates: always one row
        return row

    async def lag_totals(self, limit: int) -> Row:
        """The lag aggregates and the ids of the `limit` most lagging conversations (and their users)."""
        row = await self.connector.fetch_one("health_lag_totals", {"limit": limit})
        assert row is not None  # aggregates: always one row
        return row

    async def summary_totals(self) -> Row:
        return (await self._sorted("health_summary_totals"))[0]

    async def model_stats(self) -> list[Row]:
        return await self._sorted("health_model_stats")

    async def _sorted(self, name: str) -> list[Row]:
        """Run `name`, whose percentiles sort every completed summary, with HEALTH_SORT_MEMORY for its sorts."""
        async with self.connector.transaction() as conn:
            await self.connector.fetch_all("health_sort_memory", {"work_mem": HEALTH_SORT_MEMORY}, conn=conn)
            return await self.connector.fetch_all(name, {}, conn=conn)

    async def conversations(self, named: Row, stuck_after_s: float) -> list[Row]:
        """memory_health's rows of the `named` conversations, their stuck counts after `stuck_after_s`."""
        async with self.connector.transaction() as conn:
            await self.connector.fetch_all("health_stuck_after", {"stuck_after_s": str(stuck_after_s)}, conn=conn)
            return await self.connector.fetch_all("health_conversations", named, conn=conn)

    async def generation_time(self) -> Row:
        return await self.connector.fetch_one("observe_generation_time", {}) or {}

    async def window_progression(self, key: Row, limit: int) -> list[Row]:
        return await self.connector.fetch_all("observe_window_progression", {**key, "limit": limit})

    async def weekly_report(self) -> list[Row]:
        return await self.connector.fetch_all("observe_weekly_report", {})

    @staticmethod
    async def try_demo_lock(conn: psycopg.AsyncConnection[Any]) -> bool:
        """Whether `conn` took the demo's lock (a session advisory lock; never waits): `memory-agent demo` writes the
        rounds it then shows, and two demos at once would clear and interleave each other's."""
        row = await fetch_one(conn, "try_demo_lock")
        return bool(row and row["taken"])

    async def upgrade_report(self, tenant_id: str | None, since: date) -> list[Row]:
        """upgrade_report_weekly's rows from the ISO week starting `since` (one tenant when named), newest first."""
        return await self.connector.fetch_all("upgrade_report", {"tenant_id": tenant_id, "since": since})
