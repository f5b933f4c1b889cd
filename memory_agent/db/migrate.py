"""memory_agent's migrations, a part of SchemaManager (db/schema.py, which runs their statements): the numbered
files and the re-creatable definitions.

- Numbered files `sql/migrations/NNNN_name.sql` are applied in order, each recorded in `schema_migrations` with the sha256
  of the file. A released file is never edited: an applied file whose checksum changed is an error, and so is a
  database at a version this code does not know (a newer memory_agent migrated it).
- A file whose first lines hold `-- memory_agent: no-transaction` (CREATE INDEX CONCURRENTLY on a big table) runs
  statement by statement in autocommit; its statements must be idempotent (IF NOT EXISTS) since a crash can
  leave it half done. Every other file runs in a transaction under `pg_advisory_xact_lock`. A run holds the
  schema's advisory lock at session level from start to end, so concurrent processes apply each file once.
- `sql/definitions/*.sql` (views and functions) are created once, after the migrations, and re-created in the
  migration transaction whenever a file of them changes or a migration runs: a migration never carries a view.
"""

from __future__ import annotations

import logging
from typing import Any

import psycopg

from memory_agent.db.citus import CitusDistribution
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
    "SchemaMigrations",
    "checksum",
    "load_migrations",
    "procrastinate_migrations",
]

# The run's statements (db/schema.py's SchemaStatements), named without importing the module that holds this part.
SchemaStatements = Any

logger = logging.getLogger("memory_agent.migrate")


class SchemaMigrations:
    """Applies (or, with apply=False, only checks) memory_agent's files in `schema`, through a run's
    SchemaStatements; the distribution on Citus through the CitusDistribution it is given."""

    def __init__(self, schema: str, citus: CitusDistribution, migrations: list[Migration] | None = None) -> None:
        self.schema = schema
        self.citus = citus
        self.migrations = load_migrations() if migrations is None else migrations

    async def migrate(self, db: SchemaStatements, *, apply: bool = True) -> MigrationReport:
        """Bring the schema to this code's version (apply=False: raise ConfigurationError if it is not)."""
        report = MigrationReport()
        try:
            async with db.session_lock():
                await self._migrate(db, apply, report)
                if apply:
                    changed = bool(report.applied or report.definitions)
                    report.distributed = await self.citus.distribute(db, changed=changed)
                return report
        except psycopg.errors.InsufficientPrivilege as exc:
            raise ConfigurationError(
                f"this role may not migrate schema {self.schema!r} ({exc.diag.message_primary}); run `memory-agent "
                "migrate` as the role that owns it and set MEMORY_AGENT_AUTO_MIGRATE=false for this one"
            ) from exc

    async def _migrate(self, db: SchemaStatements, apply: bool, report: MigrationReport) -> MigrationReport:
        while True:
            async with db.transaction():
                await db.enter_schema(create=apply)
                pending = await self._pending(db, apply)
                if not apply:
                    await self._check_up_to_date(db, pending)
                    return report
                segment = []
                for migration in pending:
                    if not migration.transactional:
                        break
                    segment.append(migration)
                await self._apply_segment(db, segment, report)
            if len(segment) == len(pending):
                return report
            migration = pending[len(segment)]
            # One no-transaction file, statement by statement (the session lock is held).
            await db.run_outside_transaction(migration)
            report.applied.append(migration.filename)
            logger.info(
                "Applied memory_agent migration %s (no transaction) to schema %s", migration.filename, self.schema
            )

    async def _pending(self, db: SchemaStatements, apply: bool) -> list[Migration]:
        """The files not applied yet; raises when an applied one changed or the database is ahead of the code."""
        state = await db.records()
        if not state["present"]:
            if apply:
                await db.create_records()
            return list(self.migrations)
        if apply and not (state["has_checksum"] and state["has_definitions"]):
            await db.create_records()
            state["has_checksum"] = True
        applied = await db.applied(checksums=state["has_checksum"])
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
                    await db.backfill_checksum(row["version"], recorded)
            if recorded != migration.checksum:
                raise ConfigurationError(
                    f"migration file {migration.filename} was changed after it was applied to schema "
                    f"{self.schema!r} (checksum {migration.checksum[:12]}…, applied {recorded[:12]}…): released "
                    "migrations are never edited; restore the file and put the change in a new numbered file"
                )
        done = {row["version"] for row in applied}
        return [m for m in self.migrations if m.version not in done]

    async def _check_up_to_date(self, db: SchemaStatements, pending: list[Migration]) -> None:
        stale = await self._stale_definitions(db)
        if pending or stale:
            what = ", ".join(m.filename for m in pending) or "the views and functions of sql/definitions"
            raise ConfigurationError(
                f"schema {self.schema!r} is behind this memory_agent ({what} not applied) and "
                "MEMORY_AGENT_AUTO_MIGRATE is off: run `memory-agent migrate`"
            )

    async def _stale_definitions(self, db: SchemaStatements) -> list[str]:
        recorded = await db.applied_definitions() if (await db.records())["has_definitions"] else {}
        current = {name: digest for name, _, digest in definition_files()}
        return sorted(current) if recorded != current else []

    async def _apply_segment(self, db: SchemaStatements, segment: list[Migration], report: MigrationReport) -> None:
        """Transactional files, then the definitions when anything changed; all in the current transaction."""
        stale = await self._stale_definitions(db)
        if not segment and not stale:
            return
        # Views and functions may read columns a migration changes: dropped first, created after.
        await db.drop_definitions()
        citus = await db.citus_installed()
        for migration in segment:
            await db.run_script(migration.text, split=citus, local_views=True)
            await db.record_migration(migration)
            report.applied.append(migration.filename)
        # Again: a released migration (0003) created views of its own, which the definitions replace.
        await db.drop_definitions(forget=True)
        if report.applied:
            logger.info("Applied memory_agent migrations %s to schema %s", report.applied, self.schema)
        if citus and await db.undistributed():
            # The tables first, in this transaction: the definitions come after them (citus.py says why).
            await self.citus.distribute_tables(db)
        # The views and functions of sql/definitions, recorded (dropped above).
        for name, text, digest in definition_files():
            await db.run_script(text, split=citus)
            await db.record_definition(name, digest)
            report.definitions.append(name)
