"""Clean shutdown: closing drains in-flight summaries within the grace period; the rest stays reclaimable."""

from __future__ import annotations

import asyncio
import threading

from langchain_core.messages import AIMessage, HumanMessage

from memory_agent import MemoryService, MemorySettings
from tests.conftest import query
from tests.support import GatedSummaryModel


async def test_close_waits_for_a_summary_that_finishes_within_the_grace_period(database_url):
    model = GatedSummaryModel()
    memory = await MemoryService.from_settings(MemorySettings(database_url=database_url), model=model).aopen()
    for n in range(3):
        await memory.conversations.finish_round("drain", [HumanMessage(f"m{n}"), AIMessage("ok")])
    threading.Timer(0.3, model.release).start()  # the model answers while close() is draining
    await memory.aclose(timeout=10)
    assert query(database_url, "SELECT status FROM memory") == [("completed",)]


async def test_close_leaves_an_unfinished_summary_reclaimable(database_url):
    model = GatedSummaryModel()  # never released
    # A second of timeout: the summary's own bound (0.8 of it) does not end the call before the close does.
    settings = MemorySettings(database_url=database_url, processing_timeout_s=1.0)
    memory = await MemoryService.from_settings(settings, model=model).aopen()
    for n in range(3):
        await memory.conversations.finish_round("cut", [HumanMessage(f"m{n}"), AIMessage("ok")])
    await memory.aclose(timeout=0.2)
    assert query(database_url, "SELECT memory_id, status FROM memory") == [(1, "processing")]
    await asyncio.sleep(1.1)  # stale now: older than MEMORY_AGENT_PROCESSING_TIMEOUT_S

    # The next process to run a round end for the conversation reclaims it and starts over.
    released = GatedSummaryModel()
    released.release()
    async with MemoryService.from_settings(settings, model=released) as again:
        _, trigger = await again.conversations.finish_round("cut", [HumanMessage("m3"), AIMessage("ok")])
        assert trigger.reclaimed_memory_ids == [1] and trigger.memory_id == 2
        assert await again.drain(timeout=10)
    rows = query(database_url, "SELECT memory_id, status, end_sequence FROM memory ORDER BY 1")
    assert rows == [(1, "failed", 5), (2, "completed", 7)]


async def test_a_cancelled_round_end_still_commits_and_dispatches(open_memory, database_url):
    import asyncio

    model = GatedSummaryModel()
    model.release()
    memory = await open_memory(model=model)
    for n in range(2):
        await memory.conversations.finish_round("cancel", [HumanMessage(f"m{n}"), AIMessage("ok")])
    task = asyncio.ensure_future(memory.conversations.finish_round("cancel", [HumanMessage("m2"), AIMessage("ok")]))
    await asyncio.sleep(0)  # the round end is on its way to the memory loop
    task.cancel()
    assert await memory.drain(timeout=10)
    for _ in range(100):  # the shielded round end finishes on its own
        if query(database_url, "SELECT status FROM memory") == [("completed",)]:
            break
        await asyncio.sleep(0.05)
    assert query(database_url, "SELECT count(*) FROM messages") == [(6,)]
    assert query(database_url, "SELECT status FROM memory") == [("completed",)]
