"""Opening the database: the URL and the server checked with their real cause, then the pool and the
schema (db/schema.py runs the statements). Every failure is a ConfigurationError naming MEMORY_AGENT_DATABASE_URL."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TypeVar

import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import AsyncConnectionPool

from memory_agent.db.connector import Connector
from memory_agent.db.migrations import MigrationReport
from memory_agent.db.pooled import create_pool
from memory_agent.db.schema import SchemaManager
from memory_agent.errors import ConfigurationError
from memory_agent.settings import DatabaseSettings

C = TypeVar("C", bound=Connector)


async def check_database(url: str, timeout: float) -> None:
    """One direct connection, before the pool: a bad URL fails at once, and an unreachable server fails
    within `timeout` with its real cause (refused, unknown host, authentication, missing database)."""
    try:
        conninfo_to_dict(url)
    except psycopg.ProgrammingError as exc:
        detail = " ".join(str(exc).split())
        raise ConfigurationError(
            f"MEMORY_AGENT_DATABASE_URL is not a valid PostgreSQL URL ({detail}): give one such as "
            "postgresql://user:password@host:5432/dbname, or unset it to use the embedded database"
        ) from None
    try:
        # libpq's own connect_timeout counts per host and address and is at least 2 s: bound the whole attempt.
        conn = await asyncio.wait_for(
            psycopg.AsyncConnection.connect(url, connect_timeout=max(2, int(timeout))), timeout
        )
    except TimeoutError:
        raise ConfigurationError(
            f"PostgreSQL did not answer within {timeout}s (MEMORY_AGENT_CONNECT_TIMEOUT_S); check "
            "MEMORY_AGENT_DATABASE_URL (unset it to use the embedded database)"
        ) from None
    except psycopg.Error as exc:
        cause = " ".join(str(exc).split()) or type(exc).__name__
        raise ConfigurationError(
            f"cannot connect to PostgreSQL: {cause}; check MEMORY_AGENT_DATABASE_URL (unset it to use the "
            "embedded database)"
        ) from None
    await conn.close()


async def open_connector(
    url: str, database: DatabaseSettings, make: Callable[[AsyncConnectionPool, str], C], *, processing_timeout_s: float
) -> C:
    """`make(pool, schema)` (a Connector) on an open pool (the database group: schema, pool sizes, connect timeout,
    migrations), its schema checked as ours and migrated, and the way its connections name their tenant settled.
    The caller closes its `pool`."""
    await check_database(url, database.connect_timeout_s)
    pool = create_pool(
        url,
        database.db_schema,
        min_size=database.pool_min_size,
        max_size=database.pool_max_size,
        timeout=database.connect_timeout_s,
        processing_timeout_s=processing_timeout_s,
    )
    try:
        await pool.open(wait=True, timeout=database.connect_timeout_s)
    except Exception as exc:
        await pool.close()
        raise ConfigurationError(
            f"cannot connect to PostgreSQL within {database.connect_timeout_s}s: {exc}; "
            "check MEMORY_AGENT_DATABASE_URL (unset it to use the embedded database)"
        ) from exc
    try:
        connector = make(pool, database.db_schema)
        schema = SchemaManager(connector)
        await schema.check_schema_is_ours()
        await schema.migrate(apply=database.auto_migrate)
        await schema.name_tenants()
    except BaseException:
        await pool.close()
        raise
    return connector


async def migrate_database(url: str, schema: str, *, procrastinate: bool, timeout: float = 5.0) -> MigrationReport:
    """Apply everything pending to the database at `url` (what `memory-agent migrate` runs), on one connection."""
    pool = create_pool(url, schema, min_size=1, max_size=1, timeout=timeout, name="memory_agent.migrate")
    try:
        await pool.open(wait=True, timeout=timeout)
    except Exception as exc:
        await pool.close()
        raise ConfigurationError(
            f"cannot connect to PostgreSQL within {timeout}s: {exc}; check MEMORY_AGENT_DATABASE_URL"
        ) from exc
    try:
        manager = SchemaManager(Connector(pool, schema))
        await manager.check_schema_is_ours()
        return await manager.migrate(apply=True, procrastinate=procrastinate)
    finally:
        await pool.close()
