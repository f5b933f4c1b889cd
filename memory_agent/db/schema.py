"""The schema of a Connector: `SchemaManager(connector)` composes memory_agent's migrations (migrate.py),
procrastinate's schema (migrate_procrastinate.py) and the Citus distribution (citus.py), parts it holds; every
statement they run goes through `SchemaStatements`, on the one connection a run holds. Also the checks made when
a database is opened: the schema is ours, and how a role bound by row-level security names its tenant on Citus.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import psycopg
from psycopg import sql

from memory_agent.db.citus import CitusDistribution
from memory_agent.db.connector import Connector, Row, execute_query, fetch_all
from memory_agent.db.migrate import SchemaMigrations
from memory_agent.db.migrate_procrastinate import ProcrastinateSchema
from memory_agent.db.migrations import Migration, MigrationReport, concurrent_index, split_statements
from memory_agent.errors import ConfigurationError

logger = logging.getLogger("memory_agent")

# The tables memory_agent creates in its schema (a schema without `schema_migrations` holding one of these is not ours).
OWN_TABLES = ("conversations", "messages", "memory", "round_metrics")

# A statement that creates a view (split_statements gives it with the comments before it).
_CREATES_VIEW = re.compile(r"(?:\s*--[^\n]*\n)*\s*CREATE\s+(?:OR\s+REPLACE\s+)?VIEW\b", re.IGNORECASE)


class SchemaStatements:
    """The schema's statements on the one autocommit connection a migration run holds (the parts name no
    statement of their own)."""

    def __init__(self, conn: psycopg.AsyncConnection[Any], schema: str) -> None:
        self.conn = conn
        self.schema = schema
        self._lock_key = f"memory_agent.setup:{schema}"

    async def _rows(self, name: str, params: dict[str, Any] | None = None) -> list[Row]:
        return await fetch_all(self.conn, name, params)

    def transaction(self) -> AbstractAsyncContextManager[Any]:
        return self.conn.transaction()

    @asynccontextmanager
    async def session_lock(self) -> AsyncIterator[None]:
        """The schema's migration lock for the whole run, taken outside any transaction.

        Waiting processes poll instead of blocking: a transaction blocked on the lock would hold a snapshot that
        CREATE INDEX CONCURRENTLY (run by the holder) waits for, a deadlock.
        """
        delay = 0.02
        while not (await self._rows("try_migration_lock", {"key": self._lock_key}))[0]["locked"]:
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.5)
        try:
            yield
        finally:
            await self._rows("release_migration_lock", {"key": self._lock_key})

    async def enter_schema(self, create: bool) -> None:
        """In the current transaction: the schema's lock, the schema (created when missing and `create`) first on
        the search path."""
        await execute_query(self.conn, "migration_xact_lock", {"key": self._lock_key})
        ident = sql.Identifier(self.schema)
        # Only when missing: a role that may not create schemas (one bound by row-level security) still checks and
        # applies nothing when the schema is up to date.
        if create and not (await self._rows("schema_present", {"schema": self.schema}))[0]["present"]:
            await execute_query(self.conn, sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(ident))
        await execute_query(self.conn, sql.SQL("SET LOCAL search_path TO {}, public").format(ident))
        # On Citus, a transaction that re-creates functions after DDL on distributed tables must use one
        # connection per node (a placeholder setting, without effect, on a PostgreSQL without citus).
        await execute_query(self.conn, "citus_sequential_modify")

    async def records(self) -> Row:
        """Whether the migration record exists, with its checksum column, and the definitions' record."""
        return (await self._rows("migrations_table_present"))[0]

    async def create_records(self) -> None:
        await self._rows("create_schema_migrations")

    async def applied(self, *, checksums: bool) -> list[Row]:
        return await self._rows("applied_migrations" if checksums else "applied_versions")

    async def backfill_checksum(self, version: int, checksum: str) -> None:
        await self._rows("backfill_checksum", {"version": version, "checksum": checksum})

    async def applied_definitions(self) -> dict[str, str]:
        return {row["name"]: row["checksum"] for row in await self._rows("applied_definitions")}

    async def drop_definitions(self, *, forget: bool = False) -> None:
        await self._rows("drop_definitions")
        if forget:
            await self._rows("forget_definitions")

    async def record_migration(self, migration: Migration) -> None:
        params = {"version": migration.version, "name": migration.name, "checksum": migration.checksum}
        await self._rows("record_migration", params)

    async def record_definition(self, name: str, checksum: str) -> None:
        await self._rows("record_definition", {"name": name, "checksum": checksum})

    async def run_script(self, text: str, *, split: bool = False, local_views: bool = False) -> None:
        """A file of statements: in one round trip, or with `split` (on Citus) one statement at a time
        (split_statements); with `local_views`, its views on the coordinator alone (citus.py says why)."""
        for statement in split_statements(text) if split else [text]:
            if local_views and split and _CREATES_VIEW.match(statement):
                (before,) = await self._rows("citus_ddl_propagation", {"propagate": "off"})
                await execute_query(self.conn, statement.encode())
                await execute_query(self.conn, "citus_ddl_propagation", {"propagate": before["previous"]})
                continue
            await execute_query(self.conn, statement.encode())  # bytes: no parameters

    async def run_outside_transaction(self, migration: Migration) -> None:
        """A no-transaction file, statement by statement in autocommit in the schema, then recorded."""
        saved = (await self._rows("current_search_path"))[0]["search_path"]
        try:
            await execute_query(self.conn, sql.SQL("SET search_path TO {}, public").format(sql.Identifier(self.schema)))
            for statement in migration.statements():
                index = concurrent_index(statement)
                if index is not None and (await self._rows("index_invalid", {"name": index}))[0]["invalid"]:
                    logger.warning("Index %s was left invalid by an earlier build; it is built again", index)
                    drop = sql.SQL("DROP INDEX CONCURRENTLY {}").format(sql.Identifier(self.schema, index))
                    await execute_query(self.conn, drop)
                await execute_query(self.conn, statement.encode())
            await self.record_migration(migration)
        finally:
            await execute_query(self.conn, "restore_search_path", {"search_path": saved})

    async def citus_installed(self) -> bool:
        return bool((await self._rows("citus_installed"))[0]["installed"])

    async def undistributed(self) -> bool:
        """Whether a table of the schema (not the migration records, not procrastinate's) is not distributed yet."""
        return bool((await self._rows("citus_undistributed", {"schema": self.schema}))[0]["undistributed"])

    async def procrastinate_state(self) -> Row:
        return (await self._rows("procrastinate_state"))[0]

    async def record_procrastinate(self, migration: str, version: str) -> None:
        await self._rows("record_procrastinate", {"migration": migration, "version": version})

    async def procrastinate_functions(self) -> set[str]:
        return set((await self._rows("procrastinate_markers"))[0]["functions"] or [])


