"""A real PostgreSQL for every test: the embedded server by default, MEMORY_AGENT_TEST_DSN for another.

One template database with the migrations applied is built per session; each test gets its own copy
(CREATE DATABASE ... TEMPLATE), dropped afterwards.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from memory_agent import MemoryService, MemorySettings
from memory_agent.db.schema import SchemaManager
from memory_agent.service.backend import MemoryBackend
from tests.integrity import check_integrity

TEMPLATE = "memory_agent_test_template"
# The tests' summarizer is the offline one, by name (a service never falls back to it on its own); the processes
# and CLI runs the tests start inherit it. A test of a real provider sets its own (fake_openai, tests/providers).
os.environ["MEMORY_AGENT_MEMORY_MODEL"] = "offline"

# The suite's tables are the design's: a summary after every round. The shipped cadence (every 12 new messages)
# is tested where it is named (tests/integration/test_cadence.py unsets this); child processes inherit it.
os.environ.setdefault("MEMORY_AGENT_MEMORY_MIN_NEW_MESSAGES", "1")


def with_dbname(url: str, dbname: str) -> str:
    params = conninfo_to_dict(url)
    params["dbname"] = dbname
    return make_conninfo(**params)


@pytest.fixture(scope="session")
def server_url() -> Iterator[str]:
    dsn = os.environ.get("MEMORY_AGENT_TEST_DSN")
    if dsn:
        yield dsn
        return
    from memory_agent.db.embedded import scratch_data_dir, start_embedded_postgres

    install_dir = MemorySettings().database.embedded_install_dir
    yield start_embedded_postgres(
        scratch_data_dir("memory_agent_test_"), cleanup_mode="delete", install_dir=install_dir
    )


@pytest.fixture(scope="session")
def template_url(server_url: str) -> str:
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{TEMPLATE}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{TEMPLATE}"')
    url = with_dbname(server_url, TEMPLATE)

    async def migrate() -> None:
        pool = MemoryBackend.create_pool(url, "memory_agent")
        await pool.open(wait=True)
        try:
            await SchemaManager(MemoryBackend(pool, "memory_agent")).migrate()
        finally:
            await pool.close()

    asyncio.run(migrate())
    return url


def _private_database(
    request: pytest.FixtureRequest, server_url: str, prefix: str, template: str | None
) -> Iterator[str]:
    """A database private to the test; the integrity checker runs on it before it is dropped."""
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"' + (f' TEMPLATE "{template}"' if template else ""))
    url = with_dbname(server_url, name)
    yield url
    try:
        # Services the test opened are closed by now (fixtures that use this one tear down first).
        if request.node.get_closest_marker("no_integrity_check") is None:
            check_integrity(url)
    finally:
        with psycopg.connect(server_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def database_url(request: pytest.FixtureRequest, server_url: str, template_url: str) -> Iterator[str]:
    """A fresh database with the schema applied, private to the test."""
    yield from _private_database(request, server_url, "t", TEMPLATE)


@pytest.fixture
def other_database_url(request: pytest.FixtureRequest, server_url: str, template_url: str) -> Iterator[str]:
    """A second fresh database with the schema applied (moving rows between databases)."""
    yield from _private_database(request, server_url, "o", TEMPLATE)


@pytest.fixture
def empty_database_url(request: pytest.FixtureRequest, server_url: str) -> Iterator[str]:
    """A fresh database without the schema (for migration tests)."""
    yield from _private_database(request, server_url, "e", None)


@contextlib.asynccontextmanager
async def memory_factory(**defaults: Any) -> AsyncIterator[Callable[..., Any]]:
    """A factory of open MemoryServices: factory(model=..., embedder=..., clock=..., **settings), `defaults` under
    each call's settings; every service it opened is closed on exit (summaries a test left gated are cancelled)."""
    opened: list[MemoryService] = []

    async def factory(model: Any = None, embedder: Any = None, clock: Any = None, **overrides: Any) -> MemoryService:
        service = MemoryService(
            MemorySettings(**{**defaults, **overrides}), model=model, embeddings=embedder, clock=clock
        )
        await service.aopen()
        opened.append(service)
        return service

    try:
        yield factory
    finally:
        for service in opened:
            await service.aclose(timeout=0.5)


@pytest.fixture
async def open_memory(database_url: str) -> AsyncIterator[Callable[..., Any]]:
    """open_memory(model=..., embedder=..., clock=..., **settings) -> an open MemoryService on the test's database."""
    async with memory_factory(database_url=database_url, drain_timeout_s=5) as factory:
        yield factory


@pytest.fixture
def fake_openai(monkeypatch):
    """A local OpenAI-compatible server; ChatOpenAI (and the default summarizer) talk to it over HTTP."""
    from tests.openai_server import FakeOpenAI

    with FakeOpenAI() as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        monkeypatch.setenv("MEMORY_AGENT_MEMORY_MODEL", "gpt-4.1-mini")  # a bare name: OpenAI's
        yield server


def query(url: str, sql: str, params: Any = None) -> list[tuple[Any, ...]]:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SET search_path TO memory_agent, public")
        return conn.execute(sql, params).fetchall()


def execute(url: str, sql: str, params: Any = None) -> None:
    """Run a statement that returns no rows (in the memory_agent schema)."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SET search_path TO memory_agent, public")
        conn.execute(sql, params)


@pytest.fixture
def app_role(server_url: str, database_url: str):
    """A login role that does not own the tables, granted what an application needs on them as docs/privacy.md
    says (grant_bound_role: the least privileges, procrastinate's jobs under a tenant policy)."""
    role, password = f"memory_agent_app_{uuid.uuid4().hex[:8]}", uuid.uuid4().hex
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(sql.Identifier(role), sql.Literal(password)))
        conn.execute("SELECT memory_agent.grant_bound_role(%s)", (role,))
    params = conninfo_to_dict(database_url)
    params.update(user=role, password=password)
    yield make_conninfo(**params)
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(role)))
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))
