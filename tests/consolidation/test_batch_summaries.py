"""Batch summaries with retention: old items summarized oldest first in bounded batches (one model call each),
originals forgotten after keep_original_days with their lineage, summaries kept."""

from __future__ import annotations

import asyncio

from memory_agent.consolidation import ConsolidationRun, ConsolidationRunner, run_batch_summaries
from memory_agent.long_term import ItemOrigin, ItemScope, list_items, remember
from memory_agent.schemas.keys import UserKey
from memory_agent.settings import MemorySettings
from tests.conftest import query
from tests.consolidation.conftest import CountingModel, day
from tests.long_term.conftest import items

CONFIG = MemorySettings(
    consolidation_enabled=False,
    batch_summaries_enabled=True,
    min_age_days=7,
    max_memories_per_batch=4,
    keep_original_days=30,
)


async def write_decision(conn, n: int, project: str = "") -> None:
    await remember(
        conn,
        scope=ItemScope(tenant_id="acme", user_id="alice", project=project),
        source=ItemOrigin(conversation_id=f"c{n}", memory_id=None),
        items=items(decisions=[(f"step_{n}", f"Decided to ship step {n}")]),
        now=day(n, 12),
    )


def summaries(url: str) -> list[tuple]:
    return query(
        url,
        "SELECT project, summarized_ids, summarized_from, summarized_until FROM batch_summaries ORDER BY summary_id",
    )


async def test_batches_oldest_first_then_ttl(conn, pool, database_url):
    for n in range(10):
        await write_decision(conn, n)
    await write_decision(conn, 2, project="other")
    ids = [row[0] for row in query(database_url, "SELECT item_id FROM items WHERE project = '' ORDER BY item_id")]
    (other,) = query(database_url, "SELECT item_id FROM items WHERE project = 'other'")[0]
    model = CountingModel()

    # Day 12: items older than day 5 — days 0..4 of the default project, day 2 of "other".
    report = await run_batch_summaries(conn, "acme", "alice", day(12), run=ConsolidationRun(model, CONFIG))
    assert len(report.summaries) == 3 and len(model.calls) == 3
    assert summaries(database_url) == [
        ("", ids[0:4], day(0, 12), day(3, 12)),
        ("", ids[4:5], day(4, 12), day(4, 12)),
        ("other", [other], day(2, 12), day(2, 12)),
    ]
    # Nothing new: no call, no row.
    again = await run_batch_summaries(conn, "acme", "alice", day(12), run=ConsolidationRun(model, CONFIG))
    assert again.summaries == [] and len(model.calls) == 3

    # Day 20: days 5..9 in two batches; every original still there (keep_original_days not reached).
    await run_batch_summaries(conn, "acme", "alice", day(20), run=ConsolidationRun(model, CONFIG))
    assert [row[1] for row in summaries(database_url)[3:]] == [ids[5:9], ids[9:10]]
    assert query(database_url, "SELECT count(*) FROM items") == [(11,)]

    # Day 40: originals older than day 10 are forgotten with their lineage; a newer item is summarized, kept.
    await write_decision(conn, 30)
    report = await run_batch_summaries(conn, "acme", "alice", day(40), run=ConsolidationRun(model, CONFIG))
    assert sorted(report.forgotten) == sorted([*ids, other])
    remaining = await list_items(conn, UserKey("acme", "alice"))
    assert [item.content for item in remaining] == ["Decided to ship step 30"]
    assert query(database_url, "SELECT count(*) FROM item_sources") == [(1,)]
    rows = summaries(database_url)
    assert len(rows) == 6 and rows[0][1] == ids[0:4]  # summaries and their lineage stay
    assert query(database_url, "SELECT count(*) FROM batch_summaries WHERE content <> ''") == [(6,)]
    assert query(
        database_url,
        "SELECT schedule, interval_days, next_run FROM consolidation_schedules WHERE job = 'batch_summaries'",
    ) == [("daily", 1, day(41))]


async def test_two_runs_racing_summarize_each_item_once(connect, database_url):
    first, second = await connect(), await connect()
    for n in range(9):
        await write_decision(first, n)
    model = CountingModel()
    await asyncio.gather(
        run_batch_summaries(first, "acme", "alice", day(30), run=ConsolidationRun(model, CONFIG)),
        run_batch_summaries(second, "acme", "alice", day(30), run=ConsolidationRun(model, CONFIG)),
    )
    summarized = [i for (ids,) in query(database_url, "SELECT summarized_ids FROM batch_summaries") for i in ids]
    assert sorted(summarized) == sorted(set(summarized)) and len(summarized) == 9


async def test_the_runner_runs_batch_summaries_when_due(conn, pool, database_url):
    for n in range(3):
        await write_decision(conn, n)
    runner = ConsolidationRunner(pool, CountingModel(), CONFIG)
    assert await runner.run_due(day(10)) == {
        ("batch_summaries", "acme", "alice"): "1 batch summaries, 0 originals forgotten"
    }
    assert await runner.run_due(day(10, 12)) == {}  # next run: day 11
    weekly = ConsolidationRunner(
        pool,
        CountingModel(),
        MemorySettings(consolidation_enabled=False, batch_summaries_enabled=True, batch_summaries_schedule="weekly"),
    )
    assert list(await weekly.run_due(day(11))) == [("batch_summaries", "acme", "alice")]
    assert query(database_url, "SELECT next_run FROM consolidation_schedules") == [(day(18),)]
