"""Fixtures of the recall tests (imported by them): an open connection on the test's database, a clock."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from psycopg.rows import dict_row

T0 = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)


@pytest.fixture
async def conn(database_url: str) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
    """An autocommit connection that sees the memory_agent schema, like the pool's."""
    connection = await psycopg.AsyncConnection.connect(database_url, autocommit=True, row_factory=dict_row)
    await connection.execute("SET search_path TO memory_agent, public")
    try:
        yield connection
    finally:
        await connection.close()


def at(days: float) -> datetime:
    return T0 + timedelta(days=days)
