"""A pytest plugin: a real PostgreSQL for every test that asks for one, with memory_agent's schema applied.

Enable it in a conftest.py (`pytest_plugins = ["memory_agent.testing.plugin"]`). The server is the embedded one
(a scratch data directory, deleted when the run ends), or the one of MEMORY_AGENT_TEST_DSN (a URL whose role may
create databases). One template database with the migrations applied is built per run; each test that asks for
`memory_agent_database_url` gets its own copy (CREATE DATABASE ... TEMPLATE, about 0.15 s), checked by the
integrity checker after the test and dropped. A test that breaks the store on purpose carries
`@pytest.mark.no_integrity_check`. How to use it: docs/how-to/test-with-postgres.md.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Iterator

import psycopg
import pytest

from memory_agent.testing.queries import check_integrity, create_database, drop_database

DSN_VARIABLE = "MEMORY_AGENT_TEST_DSN"
SCHEMA = "memory_agent"
NO_INTEGRITY_CHECK = "no_integrity_check"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", f"{NO_INTEGRITY_CHECK}: the test breaks the store on purpose; skip the integrity checker at its end"
    )


def _migrate(url: str) -> None:
    from memory_agent.db.backend import MemoryBackend

    async def migrate() -> None:
        pool = MemoryBackend.create_pool(url, SCHEMA)
        await pool.open(wait=True)
        try:
            await MemoryBackend(pool, SCHEMA).setup()
        finally:
            await pool.close()

    asyncio.run(migrate())


@pytest.fixture(scope="session")
def memory_agent_server_url() -> Iterator[str]:
    """The URL of the test run's server: MEMORY_AGENT_TEST_DSN's, else an embedded one started for the run."""
    dsn = os.environ.get(DSN_VARIABLE)
    if dsn:
        yield dsn
        return
    from memory_agent.db.embedded import scratch_data_dir, start_embedded_postgres
    from memory_agent.settings import MemorySettings

    install_dir = MemorySettings().database.embedded_install_dir
    yield start_embedded_postgres(
        scratch_data_dir("memory_agent_test_"), cleanup_mode="delete", install_dir=install_dir
    )


@pytest.fixture(scope="session")
def memory_agent_template(memory_agent_server_url: str) -> Iterator[str]:
    """The name of the run's template database: memory_agent's migrations applied, no rows (dropped at the end).
    A name of its own per run: runs sharing a server never drop each other's."""
    name = f"memory_agent_template_{uuid.uuid4().hex[:12]}"
    refused: str | None = None
    try:
        url = create_database(memory_agent_server_url, name)
    except psycopg.Error as exc:
        refused = f"{type(exc).__name__}: {exc}"
    if refused is not None:  # outside the except block: the message alone, not the driver's chain
        where = DSN_VARIABLE if os.environ.get(DSN_VARIABLE) else "the embedded server"
        pytest.fail(
            f"memory_agent's test databases need a server whose role may create databases; {where} refused "
            f"({refused}). Set {DSN_VARIABLE} to such a URL, or unset it for the embedded server.",
            pytrace=False,
        )
    try:
        _migrate(url)
        yield name
    finally:  # a migration that failed leaves no template behind either
        drop_database(memory_agent_server_url, name)


def private_database(
    request: pytest.FixtureRequest, server_url: str, prefix: str, template: str | None
) -> Iterator[str]:
    """A database private to the test (a copy of `template`, else empty); the integrity checker runs on it after
    the test (unless it is marked no_integrity_check), then it is dropped."""
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    url = create_database(server_url, name, template=template)
    yield url
    try:
        # Services the test opened are closed by now (fixtures that use this one tear down first).
        if request.node.get_closest_marker(NO_INTEGRITY_CHECK) is None:
            check_integrity(url)
    finally:
        drop_database(server_url, name)


@pytest.fixture
def memory_agent_database_url(
    request: pytest.FixtureRequest, memory_agent_server_url: str, memory_agent_template: str
) -> Iterator[str]:
    """A fresh database with memory_agent's schema applied, private to the test: give it to MemoryService
    (`database_url=`) or MEMORY_AGENT_DATABASE_URL."""
    yield from private_database(request, memory_agent_server_url, "t", memory_agent_template)


@pytest.fixture
def memory_agent_other_database_url(
    request: pytest.FixtureRequest, memory_agent_server_url: str, memory_agent_template: str
) -> Iterator[str]:
    """A second fresh database with the schema applied, for a test that moves rows between two."""
    yield from private_database(request, memory_agent_server_url, "o", memory_agent_template)


@pytest.fixture
def memory_agent_empty_database_url(request: pytest.FixtureRequest, memory_agent_server_url: str) -> Iterator[str]:
    """A fresh database without the schema, private to the test (what a service's first start migrates)."""
    yield from private_database(request, memory_agent_server_url, "e", None)
