"""The HTTP API served by uvicorn on 127.0.0.1 (a free port, in a thread) over a service on the test database."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest
import uvicorn

from memory_agent import MemoryService
from memory_agent.api import create_api_key, create_app


@dataclass(frozen=True)
class Served:
    url: str
    memory: MemoryService

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


@pytest.fixture
async def served(open_memory: Any) -> AsyncIterator[Served]:
    memory = await open_memory()
    server = uvicorn.Server(
        uvicorn.Config(create_app(memory), host="127.0.0.1", port=_free_port(), log_level="warning", lifespan="on")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.02)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield Served(f"http://127.0.0.1:{port}", memory)
    finally:
        server.should_exit = True
        thread.join(10)
        assert not thread.is_alive()
