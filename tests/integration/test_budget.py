"""The token budget end to end: trimmed gap and cut messages reach the model, whole messages reach the
database, and each round that was cut says so in round_metrics and in the log."""

from __future__ import annotations

import logging

from langchain.agents import create_agent
from langchain_core.messages import HumanMessage
from langchain_core.messages.utils import count_tokens_approximately

from memory_agent import MemoryMiddleware, with_memory
from tests.conftest import query
from tests.integration.agent_support import ToolScriptModel, assert_tool_pairs, lookup
from tests.support import EchoChat


async def test_context_budget_trims_whole_tool_rounds(open_memory, database_url, caplog):
    budget = 260
    memory = await open_memory(  # no summary: raw gap
        max_context_tokens=budget, memory_summarize_after_seq=1000, memory_rolling_window_size=1002
    )
    model = ToolScriptModel()
    agent = create_agent(model, [lookup], middleware=[MemoryMiddleware(memory)])
    config = {"configurable": {"thread_id": "budget"}}
    with caplog.at_level(logging.INFO, logger="memory_agent"):
        for n in range(1, 7):
            await agent.ainvoke(
                {"messages": [HumanMessage(f"question number {n} " + "pad " * 20 + "tools:2:par")]}, config
            )

    first_calls = [call for call in model.calls if call[-1].type == "human"]
    assert len(first_calls) == 6
    for call in first_calls:
        assert count_tokens_approximately(call) <= budget
        assert_tool_pairs(call)
        assert call[0].type == "human"  # the gap starts at a round start
        assert call[-1].text.startswith(f"question number {first_calls.index(call) + 1} ")
    assert len(first_calls[-1]) < 5 * 5 + 1  # the later rounds did not get the whole history

    rows = query(
        database_url,
        "SELECT round_number, truncated, truncation, gap_size, gap_start_sequence, context_tokens FROM round_metrics"
        " ORDER BY round_number",
    )
    assert not rows[0][1] and rows[0][2] is None
    cut = [row for row in rows if row[1]]
    assert cut, "some round was over the budget"
    for _, _, truncation, gap_size, gap_start, context_tokens in cut:
        assert truncation["dropped_rounds"] >= 1 and truncation["dropped_messages"] == 5 * truncation["dropped_rounds"]
        assert truncation["tokens_before"] > budget >= truncation["tokens_after"] == context_tokens
        assert gap_start == truncation["dropped_messages"] and gap_size % 5 == 0
    assert any("Context budget for budget: dropped" in r.getMessage() for r in caplog.records)
    # The database keeps every message: the budget only shapes what the model is given.
    assert query(database_url, "SELECT count(*) FROM messages")[0][0] == 6 * 5


async def test_message_cap_cuts_what_the_model_sees_not_what_is_stored(open_memory, database_url):
    memory = await open_memory(max_message_tokens=40)
    chat = EchoChat()
    app = with_memory(chat.graph, memory)
    long_text = "this is a very long message " * 40
    await app.ainvoke({"messages": [HumanMessage(long_text)]}, {"configurable": {"thread_id": "cap"}})
    await app.ainvoke({"messages": [HumanMessage("short")]}, {"configurable": {"thread_id": "cap"}})

    seen_first, seen_second = chat.seen
    assert seen_first[0].text.startswith("this is a very long message")
    assert "… [truncated by memory_agent: " in seen_first[0].text and len(seen_first[0].text) < len(long_text)
    assert "… [truncated by memory_agent: " in seen_second[0].text  # the gap copy is cut too
    assert [m.text for m in seen_second[1:]] == ["reply 1", "short"]
    stored = query(database_url, "SELECT content FROM messages ORDER BY sequence_number")
    assert stored[0][0] == long_text
    truncation = query(database_url, "SELECT truncation FROM round_metrics ORDER BY round_number")
    assert [t[0]["truncated_messages"][0]["part"] for t in truncation] == ["current", "gap"]
