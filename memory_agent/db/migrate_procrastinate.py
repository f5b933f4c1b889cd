"""procrastinate's schema in memory_agent's: created from its schema.sql when absent, upgraded through
procrastinate's own migration files (`procrastinate/sql/migrations/XX.YY.ZZ_NN_name.sql`) when the installed
procrastinate ships newer ones; `schema_procrastinate` records what was applied. A part of SchemaManager (schema.py,
which runs its statements), under the migrations' session lock and in their schema."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from memory_agent.db.migrations import PROCRASTINATE_MARKERS, procrastinate_key, procrastinate_migrations
from memory_agent.errors import ConfigurationError

# The run's statements (db/schema.py's SchemaStatements), named without importing the module that holds this part.
SchemaStatements = Any

logger = logging.getLogger("memory_agent.migrate")


class ProcrastinateSchema:
    """procrastinate's schema in `schema`, through a migration run's SchemaStatements."""

    def __init__(self, schema: str) -> None:
        self.schema = schema

    async def migrate(self, db: SchemaStatements, *, apply: bool = True) -> list[str]:
        """Create or upgrade procrastinate's schema; returns what was applied ('schema.sql' or migration files)."""
        from procrastinate import __version__ as procrastinate_version
        from procrastinate.schema import SchemaManager

        files = procrastinate_migrations()
        newest = files[-1].name
        applied: list[str] = []
        async with db.session_lock(), db.transaction():
            await db.enter_schema(create=apply)
            if apply:
                await db.create_records()
            elif not (await db.records())["present"]:
                raise ConfigurationError(
                    f"schema {self.schema!r} has no memory_agent tables and MEMORY_AGENT_AUTO_MIGRATE is off: "
                    "run `memory-agent migrate`"
                )
            state = await db.procrastinate_state()
            recorded = sorted(state["recorded"] or [], key=procrastinate_key)
            if not state["present"]:
                pending_files: list[Path] = []
                if apply:
                    await db.run_script(SchemaManager.get_schema())
                    # schema.sql is every migration applied: recorded as the newest file it ships.
                    await db.record_procrastinate(newest, procrastinate_version)
                    applied.append("schema.sql")
                else:
                    raise ConfigurationError(
                        f"procrastinate's tables are missing from schema {self.schema!r} and "
                        "MEMORY_AGENT_AUTO_MIGRATE is off: run `memory-agent migrate --procrastinate`"
                    )
            else:
                level = recorded[-1] if recorded else await self._date_procrastinate_schema(db)
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
                    await db.record_procrastinate(level, "unrecorded")
            for path in pending_files:
                await db.run_script(path.read_text(encoding="utf-8"))
                await db.record_procrastinate(path.name, procrastinate_version)
                applied.append(path.name)
        if applied:
            logger.info("procrastinate schema in %s: applied %s", self.schema, applied)
        return applied

    async def _date_procrastinate_schema(self, db: SchemaStatements) -> str:
        """The migration level of a procrastinate schema created before levels were recorded."""
        present = await db.procrastinate_functions()
        for function, level in PROCRASTINATE_MARKERS:
            if function in present:
                return level
        raise ConfigurationError(
            f"procrastinate's schema in {self.schema!r} predates procrastinate 3.0 and cannot be upgraded by "
            "memory_agent: upgrade it with procrastinate's own migrations (procrastinate schema --migrations-path)"
        )
