"""Fixtures for consolidation tests: connections and a pool on the test database, a model that counts its
calls, and a writer of a user's long-term items at a simulated time."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from langchain_core.messages import BaseMessage
from langchain_core.outputs import ChatResult
from pydantic import Field

from memory_agent.llm import OfflineConsolidationModel
from memory_agent.long_term import ItemOrigin, ItemScope, remember
from memory_agent.service.backend import MemoryBackend
from tests.long_term.conftest import conn, connect, items  # noqa: F401 (fixtures)

# A Monday: runs on June 2 .. July 6 cover June 1 .. July 5 and meet 5 Sundays and one 1st.
START = datetime(2026, 6, 1, tzinfo=UTC)


def day(n: int, hour: int = 0) -> datetime:
    return START + timedelta(days=n, hours=hour)


class CountingModel(OfflineConsolidationModel):
    """The offline consolidator, recording the first line of every prompt it answers."""

    calls: list[str] = Field(default_factory=list)

    async def _agenerate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        self.calls.append(str(messages[-1].text).splitlines()[0])
        return self._generate(messages, *args, **kwargs)


@pytest.fixture
async def pool(database_url: str) -> AsyncIterator[Any]:
    opened = MemoryBackend.create_pool(database_url, "memory_agent")
    await opened.open(wait=True)
    yield opened
    await opened.close()


async def write_day(connection: psycopg.AsyncConnection[Any], user_id: str, n: int, tenant_id: str = "acme") -> None:
    """A day of a user's items, at noon: a mood that changes (single-valued), a decision, a person mentioned."""
    await remember(
        connection,
        scope=ItemScope(tenant_id=tenant_id, user_id=user_id),
        source=ItemOrigin(conversation_id=None, memory_id=None),
        items=items(
            facts=[("mood", f"The user felt {'calm' if n % 2 else 'busy'} on day {n}")],
            decisions=[(f"step_{n}", f"Decided to ship step {n}")],
            entities=[(f"colleague_{n % 3}", f"Talked with colleague {n % 3} on day {n}")],
        ),
        now=day(n, 12),
    )
