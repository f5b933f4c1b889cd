"""memory_agent on Citus: the distribution of every table (sql/distribution.sql), applied by the migrator after
the migrations and definitions whenever the citus extension is installed in the database. Part of Migrator
(migrate.py), under its session lock and in its schema."""

from __future__ import annotations

import logging
from typing import Any

import psycopg

from memory_agent import resources
from memory_agent.db.connector import execute_query, fetch_all
from memory_agent.db.migrations import split_statements

logger = logging.getLogger("memory_agent.migrate")


class CitusDistribution:
    """Migrator's Citus half; Migrator gives it the connection, the schema and _enter_schema."""

    conn: psycopg.AsyncConnection[Any]
    schema: str

    async def _enter_schema(self, create: bool) -> None:
        raise NotImplementedError

    async def citus_installed(self) -> bool:
        return bool((await fetch_all(self.conn, "citus_installed"))[0]["installed"])

    async def _execute_file(self, text: str, citus: bool) -> None:
        """A file of statements: in one round trip, or on Citus one statement at a time (split_statements)."""
        for statement in split_statements(text) if citus else [text]:
            await execute_query(self.conn, statement.encode())  # bytes: no parameters

    async def distribute(self, *, changed: bool) -> bool:
        """Apply sql/distribution.sql when citus is installed and the definitions were re-created (`changed`: they
        lose what the file sets on them) or a table of the schema is not distributed yet; whether it was applied."""
        async with self.conn.transaction():
            await self._enter_schema(create=False)
            if not await self.citus_installed():
                return False
            if (
                not changed
                and not (await fetch_all(self.conn, "citus_undistributed", {"schema": self.schema}))[0]["undistributed"]
            ):
                return False
            await self._execute_file(resources.distribution(), citus=True)
        logger.info("Applied memory_agent's Citus distribution to schema %s", self.schema)
        return True
