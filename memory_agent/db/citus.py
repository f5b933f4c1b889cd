"""memory_agent on Citus: the distribution of every table (sql/distribution.sql), applied by the migrator after
the migrations whenever the citus extension is installed in the database. Part of Migrator (migrate.py), under its
session lock and in its schema.

While a table of the schema is not distributed (a fresh schema, or a migration added one), the migrations'
transaction distributes it before it creates the views and functions of sql/definitions: created over a table
Citus does not know yet, each would be made on the coordinator alone, with a WARNING ("... has dependency to table
... that is not in Citus' metadata"). Created after it, they reach the workers as every later re-creation does; in
the same transaction, so no process ever finds the schema without them. The file runs again after them, for the
settings it gives the functions. The views a released migration creates (0003's)
are dropped for the definitions' in the same transaction: they are made on the coordinator alone, without the
warning (citus.enable_ddl_propagation off for that statement).
"""

from __future__ import annotations

import logging
import re
from typing import Any

import psycopg

from memory_agent import resources
from memory_agent.db.connector import execute_query, fetch_all
from memory_agent.db.migrations import split_statements

logger = logging.getLogger("memory_agent.migrate")

# A statement that creates a view (split_statements gives it with the comments before it).
_CREATES_VIEW = re.compile(r"(?:\s*--[^\n]*\n)*\s*CREATE\s+(?:OR\s+REPLACE\s+)?VIEW\b", re.IGNORECASE)


class CitusDistribution:
    """Migrator's Citus half; Migrator gives it the connection, the schema and _enter_schema."""

    conn: psycopg.AsyncConnection[Any]
    schema: str

    async def _enter_schema(self, create: bool) -> None:
        raise NotImplementedError

    async def undistributed(self) -> bool:
        """Whether a table of the schema (not the migration records, not procrastinate's) is not distributed yet."""
        return bool((await fetch_all(self.conn, "citus_undistributed", {"schema": self.schema}))[0]["undistributed"])

    async def citus_installed(self) -> bool:
        return bool((await fetch_all(self.conn, "citus_installed"))[0]["installed"])

    async def _execute_file(self, text: str, citus: bool, *, local_views: bool = False) -> None:
        """A file of statements: in one round trip, or on Citus one statement at a time (split_statements); with
        `local_views`, its views on the coordinator alone (a numbered migration's, replaced by the definitions)."""
        for statement in split_statements(text) if citus else [text]:
            if local_views and citus and _CREATES_VIEW.match(statement):
                (before,) = await fetch_all(self.conn, "citus_ddl_propagation", {"propagate": "off"})
                await execute_query(self.conn, statement.encode())
                await execute_query(self.conn, "citus_ddl_propagation", {"propagate": before["previous"]})
                continue
            await execute_query(self.conn, statement.encode())  # bytes: no parameters

    async def distribute_tables(self) -> None:
        """sql/distribution.sql in the current transaction (the migrations'), before the definitions are created."""
        await self._execute_file(resources.distribution(), citus=True)

    async def distribute(self, *, changed: bool) -> bool:
        """Apply sql/distribution.sql when citus is installed and the definitions were re-created (`changed`: they
        lose what the file sets on them) or a table of the schema is not distributed yet; whether it was applied."""
        async with self.conn.transaction():
            await self._enter_schema(create=False)
            if not await self.citus_installed():
                return False
            if not changed and not await self.undistributed():
                return False
            await self._execute_file(resources.distribution(), citus=True)
        logger.info("Applied memory_agent's Citus distribution to schema %s", self.schema)
        return True
