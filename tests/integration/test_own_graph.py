"""The memory nodes inside an app's own StateGraph, and what with_memory records when the graph fails."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.graph import END, START, StateGraph

from memory_agent import MemoryRoundState, memory_load_node, memory_save_node, with_memory
from tests.conftest import query
from tests.support import GatedSummaryModel


async def test_load_and_save_nodes_in_an_own_graph(open_memory, database_url):
    model = GatedSummaryModel()
    memory = await open_memory(model=model)
    seen: list[list[str]] = []

    def respond(state: MemoryRoundState) -> dict[str, Any]:
        seen.append([m.text for m in state["messages"]])
        return {"messages": [AIMessage(f"answer {len(seen)}")]}

    builder = StateGraph(MemoryRoundState)
    builder.add_node("memory_load", memory_load_node(memory))
    builder.add_node("respond", respond)
    builder.add_node("memory_save", memory_save_node(memory))
    builder.add_edge(START, "memory_load")
    builder.add_edge("memory_load", "respond")
    builder.add_edge("respond", "memory_save")
    builder.add_edge("memory_save", END)
    app = builder.compile()
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
