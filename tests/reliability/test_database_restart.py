"""PostgreSQL stopped and restarted mid-conversation: clear errors during the outage, no half-written round,
and rounds succeed again after the restart without reopening the service."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import psycopg
import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.graph import START, MessagesState, StateGraph

from memory_agent import DatabaseUnavailableError, MemoryService, MemorySettings, with_memory

pytestmark = pytest.mark.slow


@pytest.fixture
def own_server():
    """A PostgreSQL of this test's own, so stopping it disturbs no other test."""
    from memory_agent.db.embedded import (
        remove_data_dir,
        scratch_data_dir,
        start_embedded_postgres,
        stop_embedded_postgres,
    )

    data = scratch_data_dir("memory_agent_restart_")

    class Control:
        url = start_embedded_postgres(data, cleanup_mode=None)

        def stop(self) -> None:
            stop_embedded_postgres(data)

        def start(self) -> None:
            start_embedded_postgres(data, cleanup_mode=None)

    yield Control()
    stop_embedded_postgres(data)
    remove_data_dir(data)


def count_messages(url: str) -> list[tuple[int, int]]:
    with psycopg.connect(url) as conn:
        return conn.execute(
            "SELECT sequence_number, round_number FROM memory_agent.messages ORDER BY sequence_number"
        ).fetchall()


async def test_outage_and_restart(own_server):
    settings = MemorySettings(database_url=own_server.url, connect_timeout_s=2, pool_min_size=2)
    outage_inside_round = {"armed": False}

    def respond(state: MessagesState) -> dict[str, Any]:
        if outage_inside_round["armed"]:
            outage_inside_round["armed"] = False
            own_server.stop()  # the database goes away while the model is answering
        return {"messages": [AIMessage("ok")]}

    builder = StateGraph(MessagesState)
    builder.add_node("respond", respond)
    builder.add_edge(START, "respond")
    async with MemoryService.from_settings(settings) as memory:
        app = with_memory(builder.compile(), memory)
        config = {"configurable": {"thread_id": "restart"}}
        for n in range(3):
            await app.ainvoke({"messages": [HumanMessage(f"before {n}")]}, config)

        # 1. The database stops in the middle of round 4: its end cannot be stored, and says so.
        outage_inside_round["armed"] = True
        with pytest.raises(DatabaseUnavailableError, match="PostgreSQL is unavailable"):
            await app.ainvoke({"messages": [HumanMessage("during 1")]}, config)
        # 2. Rounds while it is down fail at their start with the same clear error, quickly.
        started = time.monotonic()
        with pytest.raises(DatabaseUnavailableError, match="nothing was written"):
            await app.ainvoke({"messages": [HumanMessage("during 2")]}, config)
        assert time.monotonic() - started < 10

        own_server.start()
        # 3. Without reopening anything, rounds work again once the pool has reconnected.
        deadline = time.monotonic() + 30
        while True:
            try:
                await app.ainvoke({"messages": [HumanMessage("after 1")]}, config)
                break
            except DatabaseUnavailableError:
                assert time.monotonic() < deadline, "rounds still failing 30 s after the restart"
                await asyncio.sleep(0.5)
        await app.ainvoke({"messages": [HumanMessage("after 2")]}, config)
        await memory.drain(timeout=10)

    # Nothing of the failed rounds was written; the stored rounds are whole and gap-free.
    stored = count_messages(own_server.url)
    assert [s for s, _ in stored] == list(range(10))
    assert [r for _, r in stored] == [1, 1, 2, 2, 3, 3, 4, 4, 5, 5]
    with psycopg.connect(own_server.url) as conn:
        contents = [
            c
            for (c,) in conn.execute(
                "SELECT content FROM memory_agent.messages WHERE role = 'user' ORDER BY sequence_number"
            )
        ]
    assert contents == ["before 0", "before 1", "before 2", "after 1", "after 2"]
