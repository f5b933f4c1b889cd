"""Young tables are analyzed as soon as they double (db/statistics.py), not after autovacuum's naptime: the plans
every pooled connection caches for the round path are then made on the tables' real size.

autovacuum is turned off for the round path's tables here, so every analysis counted is memory_agent's."""

from __future__ import annotations

import asyncio
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.graph import START, MessagesState, StateGraph

from memory_agent import with_memory
from tests.conftest import execute, query

TABLES = ("conversations", "messages", "memory", "round_metrics")


def echo_graph() -> Any:
    def respond(state: MessagesState) -> dict[str, Any]:
        return {"messages": [AIMessage(f"echo: {state['messages'][-1].text}")]}

    builder = StateGraph(MessagesState)
    builder.add_node("respond", respond)
    builder.add_edge(START, "respond")
    return builder.compile()


def analyze_counts(url: str) -> dict[str, int]:
    rows = query(
        url,
        "SELECT relname, analyze_count FROM pg_stat_user_tables WHERE schemaname = 'memory_agent'"
        " AND relname = ANY(%s)",
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


async def wait_for(condition: Any, seconds: float = 15.0) -> bool:
    for _ in range(int(seconds / 0.1)):
        if condition():
            return True
        await asyncio.sleep(0.1)
    return condition()


async def analyzes(memory: Any, table: str, seconds: float = 15.0) -> bool:
    """True once a call of analyze_young_tables analyzes `table` (the statistics arrive within a second or so)."""
    for _ in range(int(seconds / 0.2)):
        if table in await memory.loop.arun(memory.backend.analyze_young_tables()):
            return True
        await asyncio.sleep(0.2)
    return False


async def test_a_growing_table_is_analyzed_once_it_doubles(open_memory, database_url):
    without_autovacuum(database_url)
    memory = await open_memory(analyze_interval_s=0.2)
    await run_rounds(memory, "grow", 40)  # 80 messages, 40 metrics rows: past the first 50 changes
    assert await wait_for(lambda: analyze_counts(database_url).get("messages", 0) >= 1)
    # Analyzed at its size: nothing changed since, so nothing to analyze again.
    analyzed_messages = analyze_counts(database_url)["messages"]
    await asyncio.sleep(1.0)
    assert analyze_counts(database_url)["messages"] == analyzed_messages


async def test_analysis_waits_for_the_table_to_double(open_memory, database_url):
    without_autovacuum(database_url)
    memory = await open_memory(analyze_interval_s=0)  # the keeper off: the calls below are the only ones
    await run_rounds(memory, "double", 40)
    assert await analyzes(memory, "messages")
    assert analyze_counts(database_url)["messages"] == 1
    # Analyzed at 80 messages: the next analysis waits for 80 + 50 changes (20 are not enough, 160 are).
    await run_rounds(memory, "double", 10)
    await asyncio.sleep(1.2)  # the backends' statistics reach pg_stat_user_tables within a second
    assert "messages" not in await memory.loop.arun(memory.backend.analyze_young_tables())
    await run_rounds(memory, "double", 70)
    assert await analyzes(memory, "messages")
    assert analyze_counts(database_url)["messages"] == 2


async def test_with_the_keeper_off_nothing_is_analyzed(open_memory, database_url):
    without_autovacuum(database_url)
    memory = await open_memory(analyze_interval_s=0)
    await run_rounds(memory, "off", 40)
    await asyncio.sleep(1.5)
    assert analyze_counts(database_url)["messages"] == 0
