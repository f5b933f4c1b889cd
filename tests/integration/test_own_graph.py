"""The memory nodes inside an app's own StateGraph, and what with_memory records when the graph fails."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.graph import END, START, StateGraph

from memory_agent import MemoryRoundState, memory_load_node, memory_save_node, with_memory
from tests.conftest import query
from tests.support import GatedSummaryModel


def own_graph(memory: Any, respond: Callable[[MemoryRoundState], dict[str, Any]], checkpointer: Any = None) -> Any:
    """An app's own graph: memory_load, the app's node, memory_save."""
    builder = StateGraph(MemoryRoundState)
    builder.add_node("memory_load", memory_load_node(memory))
    builder.add_node("respond", respond)
    builder.add_node("memory_save", memory_save_node(memory))
    builder.add_edge(START, "memory_load")
    builder.add_edge("memory_load", "respond")
    builder.add_edge("respond", "memory_save")
    builder.add_edge("memory_save", END)
    return builder.compile(checkpointer=checkpointer)


async def test_load_and_save_nodes_in_an_own_graph(open_memory, database_url):
    model = GatedSummaryModel()
    memory = await open_memory(model=model)
    seen: list[list[str]] = []

    def respond(state: MemoryRoundState) -> dict[str, Any]:
        seen.append([m.text for m in state["messages"]])
        return {"messages": [AIMessage(f"answer {len(seen)}")]}

    app = own_graph(memory, respond)
    config = {"configurable": {"thread_id": "own"}}
    for n in range(1, 4):
        await app.ainvoke({"messages": [HumanMessage(f"q{n}")]}, config)
    model.release()
    assert await memory.drain(timeout=10)
    app.invoke({"messages": [HumanMessage("q4")]}, config)  # the sync path of the same nodes
    assert seen[2] == ["q1", "answer 1", "q2", "answer 2", "q3"]
    assert seen[3][0].startswith("[Previous context:") and seen[3][0].endswith("q4")
    rows = query(database_url, "SELECT sequence_number, content FROM messages ORDER BY 1")
    assert [c for _, c in rows] == ["q1", "answer 1", "q2", "answer 2", "q3", "answer 3", "q4", "answer 4"]


async def test_a_failing_graph_stores_nothing_and_records_the_stage(open_memory, database_url):
    memory = await open_memory()

    def explode(state: MemoryRoundState) -> dict[str, Any]:
        raise RuntimeError("tool backend down")

    builder = StateGraph(MemoryRoundState)
    builder.add_node("explode", explode)
    builder.add_edge(START, "explode")
    app = with_memory(builder.compile(), memory)
    with pytest.raises(RuntimeError, match="tool backend down"):
        await app.ainvoke({"messages": [HumanMessage("hello")]}, {"configurable": {"thread_id": "fails"}})
    assert query(database_url, "SELECT count(*) FROM messages") == [(0,)]
    assert query(
        database_url, "SELECT conversation_id, round_number, retrieval_path, error_stage, error FROM round_metrics"
    ) == [("fails", None, "raw", "graph", "RuntimeError: tool backend down")]


async def test_the_memory_nodes_show_no_lease_token_in_any_stream_and_a_round_resumes_elsewhere(
    open_memory, database_url
):
    # The save node's record was RoundInfo.to_state() with the conversation's lease token in it, and LangGraph
    # streams every state channel: whoever read "values", "updates", "debug" or a checkpoint could end or renew
    # the round. The state names the lease by a digest now; a run resumed by another service renews it.
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.types import Command, interrupt

    memory = await open_memory()
    tokens: list[str] = []

    def respond(state: MemoryRoundState) -> dict[str, Any]:
        tokens.extend(h for (h,) in query(database_url, "SELECT holder FROM round_leases WHERE conversation_id = 'o2'"))
        return {"messages": [AIMessage(f"answer, {interrupt('approve?')}")]}

    saver = InMemorySaver()

    def app(service: Any) -> Any:
        return own_graph(service, respond, checkpointer=saver)

    config = {"configurable": {"thread_id": "o2"}}
    modes = ["values", "updates", "debug", "tasks", "checkpoints"]
    chunks = [c async for c in app(memory).astream({"messages": [HumanMessage("q1")]}, config, stream_mode=modes)]
    assert tokens and all(token not in repr(chunks) for token in tokens)
    saved = repr(await saver.aget_tuple(config))
    assert all(token not in saved for token in tokens)
    # Resumed by another service on the same database (another process): it renews the lease the digest names.
    elsewhere = await open_memory()
    result = await app(elsewhere).ainvoke(Command(resume="approved"), config)
    assert result["messages"][-1].text == "answer, approved"
    assert query(database_url, "SELECT count(*) FROM round_leases WHERE conversation_id = 'o2'") == [(0,)]
    rows = query(database_url, "SELECT content FROM messages WHERE conversation_id = 'o2' ORDER BY sequence_number")
    assert [c for (c,) in rows] == ["q1", "answer, approved"]
