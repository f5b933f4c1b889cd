"""Recall reads batch summaries (kind 'summary', their summarized item ids as provenance): before the retention
pass with the summarized items' source turns too, after it — the originals forgotten — as what is left of them;
only the user's own, in their tenant; written by then with `as_of`.

Batch summaries are written by the consolidation job itself (run_batch_summaries, the offline model)."""

from __future__ import annotations

from memory_agent.consolidation import ConsolidationRun, run_batch_summaries
from memory_agent.llm import OfflineConsolidationModel
from memory_agent.long_term import ItemOrigin, ItemScope, remember
from memory_agent.long_term.recall import recall
from memory_agent.settings import MemorySettings
from tests.long_term.conftest import at, conn, connect, items  # noqa: F401 (fixtures)

CONFIG = MemorySettings(
    consolidation_enabled=False,
    batch_summaries_enabled=True,
    min_age_days=7,
    max_memories_per_batch=10,
    keep_original_days=30,
)
TENANT, USER = "acme", "ana"


async def remember_old(conn, n: int, content: str, user_id: str = USER, tenant_id: str = TENANT) -> None:
    await remember(
        conn,
        scope=ItemScope(tenant_id=tenant_id, user_id=user_id),
        source=ItemOrigin(conversation_id=f"trip-{n}", memory_id=None),
        items=items(decisions=[(f"trip_{n}", content, {"source_sequences": [0]})]),
        now=at(n),
    )


def batch_hits(found):
    return [hit for hit in found.results if hit.batch_summary_id is not None]


async def test_a_batch_summary_is_recalled_after_its_originals_are_forgotten(conn):
    await remember_old(conn, 0, "Decided to book the Kyoto ryokan for April")
    await remember_old(conn, 1, "Decided to take the night train to Kanazawa")
    await remember_old(conn, 0, "Decided to book the Kyoto ryokan for April", user_id="bob")
    originals = [i for (i,) in await (await conn.execute("SELECT item_id FROM items WHERE user_id = 'ana'")).fetchall()]

    # Day 10: summarized, originals kept (keep_original_days not reached): both found, the summary with the
    # summarized items' ids and their source turns.
    report = await run_batch_summaries(
        conn, TENANT, USER, at(10), run=ConsolidationRun(OfflineConsolidationModel(), CONFIG)
    )
    (summary_id,) = report.summaries
    found = await recall(conn, tenant_id=TENANT, user_id=USER, query="Which ryokan in Kyoto did I book?")
    (batch,) = batch_hits(found)
    assert batch.kind == "summary" and batch.is_summary and batch.batch_summary_id == summary_id
    assert sorted(batch.source_item_ids) == sorted(originals)
    assert batch.sources == [("trip-0", 0), ("trip-1", 0)]
    assert "Kyoto ryokan" in batch.text and "summary of memories from" in found.block
    assert any(hit.kind == "item" for hit in found.results)
    assert batch.provenance()["batch_summary_id"] == summary_id and batch.provenance()["is_summary"] is True

    # Day 40: the retention pass forgot the originals; the summary is what recall returns, its ids kept.
    report = await run_batch_summaries(
        conn, TENANT, USER, at(40), run=ConsolidationRun(OfflineConsolidationModel(), CONFIG)
    )
    assert sorted(report.forgotten) == sorted(originals)
    found = await recall(conn, tenant_id=TENANT, user_id=USER, query="Which ryokan in Kyoto did I book?")
    assert [hit.kind for hit in found.results] == ["summary"]
    (batch,) = batch_hits(found)
    assert sorted(batch.source_item_ids) == sorted(originals) and batch.sources == []  # the lineage rows went
    assert found.retrieval_path == "summaries_only"

    # Another user, another tenant, and a time before the summary was written never see it.
    assert batch_hits(await recall(conn, tenant_id=TENANT, user_id="bob", query="Kyoto ryokan")) == []
    assert batch_hits(await recall(conn, tenant_id="other", user_id=USER, query="Kyoto ryokan")) == []
    before = await recall(conn, tenant_id=TENANT, user_id=USER, query="Kyoto ryokan", as_of=at(5))
    assert batch_hits(before) == []


async def test_batch_summaries_are_found_by_trigrams_and_cjk_bigrams(conn):
    await remember_old(conn, 0, "决定四月去京都住旅馆")
    await remember_old(conn, 1, "Decided on the Shinkansen pass")
    await run_batch_summaries(conn, TENANT, USER, at(40), run=ConsolidationRun(OfflineConsolidationModel(), CONFIG))
    assert [hit.kind for hit in (await recall(conn, tenant_id=TENANT, user_id=USER, query="京都")).results] == [
        "summary"
    ]
    misspelled = await recall(conn, tenant_id=TENANT, user_id=USER, query="Shinkansn")  # no full-text hit
    assert [hit.batch_summary_id is not None for hit in misspelled.results] == [True]
    assert "trgm" in misspelled.results[0].paths
