"""Many round-ends at once on one conversation: the database decides, one summary in flight, a linear chain."""

from __future__ import annotations

import asyncio

from langchain_core.messages import AIMessage, HumanMessage

from memory_agent import MemoryRecord
from tests.conftest import query
from tests.support import GatedSummaryModel


def assert_linear_chain(records: list[MemoryRecord]) -> None:
    completed = [r for r in records if r.status == "completed"]
    ranges = [(r.start_sequence, r.end_sequence) for r in completed]
    assert len(ranges) == len(set(ranges)), f"two completed versions cover the same range: {ranges}"
    previous = None
    for record in records:
        # every version builds on the latest version completed before it was created
        assert record.base_memory_id == (previous.memory_id if previous else None), records
        if record.status == "completed":
            assert previous is None or record.end_sequence > previous.end_sequence
            previous = record


async def test_100_concurrent_round_ends_create_one_processing_row(open_memory, database_url):
    model = GatedSummaryModel()
    memory = await open_memory(model=model, pool_max_size=10)
    # three rounds first, so every one of the 100 concurrent round-ends is past the threshold
    for n in range(3):
        await memory.conversations.finish_round("busy", [HumanMessage(f"warm {n}"), AIMessage(f"ok {n}")])
    assert query(database_url, "SELECT count(*) FROM memory WHERE status = 'processing'") == [(1,)]
    model.release()
    assert await memory.drain(timeout=10)

    results = await asyncio.gather(
        *(
            memory.conversations.finish_round("busy", [HumanMessage(f"user {i}"), AIMessage(f"assistant {i}")])
            for i in range(100)
        )
    )
    outcomes = [trigger.outcome for _, trigger in results]
    assert outcomes.count("started") == 1, outcomes
    assert outcomes.count("already_processing") == 99
    assert query(database_url, "SELECT count(*) FROM memory WHERE status = 'processing'") == [(1,)]

    # Every round is stored whole, its two messages adjacent, sequence numbers gap-free.
    stored = query(
        database_url,
        "SELECT sequence_number, round_number, role FROM messages WHERE conversation_id = 'busy' ORDER BY 1",
    )
    assert [s for s, _, _ in stored] == list(range(206))
    for user, assistant in zip(stored[0::2], stored[1::2]):
        assert (user[1], user[2], assistant[1], assistant[2]) == (user[1], "user", user[1], "assistant")

    model.release()
    assert await memory.drain(timeout=10)
    for i in range(4):  # a few more rounds, each summary released as it starts
        await memory.conversations.finish_round("busy", [HumanMessage(f"late {i}"), AIMessage(f"late ok {i}")])
        model.release()
        assert await memory.drain(timeout=10)
    records = await memory.conversations.get_memory_history("busy")
    assert [r.status for r in records] == ["completed"] * len(records)
    assert_linear_chain(records)
    assert records[-1].end_sequence == 213 and records[-1].start_sequence == 200


async def test_concurrent_conversations_do_not_block_each_other(open_memory, database_url):
    model = GatedSummaryModel()
    memory = await open_memory(model=model)

    async def conversation(name: str) -> None:
        for n in range(3):
            await memory.conversations.finish_round(name, [HumanMessage(f"{name} {n}"), AIMessage("ok")])

    await asyncio.gather(*(conversation(f"c{i}") for i in range(20)))
    assert query(database_url, "SELECT count(*) FROM memory WHERE status = 'processing'") == [(20,)]
    model.release(20)
    assert await memory.drain(timeout=10)
    assert query(database_url, "SELECT count(*) FROM memory WHERE status = 'completed'") == [(20,)]
