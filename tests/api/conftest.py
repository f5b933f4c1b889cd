"""The HTTP API served by uvicorn on 127.0.0.1 (a free port, in a thread) over a service on the test database,
with a manual clock and a consolidation model that records its calls (and can hold them until several are in
flight, to make requests race)."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest
import uvicorn
from langchain_core.messages import BaseMessage
from langchain_core.outputs import ChatResult
from pydantic import Field

from memory_agent import MemoryService
from memory_agent.api import create_api_key, create_app
from memory_agent.consolidation import ManualClock
from memory_agent.llm import OfflineConsolidationModel

# Thursday, January 8 2026 at noon (day 7 of tests.long_term.conftest.at): "daily" is January 7 (day 6), the
# last complete week December 28 .. January 3 (days -4 .. 2), the last complete month December 2025.
NOW = datetime(2026, 1, 8, 12, tzinfo=UTC)


class RacingModel(OfflineConsolidationModel):
    """The offline consolidator recording each call's first line; with `parties` > 1 every call waits (up to
    `wait_s`, 5 s) until that many calls have arrived, so concurrent requests all pass their "is it written?"
    read."""

    calls: list[str] = Field(default_factory=list)  # shared by the copies with_structured_output makes
    parties: list[int] = Field(default_factory=lambda: [1])
    wait_s: list[float] = Field(default_factory=lambda: [5.0])

    async def _agenerate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        self.calls.append(str(messages[-1].text).splitlines()[0])
        deadline = time.monotonic() + self.wait_s[0]
        while len(self.calls) < self.parties[0] and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        return self._generate(messages, *args, **kwargs)


@dataclass(frozen=True)
class Served:
    url: str
    memory: MemoryService
    clock: ManualClock
    model: RacingModel

    async def key(self, tenant_id: str) -> str:
        async def create() -> str:
            async with self.memory.backend.pool.connection() as conn, conn.transaction():
                return await create_api_key(conn, tenant_id)

        key: str = await self.memory.loop.arun(create())
        return key


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@asynccontextmanager
async def serve(memory: MemoryService, *, settings_model: bool = False) -> AsyncIterator[Served]:
    """The HTTP API over `memory`, served by uvicorn on 127.0.0.1 in a thread, at NOW on a manual clock.
    `settings_model`: consolidation calls the model the settings name, not Served.model."""
    clock, model = ManualClock(NOW), RacingModel()
    app = create_app(memory, clock=clock, consolidation_model=None if settings_model else model)
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=_free_port(), log_level="warning", lifespan="on")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.02)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield Served(f"http://127.0.0.1:{port}", memory, clock, model)
    finally:
        server.should_exit = True
        thread.join(10)
        assert not thread.is_alive()


@pytest.fixture
async def served(open_memory: Any) -> AsyncIterator[Served]:
    async with serve(await open_memory()) as served:
        yield served