class SchemaManager:
    """The schema of `connector`: its migrations (`migrations`), procrastinate's schema (`procrastinate`) and, on
    Citus, the distribution (`citus`), each run on one of the connector's connections."""

    def __init__(self, connector: Connector, *, migrations: list[Migration] | None = None) -> None:
        self.connector = connector
        self.schema = connector.schema
        self.citus = CitusDistribution(self.schema)
        self.migrations = SchemaMigrations(self.schema, self.citus, migrations)
        self.procrastinate = ProcrastinateSchema(self.schema)

    async def migrate(self, *, apply: bool = True, procrastinate: bool = False) -> MigrationReport:
        """Apply pending migrations (apply=False: ConfigurationError unless the schema is up to date); safe when
        several processes call it at once. With `procrastinate`, procrastinate's schema too."""
        async with self.connector.session() as conn:
            statements = SchemaStatements(conn, self.schema)
            report = await self.migrations.migrate(statements, apply=apply)
            if procrastinate:
                report.procrastinate = await self.procrastinate.migrate(statements, apply=apply)
        return report

    async def migrate_procrastinate(self, *, apply: bool = True) -> list[str]:
        """Create or upgrade procrastinate's tables in our schema; returns what was applied."""
        async with self.connector.session() as conn:
            return await self.procrastinate.migrate(SchemaStatements(conn, self.schema), apply=apply)

    async def check_schema_is_ours(self) -> None:
        """ConfigurationError when the schema holds tables with our names that memory_agent did not create
        (an app's own `public.messages`, say): migrating there would fail or mix the two."""
        row = await self.connector.fetch_one("schema_clash", {"schema": self.schema, "tables": list(OWN_TABLES)})
        if row and row["foreign_tables"]:
            names = ", ".join(f"{self.schema}.{name}" for name in row["foreign_tables"])
            raise ConfigurationError(
                f"schema {self.schema!r} already holds {names}, which memory_agent did not create; set "
                "MEMORY_AGENT_DB_SCHEMA to a schema of memory_agent's own (default memory_agent)"
            )

    async def on_citus(self) -> bool:
        """Whether the database is a Citus cluster's (the citus extension is installed)."""
        row = await self.connector.fetch_one("citus_installed")
        return bool(row and row["installed"])

    async def name_tenants(self) -> None:
        """How the connector's connections name their tenant: detected once, at open. On Citus, with a role bound
        by row-level security, per transaction (Connector.name_per_transaction): Citus checks the policies again on
        the workers' shards, through connections of its own that never see a session's setting."""
        if not (await self.connector.detect_row_security() and await self.on_citus()):
            return
        row = await self.connector.fetch_one("citus_propagates_set_local")
        if not (row and row["propagates"]):
            raise ConfigurationError(
                "row-level security binds this role, and this Citus cluster cannot carry a transaction's tenant "
                "to its workers (the server has no citus.propagate_set_commands): connect as the "
                f"role that owns schema {self.schema!r} (or one that bypasses row-level security)"
            )
        self.connector.name_per_transaction()

    async def analyze_young_tables(self, min_changes: int = 50, max_rows: int = 1_000_000) -> list[str]:
        """ANALYZE the round path's tables that grew past twice their analyzed size plus `min_changes` rows (below
        `max_rows` rows): the cached plans of every connection are then made again on their real size (why:
        sql/definitions, analyze_young_tables; run every MEMORY_AGENT_ANALYZE_INTERVAL_S by the service). Empty when
        another process is at it."""
        params = {"min_changes": min_changes, "max_rows": max_rows}
        return [row["analyzed"] for row in await self.connector.fetch_all("analyze_young_tables", params)]
