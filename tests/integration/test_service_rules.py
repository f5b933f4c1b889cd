"""MemoryService's seed methods agree with what a round end does: `should_trigger_summary` applies the
trigger rule the way `trigger_summarization_if_needed` does (a stale `processing` row does not count, a
summary needs new messages), and `get_context_for_workflow` gives `current_messages` a meaning."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from memory_agent import InvalidInputError
from tests.conftest import execute, query
from tests.support import GatedSummaryModel


async def three_rounds(memory, thread_id: str) -> None:
    for n in range(3):  # round 3 ends at seq 5: the first summary starts
        await memory.conversations.finish_round(thread_id, [HumanMessage(f"m{n}"), AIMessage(f"r{n}")])


async def test_a_stale_processing_row_does_not_count_as_already_processing(open_memory, database_url):
    model = GatedSummaryModel()
    memory = await open_memory(model=model, sweep_interval_s=0)
    await three_rounds(memory, "stale")
    await memory.conversations.finish_round("stale", [HumanMessage("m3"), AIMessage("r3")])  # seq 7; memory 1 in flight
    assert not await memory.conversations.should_trigger_summary("stale", 7)

    # Its owner went quiet past processing_timeout_s (300 s): the trigger rule reclaims it ...
    execute(
        database_url,
        "UPDATE memory SET created_at = now() - interval '1 hour', "
        "started_at = now() - interval '1 hour' WHERE memory_id = 1",
    )
    assert await memory.conversations.should_trigger_summary("stale", 7)
    result = await memory.conversations.trigger_summarization_if_needed("stale", 7)
    assert (result.outcome, result.reclaimed_memory_ids, result.memory_id) == ("started", [1], 2)
    # ... and the row it started is fresh: in progress again.
    assert not await memory.conversations.should_trigger_summary("stale", 7)
    assert query(database_url, "SELECT memory_id, status FROM memory ORDER BY 1") == [(1, "failed"), (2, "processing")]
    model.release(2)
    assert await memory.drain(timeout=10)


async def test_no_summary_is_due_without_new_messages(open_memory):
    memory = await open_memory()
    await three_rounds(memory, "caught-up")
    assert await memory.drain(timeout=10)
    assert [(m.status, m.end_sequence) for m in await memory.conversations.get_memory_history("caught-up")] == [
        ("completed", 5)
    ]
    # Nothing in progress, but nothing after the latest memory either (memory_min_new_messages = 1).
    assert not await memory.conversations.should_trigger_summary("caught-up", 5)
    assert (await memory.conversations.trigger_summarization_if_needed("caught-up", 5)).outcome == "no_new_messages"
    assert not await memory.conversations.should_trigger_summary(
        "caught-up", 4
    )  # below the memory's end: nothing new either
    await memory.conversations.finish_round("caught-up", [HumanMessage("m3"), AIMessage("r3")])
    assert await memory.drain(timeout=10)
    assert [m.end_sequence for m in await memory.conversations.get_memory_history("caught-up")] == [5, 7]


async def test_current_messages_are_the_rounds_input_not_stored_yet(open_memory, database_url):
    memory = await open_memory()
    stored = [
        HumanMessage("u1", id="u1"),
        AIMessage("a1", id="a1"),
        HumanMessage("u2", id="u2"),
        AIMessage("a2", id="a2"),
    ]
    await memory.conversations.finish_round("current", stored[:2])
    await memory.conversations.finish_round("current", stored[2:])
    new = [HumanMessage("u3", id="u3"), HumanMessage("no id yet")]

    context = await memory.conversations.get_context_for_workflow("current", [*stored, *new])
    assert [m.text for m in context.gap_messages] == ["u1", "a1", "u2", "a2"]  # from the database
    assert [m.text for m in context.current_messages] == ["u3", "no id yet"]  # given, not stored yet
    # Only this round's input, as a graph without a checkpointer holds it: the same split.
    assert [m.text for m in (await memory.conversations.get_context_for_workflow("current", new)).current_messages] == [
        "u3",
        "no id yet",
    ]
    assert (await memory.conversations.get_context_for_workflow("current")).current_messages == []
    # Read only: nothing of the current messages was stored.
    assert query(database_url, "SELECT count(*) FROM messages WHERE conversation_id = 'current'") == [(4,)]
    with pytest.raises(InvalidInputError, match="not a LangChain message"):
        await memory.conversations.get_context_for_workflow("current", ["u3"])  # type: ignore[list-item]


async def test_a_closed_service_keeps_no_parts(open_memory):
    memory = await open_memory()
    assert memory.agent is not None and memory.backend is not None
    await memory.aclose()
    for part in ("agent", "backend", "executor", "loop"):
        with pytest.raises(RuntimeError, match="not open"):
            getattr(memory, part)
    assert not hasattr(memory, "is_open")
