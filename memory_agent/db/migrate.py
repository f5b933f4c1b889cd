"""Schema migrations: memory_agent's numbered files, the re-creatable definitions, procrastinate's schema.

- Numbered files `sql/migrations/NNNN_name.sql` are applied in order, each recorded in `schema_migrations` with the sha256
  of the file. A released file is never edited: an applied file whose checksum changed is an error, and so is a
  database at a version this code does not know (a newer memory_agent migrated it).
- A file whose first lines hold `-- memory_agent: no-transaction` (CREATE INDEX CONCURRENTLY on a big table) runs
  statement by statement in autocommit; its statements must be idempotent (IF NOT EXISTS) since a crash can
  leave it half done. Every other file runs in a transaction under `pg_advisory_xact_lock`. A run holds the
  schema's advisory lock at session level from start to end, so concurrent processes apply each file once.
- `sql/definitions/*.sql` (views and functions) are created once, after the migrations, and re-created in the
  migration transaction whenever a file of them changes or a migration runs: a migration never carries a view.
- procrastinate's schema is created from its schema.sql when absent, and upgraded through procrastinate's own
  migration files (`procrastinate/sql/migrations/XX.YY.ZZ_NN_name.sql`) when the installed procrastinate ships
  newer ones; `schema_procrastinate` records what was applied.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import psycopg
from psycopg import sql

from memory_agent.db.citus import CitusDistribution
from memory_agent.db.connector import execute_query, fetch_all
from memory_agent.db.migrate_procrastinate import ProcrastinateMigrations
from memory_agent.db.migrations import (
    NO_TRANSACTION_MARKER,
    RELEASED_CHECKSUMS,
    Migration,
    MigrationReport,
    checksum,
    definition_files,
    load_migrations,
    procrastinate_migrations,
)
from memory_agent.errors import ConfigurationError

__all__ = [
    "NO_TRANSACTION_MARKER",
    "RELEASED_CHECKSUMS",
    "Migration",
    "MigrationReport",
    "Migrator",
    "checksum",
    "load_migrations",
    "procrastinate_migrations",
]

logger = logging.getLogger("memory_agent.migrate")


class Migrator(ProcrastinateMigrations, CitusDistribution):
    """Applies (or, with apply=False, only checks) the schema on one autocommit connection; procrastinate's
    schema through ProcrastinateMigrations, the distribution on Citus through CitusDistribution."""

    def __init__(
        self,
        conn: psycopg.AsyncConnection[Any],
        schema: str,
        *,
        migrations: list[Migration] | None = None,
    ) -> None:
        self.conn = conn
        self.schema = schema
        self.migrations = load_migrations() if migrations is None else migrations
        self._lock_key = f"memory_agent.setup:{schema}"

    @asynccontextmanager
    async def _session_lock(self) -> AsyncIterator[None]:
        """The schema's migration lock for the whole run, taken outside any transaction.

        Waiting processes poll instead of blocking: a transaction blocked on the lock would hold a snapshot that
        CREATE INDEX CONCURRENTLY (run by the holder) waits for, a deadlock.
        """
        delay = 0.02
        while not (await fetch_all(self.conn, "try_migration_lock", {"key": self._lock_key}))[0]["locked"]:
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.5)
        try:
            yield
        finally:
            await fetch_all(self.conn, "release_migration_lock", {"key": self._lock_key})

    async def _enter_schema(self, create: bool) -> None:
        await execute_query(self.conn, "migration_xact_lock", {"key": self._lock_key})
        ident = sql.Identifier(self.schema)
        # Only when missing: a role that may not create schemas (one bound by row-level security) still checks and
        # applies nothing when the schema is up to date.
        if create and not (await fetch_all(self.conn, "schema_present", {"schema": self.schema}))[0]["present"]:
            await execute_query(self.conn, sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(ident))
        await execute_query(self.conn, sql.SQL("SET LOCAL search_path TO {}, public").format(ident))
        # On Citus, a transaction that re-creates functions after DDL on distributed tables must use one
        # connection per node (a placeholder setting, without effect, on a PostgreSQL without citus).
        await execute_query(self.conn, "citus_sequential_modify")

    # ------------------------------------------------------------------ memory_agent's files

    async def migrate(self, *, apply: bool = True) -> MigrationReport:
        """Bring the schema to this code's version (apply=False: raise ConfigurationError if it is not)."""
        report = MigrationReport()
        try:
            async with self._session_lock():
                await self._migrate(apply, report)
                if apply:
                    report.distributed = await self.distribute(changed=bool(report.applied or report.definitions))
                return report
        except psycopg.errors.InsufficientPrivilege as exc:
            raise ConfigurationError(
                f"this role may not migrate schema {self.schema!r} ({exc.diag.message_primary}); run `memory-agent "
                "migrate` as the role that owns it and set MEMORY_AGENT_AUTO_MIGRATE=false for this one"
            ) from exc

    async def _migrate(self, apply: bool, report: MigrationReport) -> MigrationReport:
        while True:
            async with self.conn.transaction():
                await self._enter_schema(create=apply)
                pending = await self._pending(apply)
                if not apply:
                    await self._check_up_to_date(pending)
                    return report
                segment = []
                for migration in pending:
                    if not migration.transactional:
                        break
                    segment.append(migration)
                await self._apply_segment(segment, report)
            if len(segment) == len(pending):
                return report
            await self._apply_without_transaction(pending[len(segment)], report)

    async def _pending(self, apply: bool) -> list[Migration]:
        """The files not applied yet; raises when an applied one changed or the database is ahead of the code."""
        state = (await fetch_all(self.conn, "migrations_table_present"))[0]
        if not state["present"]:
            if apply:
                await fetch_all(self.conn, "create_schema_migrations")
            return list(self.migrations)
        if apply and not (state["has_checksum"] and state["has_definitions"]):
            await fetch_all(self.conn, "create_schema_migrations")
            state["has_checksum"] = True
        applied = await fetch_all(self.conn, "applied_migrations" if state["has_checksum"] else "applied_versions")
        known = {m.version: m for m in self.migrations}
        newest_known = max(known, default=0)
        newest_applied = max((row["version"] for row in applied), default=0)
        if newest_applied > newest_known:
            raise ConfigurationError(
                f"schema {self.schema!r} is at version {newest_applied}, this memory_agent knows up to "
                f"{newest_known}: upgrade memory_agent (the database was migrated by a newer release)"
            )
        for row in applied:
            migration = known.get(row["version"])
            if migration is None:
                raise ConfigurationError(
                    f"schema {self.schema!r} has migration {row['version']} ({row['name']}) applied, which this "
                    "memory_agent does not ship: it was migrated by another build of memory_agent"
                )
            recorded = row["checksum"]
            if recorded is None:
                # Applied by a release before checksums: it ran the file as released.
                recorded = RELEASED_CHECKSUMS.get(row["version"])
                if recorded is None:
                    raise ConfigurationError(
                        f"migration {migration.filename} is recorded without a checksum in schema {self.schema!r}"
                    )
                if apply and state["has_checksum"]:
                    await fetch_all(self.conn, "backfill_checksum", {"version": row["version"], "checksum": recorded})
            if recorded != migration.checksum:
                raise ConfigurationError(
                    f"migration file {migration.filename} was changed after it was applied to schema "
                    f"{self.schema!r} (checksum {migration.checksum[:12]}…, applied {recorded[:12]}…): released "
                    "migrations are never edited; restore the file and put the change in a new numbered file"
                )
        done = {row["version"] for row in applied}
        return [m for m in self.migrations if m.version not in done]

    async def _check_up_to_date(self, pending: list[Migration]) -> None:
        stale = await self._stale_definitions()
        if pending or stale:
            what = ", ".join(m.filename for m in pending) or "the views and functions of sql/definitions"
            raise ConfigurationError(
                f"schema {self.schema!r} is behind this memory_agent ({what} not applied) and "
                "MEMORY_AGENT_AUTO_MIGRATE is off: run `memory-agent migrate`"
            )

    async def _stale_definitions(self) -> list[str]:
        state = (await fetch_all(self.conn, "migrations_table_present"))[0]
        recorded = (
            {row["name"]: row["checksum"] for row in await fetch_all(self.conn, "applied_definitions")}
            if state["has_definitions"]
            else {}
        )
        current = {name: digest for name, _, digest in definition_files()}
        return sorted(current) if recorded != current else []

    async def _apply_segment(self, segment: list[Migration], report: MigrationReport) -> None:
        """Transactional files, then the definitions when anything changed; all in the current transaction."""
        stale = await self._stale_definitions()
        if not segment and not stale:
            return
        # Views and functions may read columns a migration changes: dropped first, created after.
        await fetch_all(self.conn, "drop_definitions")
        citus = await self.citus_installed()
        for migration in segment:
            await self._execute_file(migration.text, citus, local_views=True)
            await fetch_all(
                self.conn,
                "record_migration",
                {"version": migration.version, "name": migration.name, "checksum": migration.checksum},
            )
            report.applied.append(migration.filename)
        # Again: a released migration (0003) created views of its own, which the definitions replace.
        await fetch_all(self.conn, "drop_definitions")
        await fetch_all(self.conn, "forget_definitions")
        if report.applied:
            logger.info("Applied memory_agent migrations %s to schema %s", report.applied, self.schema)
        if citus and await self.undistributed():
            # The tables first, in this transaction: the definitions come after them (citus.py says why).
            await self.distribute_tables()
        await self._create_definitions(citus, report)

    async def _create_definitions(self, citus: bool, report: MigrationReport) -> None:
        """The views and functions of sql/definitions, recorded (in the current transaction, dropped before)."""
        for name, text, digest in definition_files():
            await self._execute_file(text, citus)
            await fetch_all(self.conn, "record_definition", {"name": name, "checksum": digest})
            report.definitions.append(name)

    async def _apply_without_transaction(self, migration: Migration, report: MigrationReport) -> None:
        """One no-transaction file, statement by statement (the session lock is held)."""
        saved = (await fetch_all(self.conn, "current_search_path"))[0]["search_path"]
        try:
            ident = sql.Identifier(self.schema)
            await execute_query(self.conn, sql.SQL("SET search_path TO {}, public").format(ident))
            for statement in migration.statements():
                await execute_query(self.conn, statement.encode())
            await fetch_all(
                self.conn,
                "record_migration",
                {"version": migration.version, "name": migration.name, "checksum": migration.checksum},
            )
            report.applied.append(migration.filename)
            logger.info(
                "Applied memory_agent migration %s (no transaction) to schema %s", migration.filename, self.schema
            )
        finally:
            await execute_query(self.conn, "restore_search_path", {"search_path": saved})
