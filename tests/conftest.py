"""A real PostgreSQL for every test: the embedded server by default, MEMORY_AGENT_TEST_DSN for another.

One template database with the migrations applied is built per session; each test gets its own copy
(CREATE DATABASE ... TEMPLATE), checked by the integrity checker and dropped afterwards (memory_agent.testing's
pytest plugin).
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from memory_agent import MemoryService, MemorySettings
from memory_agent.testing.queries import with_dbname

# The database fixtures are memory_agent.testing's plugin (a template per run, a copy per test, the integrity
# checker after each); the names below are this suite's for them.
pytest_plugins = ["memory_agent.testing.plugin", "pytester"]

# The tests' summarizer is the offline one, by name (a service never falls back to it on its own); the processes
# and CLI runs the tests start inherit it. A test of a real provider sets its own (fake_openai, tests/providers).
os.environ["MEMORY_AGENT_MEMORY_MODEL"] = "offline"

# The suite's tables are the design's: a summary after every round. The shipped cadence (every 12 new messages)
# is tested where it is named (tests/integration/test_cadence.py unsets this); child processes inherit it.
os.environ.setdefault("MEMORY_AGENT_MEMORY_MIN_NEW_MESSAGES", "1")


@pytest.fixture(scope="session")
def server_url(memory_agent_server_url: str) -> str:
    return memory_agent_server_url


@pytest.fixture(scope="session")
def template_url(server_url: str, memory_agent_template: str) -> str:
    return with_dbname(server_url, memory_agent_template)


@pytest.fixture
def database_url(memory_agent_database_url: str) -> str:
    """A fresh database with the schema applied, private to the test."""
    return memory_agent_database_url


@pytest.fixture
def other_database_url(memory_agent_other_database_url: str) -> str:
    """A second fresh database with the schema applied (moving rows between databases)."""
    return memory_agent_other_database_url


@pytest.fixture
def empty_database_url(memory_agent_empty_database_url: str) -> str:
    """A fresh database without the schema (for migration tests)."""
    return memory_agent_empty_database_url


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
    """A login role that does not own the tables, granted what an application needs on them as docs/concepts/privacy.md
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
