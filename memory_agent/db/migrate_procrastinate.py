"""procrastinate's schema in memory_agent's: created from its schema.sql when absent, upgraded through
procrastinate's own migration files (`procrastinate/sql/migrations/XX.YY.ZZ_NN_name.sql`) when the installed
procrastinate ships newer ones; `schema_procrastinate` records what was applied. Part of Migrator (migrate.py),
under its session lock and in its schema."""

from __future__ import annotations

import logging
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import psycopg

from memory_agent.db.connector import execute_query, fetch_all
from memory_agent.db.migrations import PROCRASTINATE_MARKERS, procrastinate_key, procrastinate_migrations
from memory_agent.errors import ConfigurationError

logger = logging.getLogger("memory_agent.migrate")


class ProcrastinateMigrations:
    """Migrator's procrastinate half; Migrator gives it the connection, the schema and these two methods."""

    conn: psycopg.AsyncConnection[Any]
    schema: str

    def _session_lock(self) -> AbstractAsyncContextManager[None]:
        raise NotImplementedError

    async def _enter_schema(self, create: bool) -> None:
        raise NotImplementedError

    async def migrate_procrastinate(self, *, apply: bool = True) -> list[str]:
        """Create or upgrade procrastinate's schema; returns what was applied ('schema.sql' or migration files)."""
        from procrastinate import __version__ as procrastinate_version
        from procrastinate.schema import SchemaManager

        files = procrastinate_migrations()
        newest = files[-1].name
        applied: list[str] = []
        async with self._session_lock(), self.conn.transaction():
            await self._enter_schema(create=apply)
            if apply:
                await fetch_all(self.conn, "create_schema_migrations")
            elif not (await fetch_all(self.conn, "migrations_table_present"))[0]["present"]:
                raise ConfigurationError(
                    f"schema {self.schema!r} has no memory_agent tables and MEMORY_AGENT_AUTO_MIGRATE is off: "
                    "run `memory-agent migrate`"
                )
            state = (await fetch_all(self.conn, "procrastinate_state"))[0]
            recorded = sorted(state["recorded"] or [], key=procrastinate_key)
            if not state["present"]:
                pending_files: list[Path] = []
                if apply:
                    await execute_query(self.conn, SchemaManager.get_schema().encode())
                    # schema.sql is every migration applied: recorded as the newest file it ships.
                    await fetch_all(
                        self.conn, "record_procrastinate", {"migration": newest, "version": procrastinate_version}
                    )
                    applied.append("schema.sql")
                else:
                    raise ConfigurationError(
                        f"procrastinate's tables are missing from schema {self.schema!r} and "
                        "MEMORY_AGENT_AUTO_MIGRATE is off: run `memory-agent migrate --procrastinate`"
                    )
            else:
                level = recorded[-1] if recorded else await self._date_procrastinate_schema()
                if procrastinate_key(level) > procrastinate_key(newest):
                    raise ConfigurationError(
                        f"procrastinate's schema in {self.schema!r} is at {level}, newer than the installed "
                        f"procrastinate {procrastinate_version} knows ({newest}): upgrade procrastinate"
                    )
                pending_files = [p for p in files if procrastinate_key(p.name) > procrastinate_key(level)]
                if pending_files and not apply:
                    raise ConfigurationError(
                        f"procrastinate's schema in {self.schema!r} is at {level}, behind the installed "
                        f"procrastinate {procrastinate_version}, and MEMORY_AGENT_AUTO_MIGRATE is off: run "
                        "`memory-agent migrate --procrastinate`"
                    )
                if apply and not recorded:
                    await fetch_all(self.conn, "record_procrastinate", {"migration": level, "version": "unrecorded"})
            for path in pending_files:
                await execute_query(self.conn, path.read_bytes())
                await fetch_all(
                    self.conn, "record_procrastinate", {"migration": path.name, "version": procrastinate_version}
                )
                applied.append(path.name)
        if applied:
            logger.info("procrastinate schema in %s: applied %s", self.schema, applied)
        return applied

    async def _date_procrastinate_schema(self) -> str:
        """The migration level of a procrastinate schema created before levels were recorded."""
        present = set((await fetch_all(self.conn, "procrastinate_markers"))[0]["functions"] or [])
        for function, level in PROCRASTINATE_MARKERS:
            if function in present:
                return level
        raise ConfigurationError(
            f"procrastinate's schema in {self.schema!r} predates procrastinate 3.0 and cannot be upgraded by "
            "memory_agent: upgrade it with procrastinate's own migrations (procrastinate schema --migrations-path)"
        )
