"""MemoryBackend: the conversation tier's statements on the pool (run through db/connector.py, the one seam).

Every statement is a named query from sql/queries/conversation.sql; schema migrations are applied by memory_agent.db.migrate.
Every method on a conversation's rows takes its key as keyword arguments: `user_id` (the distribution column),
and `tenant_id` where rows are created (memory_agent.schemas.keys has the per-conversation default).
Connections come from one psycopg AsyncConnectionPool in autocommit mode, with search_path set to the
memory_agent schema, so a read is one round trip and a write transaction is explicit (`transaction()`).
"""

from __future__ import annotations

import psycopg
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

from memory_agent.db.connector import Row
from memory_agent.db.migrate import MigrationReport, Migrator
from memory_agent.db.pooled import check_pooled_connection, configure_session
from memory_agent.db.round_queries import RoundQueries
from memory_agent.db.summary_queries import SummaryQueries
from memory_agent.errors import (
    ConfigurationError,
)

__all__ = ["OWN_TABLES", "MemoryBackend", "Row"]

# The tables memory_agent creates in its schema (a schema without `schema_migrations` holding one of these is not ours).
OWN_TABLES = ("conversations", "messages", "memory", "round_metrics")


class MemoryBackend(RoundQueries, SummaryQueries):
    """PostgreSQL operations on conversations, messages and the memory version chain (the statements live in
    RoundQueries and SummaryQueries, the plumbing in Connector)."""

    @classmethod
    def create_pool(
        cls,
        conninfo: str,
        schema: str = "memory_agent",
        *,
        min_size: int = 1,
        max_size: int = 10,
        timeout: float = 5.0,
        name: str = "memory_agent",
        processing_timeout_s: float | None = None,
    ) -> AsyncConnectionPool:
        """A closed pool whose connections are autocommit and see only `schema` (then public); with
        `processing_timeout_s`, the views count a `processing` row as stuck after it (processing_timeout())."""

        async def configure(conn: psycopg.AsyncConnection) -> None:
            await configure_session(conn, schema, processing_timeout_s)

        return AsyncConnectionPool(
            conninfo,
            min_size=min_size,
            max_size=max_size,
            timeout=timeout,
            open=False,
            configure=configure,
            kwargs={"row_factory": dict_row},
            name=name,
            # A pooled connection whose server went away is replaced instead of handed out.
            check=check_pooled_connection,
        )

    # ------------------------------------------------------------------ schema

    async def check_schema_is_ours(self) -> None:
        """ConfigurationError when the schema holds tables with our names that memory_agent did not create
        (an app's own `public.messages`, say): migrating there would fail or mix the two."""
        row = await self.fetch_one("schema_clash", {"schema": self.schema, "tables": list(OWN_TABLES)})
        if row and row["foreign_tables"]:
            names = ", ".join(f"{self.schema}.{name}" for name in row["foreign_tables"])
            raise ConfigurationError(
                f"schema {self.schema!r} already holds {names}, which memory_agent did not create; set "
                "MEMORY_AGENT_DB_SCHEMA to a schema of memory_agent's own (default memory_agent)"
            )

    async def migrate(self, *, apply: bool = True, procrastinate: bool = False) -> MigrationReport:
        """Apply pending migrations (apply=False: ConfigurationError unless the schema is up to date); safe when
        several processes call it at once. With `procrastinate`, procrastinate's schema too."""
        async with self.connection() as conn:
            migrator = Migrator(conn, self.schema)
            report = await migrator.migrate(apply=apply)
            if procrastinate:
                report.procrastinate = await migrator.migrate_procrastinate(apply=apply)
        return report

    async def on_citus(self) -> bool:
        """Whether the database is a Citus cluster's (the citus extension is installed)."""
        row = await self.fetch_one("citus_installed")
        return bool(row and row["installed"])

    async def setup(self, *, apply: bool = True) -> list[int]:
        """Apply pending migrations; returns the versions applied."""
        return (await self.migrate(apply=apply)).versions

    async def setup_procrastinate(self, *, apply: bool = True) -> list[str]:
        """Create or upgrade procrastinate's tables in our schema; returns what was applied."""
        async with self.connection() as conn:
            return await Migrator(conn, self.schema).migrate_procrastinate(apply=apply)

    async def analyze_young_tables(self, min_changes: int = 50, max_rows: int = 1_000_000) -> list[str]:
        """ANALYZE the round path's tables that grew past twice their analyzed size plus `min_changes` rows (below
        `max_rows` rows): the cached plans of every connection are then made again on their real size (why:
        sql/definitions, analyze_young_tables; run every MEMORY_AGENT_ANALYZE_INTERVAL_S by the service). Empty when
        another process is at it."""
        rows = await self.fetch_all("analyze_young_tables", {"min_changes": min_changes, "max_rows": max_rows})
        return [row["analyzed"] for row in rows]
