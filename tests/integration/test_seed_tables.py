"""The design document's three tables, reproduced through `with_memory` on a real PostgreSQL."""

from __future__ import annotations

from langchain_core.messages import AIMessage

from memory_agent import with_memory
from memory_agent.conversation.context import escape_memory_text
from tests.conftest import query
from tests.support import EchoChat, GatedSummaryModel, round_after_summary_in_system_mode, run_round


def memory_table(url: str, thread: str):
    return query(
        url,
        "SELECT memory_id, start_sequence, end_sequence, base_memory_id, status FROM memory"
        " WHERE conversation_id = %s ORDER BY memory_id",
        [thread],
    )


async def test_data_flow_timeline_and_memory_table_evolution(open_memory, database_url):
    model = GatedSummaryModel()
    memory = await open_memory(model=model)
    chat = EchoChat()
    app = with_memory(chat.graph, memory)
    thread = "conv_123"

    for n in (1, 2, 3):
        await run_round(app, thread, n)
    # Round 3 ends (seq 5 saved): memory(id=1, start=0, end=5, base=null, 'processing')
    assert memory_table(database_url, thread) == [(1, 0, 5, None, "processing")]

    # Round 4 starts: id=1 still processing -> raw fallback, seq 0-6 (6 stored + the current message)
    await run_round(app, thread, 4)
    seen = chat.seen[-1]
    assert [m.text for m in seen] == [
        "message 1",
        "reply 1",
        "message 2",
        "reply 2",
        "message 3",
        "reply 3",
        "message 4",
    ]
    assert not any("[Previous context:" in m.text for m in seen)
    # Round 4 ends (seq 7 saved): id=1 still processing -> no new row
    assert memory_table(database_url, thread) == [(1, 0, 5, None, "processing")]

    model.release()
    assert await memory.drain(timeout=10)
    assert memory_table(database_url, thread) == [(1, 0, 5, None, "completed")]

    # Round 5 starts: memory id=1 + gap seq 6-7 (round 4) + the current message (seq 8)
    await run_round(app, thread, 5)
    seen = chat.seen[-1]
    memory_1 = query(database_url, "SELECT memory_text FROM memory WHERE memory_id = 1")[0][0]
    assert len(seen) == 3
    # The memory is model output: its `]` are escaped so it cannot close the frame.
    assert seen[0].text == f"[Previous context: {escape_memory_text(memory_1)}]\n\nmessage 4"
    assert [m.text for m in seen[1:]] == ["reply 4", "message 5"]
    # Round 5 ends (seq 9 saved): id=2 (0, 9) based on id=1
    assert memory_table(database_url, thread)[-1] == (2, 0, 9, 1, "processing")

    await run_round(app, thread, 6)  # ends at seq 11 while id=2 processes: skipped
    model.release()
    assert await memory.drain(timeout=10)
    await run_round(app, thread, 7)  # ends at seq 13 -> id=3 (0, 13) base 2
    model.release()
    assert await memory.drain(timeout=10)
    await run_round(app, thread, 8)  # ends at seq 15 -> id=4 (2, 15) base 3: sliding starts
    await run_round(app, thread, 9)  # ends at seq 17 while id=4 processes: skipped
    model.release()
    assert await memory.drain(timeout=10)
    await run_round(app, thread, 10)  # ends at seq 19 -> id=5 (6, 19) base 4
    model.release()
    assert await memory.drain(timeout=10)

    assert memory_table(database_url, thread) == [
        (1, 0, 5, None, "completed"),
        (2, 0, 9, 1, "completed"),
        (3, 0, 13, 2, "completed"),
        (4, 2, 15, 3, "completed"),
        (5, 6, 19, 4, "completed"),
    ]
    # Incremental: each summary after the first was sent only the messages after its base's end.
    summarized = query(
        database_url,
        "SELECT memory_id, summarized_start, summarized_end FROM memory WHERE conversation_id = %s ORDER BY memory_id",
        [thread],
    )
    assert summarized == [(1, 0, 5), (2, 6, 9), (3, 10, 13), (4, 14, 15), (5, 16, 19)]
    # The window slid: round 1 (seq 0-1) is gone from memory 4, rounds 1-3 (seq 0-5) from memory 5.
    texts = dict(query(database_url, "SELECT memory_id, memory_text FROM memory WHERE conversation_id = %s", [thread]))
    assert "message 1" in texts[3] and "message 1" not in texts[4]
    assert "message 2" in texts[4] and "message 3" not in texts[5] and "message 4" in texts[5]
    assert "message 10" in texts[5]
    # The summarizer prompt told the model where the window starts.
    assert "Window: sequences 6-19." in model.calls[-1]
    # Every message is still stored, in order.
    stored = query(
        database_url, "SELECT sequence_number, role FROM messages WHERE conversation_id = %s ORDER BY 1", [thread]
    )
    assert [s for s, _ in stored] == list(range(20))
    assert [r for _, r in stored] == ["user", "assistant"] * 10


async def test_round_after_summary_uses_memory_in_system_mode(open_memory):
    _, chat, result = await round_after_summary_in_system_mode(open_memory)
    seen = chat.seen[-1]
    assert seen[0].type == "system" and "message 1" in seen[0].text
    assert [m.text for m in seen[1:]] == ["message 4"]
    assert isinstance(result["messages"][-1], AIMessage) and result["messages"][-1].text == "reply 4"
