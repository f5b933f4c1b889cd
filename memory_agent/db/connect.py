"""Opening the database: the URL and the server checked with their real cause, then the pool and the
schema. Every failure is a ConfigurationError naming MEMORY_AGENT_DATABASE_URL."""

from __future__ import annotations

import asyncio

import psycopg
from psycopg.conninfo import conninfo_to_dict

from memory_agent.db.backend import MemoryBackend
from memory_agent.db.migrations import MigrationReport
from memory_agent.errors import ConfigurationError
from memory_agent.settings import DatabaseSettings


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


async def open_backend(url: str, database: DatabaseSettings, *, processing_timeout_s: float) -> MemoryBackend:
    """A MemoryBackend on an open pool (the database group: schema, pool sizes, connect timeout, migrations), its
    schema checked as ours and migrated. The caller closes `backend.pool`."""
    await check_database(url, database.connect_timeout_s)
    pool = MemoryBackend.create_pool(
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
        backend = MemoryBackend(pool, database.db_schema)
        await backend.check_schema_is_ours()
        await backend.setup(apply=database.auto_migrate)
        if await backend.detect_row_security() and await backend.on_citus():
            # Citus checks the policies again on the workers' shards, through connections of its own that never see
            # a session's setting: name the tenant in every transaction, with a statement Citus propagates.
            row = await backend.fetch_one("citus_propagates_set_local")
            if not (row and row["propagates"]):
                raise ConfigurationError(
                    "row-level security binds this role, and this Citus cluster cannot carry a transaction's tenant "
                    "to its workers (the server has no citus.propagate_set_commands): connect as the "
                    f"role that owns schema {database.db_schema!r} (or one that bypasses row-level "
                    "security)"
                )
            backend.name_per_transaction()
    except BaseException:
        await pool.close()
        raise
    return backend


async def migrate_database(url: str, schema: str, *, procrastinate: bool, timeout: float = 5.0) -> MigrationReport:
    """Apply everything pending to the database at `url` (what `memory-agent migrate` runs), on one connection."""
    pool = MemoryBackend.create_pool(url, schema, min_size=1, max_size=1, timeout=timeout, name="memory_agent.migrate")
    try:
        await pool.open(wait=True, timeout=timeout)
    except Exception as exc:
        await pool.close()
        raise ConfigurationError(
            f"cannot connect to PostgreSQL within {timeout}s: {exc}; check MEMORY_AGENT_DATABASE_URL"
        ) from exc
    try:
        backend = MemoryBackend(pool, schema)
        await backend.check_schema_is_ours()
        return await backend.migrate(apply=True, procrastinate=procrastinate)
    finally:
        await pool.close()
