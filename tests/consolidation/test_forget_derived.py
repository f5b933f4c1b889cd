"""Forgetting reaches what consolidation made: a fact stated over 4 rounds, consolidated (daily and weekly notes)
and batch-summarized, is in no column of any table after delete_conversation or forget_item, recall no longer
finds it, and the next nightly run makes the dropped notes again from what is left."""

from __future__ import annotations

import uuid
from typing import Any

from langchain_core.messages import HumanMessage

from memory_agent import MemoryService, with_memory
from memory_agent.consolidation import ConsolidationRun, ManualClock, run_batch_summaries, run_nightly
from memory_agent.llm.offline import OfflineSummaryModel
from memory_agent.long_term import ItemOrigin, ItemScope, forget_item, remember
from memory_agent.schemas.keys import UserKey
from memory_agent.settings import MemorySettings
from tests.conftest import execute, query
from tests.consolidation.conftest import CountingModel, day
from tests.long_term.conftest import items
from tests.long_term.test_forget import tables_holding
from tests.long_term.test_summary_job import open_service  # noqa: F401 (fixture)
from tests.support import EchoChat

NIGHTLY = MemorySettings(consolidation_enabled=True)
BATCHES = MemorySettings(consolidation_enabled=False, batch_summaries_enabled=True, min_age_days=1)
NOTE_COLUMNS = {
    "consolidation_notes.content",
    "consolidation_notes.consolidated",
    "consolidation_notes.insights",
    "consolidation_notes.key_insights",
    "consolidation_notes.key_insights_text",
}


async def consolidate(conn: Any, at_day: int) -> None:
    """The nightly run (dailies, the weekly of May 31 - June 6) and the batch summaries, as the schedules run them."""
    await run_nightly(conn, "default", "ana", day(at_day, 6), run=ConsolidationRun(CountingModel(), NIGHTLY))
    await run_batch_summaries(conn, "default", "ana", day(at_day, 6), run=ConsolidationRun(CountingModel(), BATCHES))


async def write_decisions(conn: Any, days: int) -> None:
    """One decision a day, at noon, from day 0 on (no conversation)."""
    for n in range(days):
        await remember(
            conn,
            scope=ItemScope(tenant_id="default", user_id="ana"),
            source=ItemOrigin(conversation_id=None, memory_id=None),
            items=items(decisions=[(f"step_{n}", f"Decided to ship step {n}")]),
            now=day(n, 12),
        )


def weekly_notes(url: str) -> list[tuple[Any, ...]]:
    return query(url, "SELECT period_start FROM consolidation_notes WHERE period = 'weekly'")


async def recalled(memory: MemoryService, canary: str) -> list[str]:
    return [
        hit.text for hit in (await memory.long_term.recall("ana", f"allergic {canary}")).results if canary in hit.text
    ]


async def test_delete_conversation_erases_the_notes_and_batch_summaries_made_from_it(open_service, conn, database_url):
    canary = f"zq{uuid.uuid4().hex[:10]}canary"
    clock = ManualClock(day(0, 9))
    memory = await open_service(OfflineSummaryModel(), clock=clock)
    app = with_memory(EchoChat().graph, memory)
    for n, other in enumerate(["I live in Lisbon.", "I like jazz.", "I work at Acme.", "I have a cat."]):
        clock.set(day(n, 9))
        for thread, text in (("secret", f"I'm allergic to {canary}."), ("kept", other)):
            await app.ainvoke(
                {"messages": [HumanMessage(text)]}, {"configurable": {"thread_id": thread, "user_id": "ana"}}
            )
            assert await memory.drain(timeout=10)
    await consolidate(conn, 8)
    held = set(tables_holding(database_url, canary))
    assert NOTE_COLUMNS | {"batch_summaries.content", "memory.memory_text"} <= held
    assert weekly_notes(database_url) == [(day(-1).date(),)]
    assert await recalled(memory, canary)

    assert await memory.delete_conversation("secret") is True
    assert tables_holding(database_url, canary) == []
    assert await recalled(memory, canary) == []

    # The next run makes the dropped notes again from what is left: the other conversation's facts, no canary.
    await consolidate(conn, 9)
    assert weekly_notes(database_url) == [(day(-1).date(),)]
    assert "Lisbon" in " ".join(row[0] for row in query(database_url, "SELECT consolidated FROM consolidation_notes"))
    assert query(database_url, "SELECT count(*) FROM batch_summaries") == [(1,)]
    assert tables_holding(database_url, canary) == []


