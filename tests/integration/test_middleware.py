"""MemoryMiddleware with langchain's create_agent: rounds stored, memory injected, sync and async."""

from __future__ import annotations

import asyncio

import pytest
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage

from memory_agent import InvalidInputError, MemoryMiddleware
from tests.conftest import query
from tests.integration.agent_support import ToolScriptModel, assert_tool_pairs, config, lookup, shout, stored


async def test_async_rounds_store_input_and_every_produced_message(open_memory, database_url):
    memory = await open_memory()
    model = ToolScriptModel()
    agent = create_agent(model, [lookup, shout], middleware=[MemoryMiddleware(memory)])

    result = await agent.ainvoke({"messages": [HumanMessage("hello there")]}, config("a"))
    assert [m.text for m in result["messages"]] == ["hello there", "final answer without tools"]
    result = await agent.ainvoke({"messages": [HumanMessage("please tools:2:seq")]}, config("a"))
    # The caller's result holds this run's messages only, never the loaded context.
    assert [type(m).__name__ for m in result["messages"]] == [
        "HumanMessage",
        "AIMessage",
        "ToolMessage",
        "AIMessage",
        "ToolMessage",
        "AIMessage",
    ]
    assert "memory_round" not in result

    rows = stored(database_url, "a")
    assert [(seq, rnd, role) for seq, rnd, role, _ in rows] == [
        (0, 1, "user"),
        (1, 1, "assistant"),
        (2, 2, "user"),
        (3, 2, "assistant"),
        (4, 2, "tool"),
        (5, 2, "assistant"),
        (6, 2, "tool"),
        (7, 2, "assistant"),
    ]
    assert rows[4][3] == "value of k0" and rows[7][3] == "final answer after 2 tool results"
    # Round 2's model calls started from round 1 (the gap), then the run's own tool loop.
    first_call = model.calls[1]
    assert [m.text for m in first_call] == ["hello there", "final answer without tools", "please tools:2:seq"]
    last_call = model.calls[-1]
    assert [type(m).__name__ for m in last_call[2:]] == [
        "HumanMessage",
        "AIMessage",
        "ToolMessage",
        "AIMessage",
        "ToolMessage",
    ]
    for call in model.calls:
        assert_tool_pairs(call)
    metrics = query(database_url, "SELECT round_number, gap_size, context_messages FROM round_metrics ORDER BY id")
    assert metrics == [(1, 0, 1), (2, 2, 3)]


def test_sync_invoke_from_a_plain_script(database_url):
    # No event loop in this thread: invoke() runs the sync hooks, which call the service through call_sync.
    from memory_agent import MemoryService, MemorySettings

    settings = MemorySettings(database_url=database_url, memory_summarize_after_seq=7)
    with MemoryService.from_settings(settings) as memory:
        model = ToolScriptModel()
        agent = create_agent(model, [lookup], middleware=[MemoryMiddleware(memory)])
        for n in range(3):
            result = agent.invoke({"messages": [HumanMessage(f"question {n} tools:1:par")]}, config("sync"))
            assert result["messages"][-1].text == "final answer after 1 tool results"
            assert memory.call_sync(memory.drain(timeout=10))
        history = memory.call_sync(memory.conversations.get_memory_history("sync"))
    assert [(m.status, m.start_sequence, m.end_sequence) for m in history] == [
        ("completed", 0, 7),
        ("completed", 0, 11),
    ]
    assert [r[2] for r in stored(database_url, "sync")] == ["user", "assistant", "tool", "assistant"] * 3
    # Round 2 was given round 1 as its gap; round 3 the memory of rounds 1-2 and no gap.
    assert len(model.calls[2]) == 5
    assert len(model.calls[4]) == 1 and model.calls[4][0].text.startswith("[Previous context: ")


async def test_memory_is_injected_once_a_summary_completes(open_memory, database_url):
    memory = await open_memory(memory_summarize_after_seq=1)
    model = ToolScriptModel()
    agent = create_agent(model, [lookup], middleware=[MemoryMiddleware(memory)])
    await agent.ainvoke({"messages": [HumanMessage("my name is Ada")]}, config("m"))
    assert await memory.drain(timeout=10)
    await agent.ainvoke({"messages": [HumanMessage("what is my name")]}, config("m"))
    seen = model.calls[-1]
    assert len(seen) == 1 and seen[0].text.startswith("[Previous context: ")
    assert "my name is Ada" in seen[0].text and seen[0].text.endswith("what is my name")
    # Stored as the user typed it, without the injected memory.
    assert stored(database_url, "m")[2][3] == "what is my name"


async def test_thread_id_is_required(open_memory):
    memory = await open_memory()
    agent = create_agent(ToolScriptModel(), [lookup], middleware=[MemoryMiddleware(memory)])
    with pytest.raises(InvalidInputError, match="thread_id"):
        await agent.ainvoke({"messages": [HumanMessage("hi")]})


async def test_concurrent_threads_do_not_mix(open_memory, database_url):
    memory = await open_memory()
    model = ToolScriptModel()
    agent = create_agent(model, [lookup], middleware=[MemoryMiddleware(memory)])
    await asyncio.gather(
        *(agent.ainvoke({"messages": [HumanMessage(f"thread {t} tools:2:par")]}, config(f"t{t}")) for t in range(4))
    )
    for t in range(4):
        rows = stored(database_url, f"t{t}")
        assert [r[2] for r in rows] == ["user", "assistant", "tool", "tool", "assistant"]
        assert rows[0][3] == f"thread {t} tools:2:par"


async def test_with_a_checkpointer_earlier_rounds_are_not_stored_or_sent_twice(open_memory, database_url):
    from langgraph.checkpoint.memory import InMemorySaver

    memory = await open_memory()
    model = ToolScriptModel()
    agent = create_agent(model, [lookup], middleware=[MemoryMiddleware(memory)], checkpointer=InMemorySaver())
    await agent.ainvoke({"messages": [HumanMessage("first tools:1:par")]}, config("cp"))
    result = await agent.ainvoke({"messages": [HumanMessage("second")]}, config("cp"))
    # The thread's state keeps the whole conversation (for a UI); the database stores each message once ...
    assert [m.text for m in result["messages"]][-2:] == ["second", "final answer without tools"]
    assert [r[3] for r in stored(database_url, "cp")] == [
        "first tools:1:par",
        "",
        "value of k0",
        "final answer after 1 tool results",
        "second",
        "final answer without tools",
    ]
    # ... and the model got the stored gap once, not the gap plus the checkpointed copy.
    assert [m.text for m in model.calls[-1]] == [
        "first tools:1:par",
        "",
        "value of k0",
        "final answer after 1 tool results",
        "second",
    ]
