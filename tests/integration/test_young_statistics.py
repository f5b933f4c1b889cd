"""Young tables are analyzed as soon as they double (analyze_young_tables, every MEMORY_AGENT_ANALYZE_INTERVAL_S),
not after autovacuum's naptime: the plans every pooled connection caches for the round path are then made on the
tables' real size.

autovacuum is turned off for the round path's tables here, so every analysis counted is memory_agent's."""

from __future__ import annotations

import asyncio
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.graph import START, MessagesState, StateGraph

from memory_agent import with_memory
from memory_agent.db.schema import SchemaManager
from tests.conftest import execute, query

TABLES = ("conversations", "messages", "memory", "round_metrics")


def echo_graph() -> Any:
    def respond(state: MessagesState) -> dict[str, Any]:
        return {"messages": [AIMessage(f"echo: {state['messages'][-1].text}")]}

    builder = StateGraph(MessagesState)
    builder.add_node("respond", respond)
    builder.add_edge(START, "respond")
    return builder.compile()


def table_stats(url: str, column: str) -> dict[str, int]:
    rows = query(
        url,
        f"SELECT relname, {column} FROM pg_stat_user_tables WHERE schemaname = 'memory_agent' AND relname = ANY(%s)",
        [list(TABLES)],
    )
    return dict(rows)


def without_autovacuum(url: str) -> None:
    for table in TABLES:
        execute(url, f"ALTER TABLE {table} SET (autovacuum_enabled = false)")


async def run_rounds(memory: Any, thread: str, rounds: int) -> None:
    app = with_memory(echo_graph(), memory)
    for n in range(rounds):
        await app.ainvoke({"messages": [HumanMessage(f"turn {n}")]}, {"configurable": {"thread_id": thread}})
    await memory.drain()


async def eventually(condition: Any, seconds: float = 30.0) -> bool:
    """Statistics reach pg_stat_user_tables when a backend flushes them: within a second, or ten when idle."""
    for _ in range(int(seconds / 0.2)):
        if await condition():
            return True
        await asyncio.sleep(0.2)
    return False


async def test_a_growing_table_is_analyzed_once_it_doubles(open_memory, database_url):
    without_autovacuum(database_url)
    memory = await open_memory(analyze_interval_s=0.2)
    await run_rounds(memory, "grow", 40)  # 80 messages and 40 metrics rows: past the first 50

    async def analyzed() -> bool:
        return table_stats(database_url, "analyze_count").get("messages", 0) >= 1

    assert await eventually(analyzed)


async def test_analysis_waits_for_the_table_to_double(open_memory, database_url):
    without_autovacuum(database_url)
    memory = await open_memory(analyze_interval_s=0)  # the keeper off: the calls below are the only ones

    async def analyzes_messages() -> bool:
        return "messages" in await memory.loop.arun(SchemaManager(memory.backend).analyze_young_tables())

    async def live_messages_at_least(n: int) -> bool:
        return table_stats(database_url, "n_live_tup").get("messages", 0) >= n

    await run_rounds(memory, "double", 40)
    assert await eventually(lambda: live_messages_at_least(80))
    assert await analyzes_messages()
    assert table_stats(database_url, "analyze_count")["messages"] == 1
    # Analyzed at 80 rows: the next analysis waits for 2 * 80 + 50 = 210 (100 are not enough, 240 are).
    await run_rounds(memory, "double", 10)
    assert await eventually(lambda: live_messages_at_least(100))
    assert not await analyzes_messages()
    await run_rounds(memory, "double", 70)
    assert await eventually(analyzes_messages)
    assert table_stats(database_url, "analyze_count")["messages"] == 2
    # `conversations` had one row updated at every round (120 changes) but never grew: never analyzed.
    assert table_stats(database_url, "analyze_count")["conversations"] == 0