async def test_forget_item_erases_the_notes_and_batch_summaries_made_from_it(open_service, conn, database_url):
    canary = f"zq{uuid.uuid4().hex[:10]}canary"
    memory = await open_service(OfflineSummaryModel(), clock=ManualClock(day(10)))
    for n, other in enumerate(["Lisbon", "Porto", "Faro", "Braga"]):  # 4 statements of the fact, one a day
        await remember(
            conn,
            scope=ItemScope(tenant_id="default", user_id="ana"),
            source=ItemOrigin(conversation_id=None, memory_id=None),
            items=items(
                facts=[
                    ("allergies", f"The user is allergic to {canary}", {"single_valued": False}),
                    (f"visit_{n}", f"The user visited {other}"),
                ]
            ),
            now=day(n, 12),
        )
    await consolidate(conn, 8)
    assert NOTE_COLUMNS | {"batch_summaries.content", "items.content"} <= set(tables_holding(database_url, canary))
    assert await recalled(memory, canary)

    holding = [i for i in await memory.long_term.list_items("ana") if canary in i.content]
    for item in holding:
        report = await memory.long_term.forget_item("ana", item.item_id)
        assert report.items_deleted == (item.item_id,)
    assert holding and tables_holding(database_url, canary) == []
    assert await recalled(memory, canary) == []

    await consolidate(conn, 9)
    assert weekly_notes(database_url) == [(day(-1).date(),)]
    assert "Braga" in " ".join(row[0] for row in query(database_url, "SELECT consolidated FROM consolidation_notes"))
    assert tables_holding(database_url, canary) == []


async def test_the_retention_pass_keeps_what_its_batch_summary_stands_for(conn, database_url):
    """The TTL pass forgets originals through forget_item too, but the batch summary (and notes) made from them
    are what is kept of them."""
    await write_decisions(conn, 3)
    await run_nightly(conn, "default", "ana", day(8, 6), run=ConsolidationRun(CountingModel(), NIGHTLY))
    notes = query(database_url, "SELECT note_id FROM consolidation_notes ORDER BY note_id")
    config = MemorySettings(
        consolidation_enabled=False, batch_summaries_enabled=True, min_age_days=1, keep_original_days=2
    )
    report = await run_batch_summaries(conn, "default", "ana", day(8, 6), run=ConsolidationRun(CountingModel(), config))
    assert len(report.summaries) == 1 and len(report.forgotten) == 3
    assert query(database_url, "SELECT count(*) FROM items") == [(0,)]
    assert query(database_url, "SELECT count(*) FROM batch_summaries") == [(1,)]
    assert query(database_url, "SELECT note_id FROM consolidation_notes ORDER BY note_id") == notes


async def test_a_note_written_before_lineage_was_recorded_goes_with_any_forget_of_its_user(conn, database_url):
    await write_decisions(conn, 2)
    await run_nightly(conn, "default", "ana", day(2, 6), run=ConsolidationRun(CountingModel(), NIGHTLY))
    # As a database upgraded to lineage holds them: the older rows have none.
    execute(database_url, "UPDATE consolidation_notes SET source_item_ids = NULL, source_conversation_ids = NULL")
    (first,) = query(database_url, "SELECT item_id FROM items ORDER BY item_id LIMIT 1")[0]
    report = await forget_item(conn, UserKey("default", "ana"), first)
    assert len(report.notes_deleted) == 2 and query(database_url, "SELECT count(*) FROM consolidation_notes") == [(0,)]
    # Made again, with lineage, from what is left.
    again = await run_nightly(conn, "default", "ana", day(2, 7), run=ConsolidationRun(CountingModel(), NIGHTLY))
    assert again.written("daily") == 1
    assert query(database_url, "SELECT count(*) FROM consolidation_notes WHERE source_item_ids IS NULL") == [(0,)]
