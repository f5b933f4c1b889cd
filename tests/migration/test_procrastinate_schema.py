"""procrastinate's schema: created and recorded once, a no-op at the same version, and upgraded through
procrastinate's own migration files from an older state (built by those same files)."""

from __future__ import annotations

import asyncio
from typing import Any

import procrastinate
import psycopg
import pytest
from procrastinate.schema import SchemaManager
from psycopg.rows import dict_row

from memory_agent.db.migrate import procrastinate_migrations
from memory_agent.db.migrate_procrastinate import ProcrastinateSchema
from memory_agent.db.schema import SchemaStatements
from tests.conftest import query

OLD_LEVEL = "03.02.00_50_post_batch_defer_jobs.sql"

# The shape of procrastinate's schema: function signatures, table columns, types.
SHAPE_SQL = """
SELECT 'function ' || p.oid::regprocedure::text FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
WHERE n.nspname = %(schema)s AND p.proname LIKE 'procrastinate%%'
UNION ALL
SELECT 'column ' || c.relname || '.' || a.attname || ' ' || format_type(a.atttypid, a.atttypmod)
FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = %(schema)s AND c.relname LIKE 'procrastinate%%' AND c.relkind = 'r' AND a.attnum > 0
  AND NOT a.attisdropped
UNION ALL
SELECT 'type ' || t.typname FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace
WHERE n.nspname = %(schema)s AND t.typname LIKE 'procrastinate%%' AND t.typtype IN ('e', 'c')
"""


def shape(url: str, schema: str) -> set[str]:
    with psycopg.connect(url) as conn:
        return {row[0] for row in conn.execute(SHAPE_SQL, {"schema": schema})}


async def migrate_procrastinate(url: str, schema: str = "memory_agent") -> list[str]:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True, row_factory=dict_row) as conn:
        return await ProcrastinateSchema(schema).migrate(SchemaStatements(conn, schema))


def build_old_procrastinate(url: str, schema: str, up_to: str) -> None:
    """procrastinate's schema as release `up_to` had it: its migration files from the first, one by one."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
        conn.execute(f'SET search_path TO "{schema}", public')
        for path in procrastinate_migrations():
            conn.execute(path.read_bytes())
            if path.name == up_to:
                return
    raise AssertionError(f"no procrastinate migration {up_to}")


def recorded(url: str) -> list[tuple[Any, ...]]:
    return query(url, "SELECT migration, procrastinate_version FROM schema_procrastinate ORDER BY 1")


def test_created_once_and_recorded_then_a_no_op(database_url):
    newest = procrastinate_migrations()[-1].name
    assert asyncio.run(migrate_procrastinate(database_url)) == ["schema.sql"]
    assert recorded(database_url) == [(newest, procrastinate.__version__)]
    assert asyncio.run(migrate_procrastinate(database_url)) == []
    assert recorded(database_url) == [(newest, procrastinate.__version__)]


@pytest.mark.parametrize("level_recorded", [True, False], ids=["recorded", "dated-by-its-functions"])
def test_an_older_procrastinate_schema_is_upgraded_through_its_migrations(
    database_url, empty_database_url, level_recorded
):
    # The reference: today's schema.sql in a database of its own.
    with psycopg.connect(empty_database_url, autocommit=True) as conn:
        conn.execute('CREATE SCHEMA "memory_agent"')
        conn.execute('SET search_path TO "memory_agent", public')
        conn.execute(SchemaManager.get_schema().encode())
    expected = shape(empty_database_url, "memory_agent")

    build_old_procrastinate(database_url, "memory_agent", OLD_LEVEL)
    if level_recorded:
        query(
            database_url,
            "INSERT INTO schema_procrastinate (migration, procrastinate_version) VALUES (%s, '3.2.0') RETURNING 1",
            [OLD_LEVEL],
        )
    old = shape(database_url, "memory_agent")
    assert old != expected  # an honest older state: something to upgrade

    applied = asyncio.run(migrate_procrastinate(database_url))
    later = [p.name for p in procrastinate_migrations() if p.name > OLD_LEVEL]
    assert applied == later and applied
    assert shape(database_url, "memory_agent") == expected
    assert recorded(database_url)[-1] == (later[-1], procrastinate.__version__)
    assert asyncio.run(migrate_procrastinate(database_url)) == []


def test_a_procrastinate_schema_newer_than_the_installed_one_is_refused(database_url):
    asyncio.run(migrate_procrastinate(database_url))
    query(
        database_url,
        "INSERT INTO schema_procrastinate (migration, procrastinate_version)"
        " VALUES ('99.00.00_01_future.sql', '99.0.0') RETURNING 1",
    )
    from memory_agent import ConfigurationError

    with pytest.raises(ConfigurationError, match="upgrade procrastinate"):
        asyncio.run(migrate_procrastinate(database_url))
