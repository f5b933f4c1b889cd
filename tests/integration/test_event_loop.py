"""MEMORY_AGENT_EVENT_LOOP=caller: the pool and the summaries run on the event loop that ran aopen(), a round
awaited there makes no trip to another thread, and what cannot work on that loop is refused with a message
instead of waiting forever."""

from __future__ import annotations

import asyncio
import threading

import pytest
from langchain_core.messages import HumanMessage

from memory_agent import MemoryService, MemorySettings, ServiceClosedError, with_memory
from memory_agent.llm.offline import OfflineSummaryModel
from tests.conftest import query
from tests.support import EchoChat

CONFIG = {"configurable": {"thread_id": "loop"}}


def memory_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name == "memory_agent"]


async def test_rounds_and_summaries_run_on_the_loop_that_opened_the_service(open_memory, database_url):
    before = memory_threads()
    memory = await open_memory(model=OfflineSummaryModel(), event_loop="caller")
    assert memory.loop.loop is asyncio.get_running_loop() and not memory.loop.owns_thread
    assert memory_threads() == before  # no thread of its own

    app = with_memory(EchoChat().graph, memory)
    for n in range(4):
        await app.ainvoke({"messages": [HumanMessage(f"turn {n}")]}, CONFIG)
    assert await memory.drain(timeout=10)
    assert query(database_url, "SELECT count(*) FROM messages WHERE conversation_id = 'loop'") == [(8,)]
    # Summaries ran on this loop and finished (drained): none is left in another state. Which rounds the last one
    # reached depends on whether an earlier one was still running when a round ended (one at a time).
    assert query(database_url, "SELECT DISTINCT status FROM memory") == [("completed",)]
    (last,) = query(database_url, "SELECT max(end_sequence) FROM memory")[0]
    assert last in (5, 7)


async def test_a_blocking_call_on_that_loop_is_refused_and_one_from_another_thread_runs(open_memory, database_url):
    memory = await open_memory(model=OfflineSummaryModel(), event_loop="caller")
    app = with_memory(EchoChat().graph, memory)

    with pytest.raises(RuntimeError, match="MEMORY_AGENT_EVENT_LOOP"):
        app.invoke({"messages": [HumanMessage("blocking")]}, CONFIG)
    assert query(database_url, "SELECT count(*) FROM messages") == [(0,)]  # refused before anything ran

    # From a worker thread the call travels to the service's loop, which keeps running meanwhile.
    result = await asyncio.to_thread(app.invoke, {"messages": [HumanMessage("from a thread")]}, CONFIG)
    assert result["messages"][-1].content == "reply 1"
    assert query(database_url, "SELECT role, content FROM messages ORDER BY sequence_number") == [
        ("user", "from a thread"),
        ("assistant", "reply 1"),
    ]


def test_a_service_whose_loop_has_stopped_refuses_calls_instead_of_waiting(database_url):
    settings = MemorySettings(database_url=database_url, event_loop="caller", drain_timeout_s=1)
    memory = MemoryService.from_settings(settings, model=OfflineSummaryModel())
    asyncio.run(memory.aopen())  # that loop is closed when this returns: nothing can run on it any more
    app = with_memory(EchoChat().graph, memory)
    with pytest.raises(ServiceClosedError, match="is not running"):
        app.invoke({"messages": [HumanMessage("too late")]}, CONFIG)
    with pytest.raises(ServiceClosedError, match="is not running"):
        asyncio.run(app.ainvoke({"messages": [HumanMessage("too late")]}, CONFIG))
    assert query(database_url, "SELECT count(*) FROM messages") == [(0,)]


def test_a_service_opened_without_an_event_loop_has_its_own_thread(database_url):
    settings = MemorySettings(database_url=database_url, event_loop="caller")
    memory = MemoryService.from_settings(settings, model=OfflineSummaryModel()).open()
    try:
        assert memory.loop.owns_thread
        app = with_memory(EchoChat().graph, memory)
        assert app.invoke({"messages": [HumanMessage("sync")]}, CONFIG)["messages"][-1].content == "reply 1"
    finally:
        memory.close()


async def test_a_blocking_close_on_that_loop_is_refused_and_the_service_stays_usable(open_memory, database_url):
    memory = await open_memory(model=OfflineSummaryModel(), event_loop="caller")
    app = with_memory(EchoChat().graph, memory)
    with pytest.raises(RuntimeError, match="aclose"):
        memory.close()
    await app.ainvoke({"messages": [HumanMessage("still open")]}, CONFIG)
    await memory.aclose()
    with pytest.raises(RuntimeError, match="not open"):  # as with a thread of its own
        await app.ainvoke({"messages": [HumanMessage("closed")]}, CONFIG)
    assert query(database_url, "SELECT count(*) FROM messages") == [(2,)]
