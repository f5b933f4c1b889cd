"""A Citus cluster for tests/citus: the database MEMORY_AGENT_TEST_CITUS_URL names (its coordinator), with the citus
extension installed and at least one worker. Each test gets a schema of its own in it (memory_agent's tables,
distributed by `migrate` as sql/distribution.sql says), dropped afterwards. Without the variable every test here is
skipped, and the run says why."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from tests.conftest import memory_factory

CITUS_URL_VARIABLE = "MEMORY_AGENT_TEST_CITUS_URL"
SKIP_REASON = (
    f"{CITUS_URL_VARIABLE} is not set: tests/citus need a Citus cluster (the coordinator's URL, a database with the "
    "citus extension and at least one worker); see docs/how-to/scaling.md"
)
# Few shards per table: each test distributes a schema of its own (32 shards per table would make that the test's time).
SHARD_COUNT = 4


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not os.environ.get(CITUS_URL_VARIABLE) and terminalreporter.stats.get("skipped"):
        terminalreporter.write_line(f"tests/citus skipped: {SKIP_REASON}")


@pytest.fixture(scope="session")
def citus_url() -> str:
    url = os.environ.get(CITUS_URL_VARIABLE)
    if not url:
        pytest.skip(SKIP_REASON)
    with psycopg.connect(url, autocommit=True) as conn:
        installed = conn.execute("SELECT count(*) FROM pg_extension WHERE extname = 'citus'").fetchone()
        if not installed or not installed[0]:
            pytest.fail(f"{CITUS_URL_VARIABLE} names a database without the citus extension: {url}")
        workers = conn.execute("SELECT count(*) FROM citus_get_active_worker_nodes()").fetchone()
        assert workers and workers[0] >= 1, f"the Citus cluster of {CITUS_URL_VARIABLE} has no active worker"
    params = conninfo_to_dict(url)
    params["options"] = f"{params.get('options', '')} -c citus.shard_count={SHARD_COUNT}".strip()
    return make_conninfo(**params)


@pytest.fixture
def schema(citus_url: str) -> Iterator[str]:
    """A schema of the test's own on the cluster; dropped with everything in it afterwards."""
    name = f"ma_citus_{uuid.uuid4().hex[:10]}"
    yield name
    with psycopg.connect(citus_url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


@pytest.fixture
async def open_memory(citus_url: str, schema: str) -> AsyncIterator[Callable[..., Any]]:
    """open_memory(model=..., **settings) -> an open MemoryService on the test's schema of the cluster."""
    # ANALYZE of a distributed table reads every shard: not on a round's way (docs/how-to/scaling.md).
    settings = dict(database_url=citus_url, db_schema=schema, drain_timeout_s=10, analyze_interval_s=0)
    async with memory_factory(**settings) as factory:
        yield factory


def query(url: str, schema: str, statement: str | sql.Composable, params: Any = None) -> list[tuple[Any, ...]]:
    """Rows of `statement` (none for a statement that returns none), run on the coordinator with search_path on the
    test's schema."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(sql.SQL("SET search_path TO {}, public").format(sql.Identifier(schema)))
        cursor = conn.execute(statement, params)
        return cursor.fetchall() if cursor.description is not None else []
