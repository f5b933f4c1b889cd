"""Connections for long-term tests: autocommit psycopg connections on the test database's memory_agent schema,
as the backend's pool hands them out."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

from memory_agent.schemas.items import StructuredItems, SummaryItem

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def at(days: float) -> datetime:
    return T0 + timedelta(days=days)


def items(**lists: list[tuple[str, str] | tuple[str, str, dict[str, Any]]]) -> StructuredItems:
    """items(facts=[("home_city", "The user lives in Lyon")], ...) with optional SummaryItem fields."""
    built: dict[str, list[SummaryItem]] = {}
    for field, entries in lists.items():
        built[field] = [
            SummaryItem(key=entry[0], content=entry[1], **(entry[2] if len(entry) > 2 else {})) for entry in entries
        ]
    return StructuredItems(**built)


Connect = Callable[..., Awaitable[psycopg.AsyncConnection[Any]]]


@pytest.fixture
async def connect(database_url: str) -> AsyncIterator[Connect]:
    """connect(**conninfo overrides) -> an autocommit connection with search_path on memory_agent."""
    opened: list[psycopg.AsyncConnection[Any]] = []

    async def factory(**overrides: Any) -> psycopg.AsyncConnection[Any]:
        conn = await psycopg.AsyncConnection.connect(database_url, autocommit=True, **overrides)
        await conn.execute("SET search_path TO memory_agent, public")
        opened.append(conn)
        return conn

    yield factory
    for conn in opened:
        await conn.close()


@pytest.fixture
async def conn(connect: Connect) -> psycopg.AsyncConnection[Any]:
    return await connect()
