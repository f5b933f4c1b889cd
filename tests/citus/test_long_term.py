"""On a Citus cluster: recall, the LangGraph store, consolidation, and forgetting (an item, a conversation, a user)
with nothing of the erased left in any text column of the schema."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from langchain_core.messages import HumanMessage
from psycopg import sql

from memory_agent import MemoryStore, with_memory
from memory_agent.consolidation import ConsolidationRunner
from memory_agent.llm import OfflineConsolidationModel
from memory_agent.llm.offline import OfflineSummaryModel
from memory_agent.long_term import ItemOrigin, ItemScope, remember
from memory_agent.long_term.embedders import HashingEmbeddings
from memory_agent.long_term.embeddings import index_pending
from memory_agent.long_term.recall import recall
from memory_agent.settings import MemorySettings
from tests.citus.conftest import query
from tests.long_term.conftest import items
from tests.support import EchoChat

TEXT_TYPES = ["text", "character varying", "character", "json", "jsonb"]


def columns_holding(url: str, schema: str, needle: str) -> list[str]:
    """Every text-like column (and text arrays) of every table and view of the schema that holds `needle`."""
    columns = query(
        url,
        schema,
        "SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = %s"
        " AND (data_type = ANY(%s) OR (data_type = 'ARRAY' AND udt_name IN ('_text', '_varchar', '_jsonb')))",
        [schema, TEXT_TYPES],
    )
    assert len(columns) > 20  # the scan reaches the whole schema
    found = []
    for table, column in columns:
        statement = sql.SQL("SELECT count(*) FROM {} WHERE strpos({}::text, %s) > 0").format(
            sql.Identifier(table), sql.Identifier(column)
        )
        if query(url, schema, statement, [needle])[0][0]:
            found.append(f"{table}.{column}")
    return found


async def talk(app, thread: str, user: str, texts: list[str]) -> None:
    for text in texts:
        config = {"configurable": {"thread_id": thread, "user_id": user, "tenant_id": "acme"}}
        await app.ainvoke({"messages": [HumanMessage(text)]}, config)


async def test_recall_and_the_store(open_memory):
    memory = await open_memory(model=OfflineSummaryModel())
    app = with_memory(EchoChat().graph, memory)
    await talk(app, "trip", "ana", ["I live in Lisbon.", "I'm allergic to peanuts.", "I like green tea.", "Bye."])
    await talk(app, "other", "ben", ["I'm allergic to shellfish.", "I live in Porto.", "Fine.", "Bye."])
    assert await memory.drain(timeout=30)
    hits = (await memory.long_term.recall("ana", "peanuts allergy", tenant_id="acme")).results
    assert hits and all("shellfish" not in hit.text for hit in hits)
    assert {"turn", "item"} <= {hit.kind for hit in hits}
    assert any("peanuts" in hit.text for hit in hits if hit.kind == "item")
    # A date in the query: the date path's statement (the span's turns) is routed to the user's shard too.
    async with memory.backend.session() as conn:
        dated = await recall(
            conn, tenant_id="acme", user_id="ana", query="what did I say today?", now=datetime.now(UTC)
        )
    assert dated.ranked and all("date" in hit.paths for hit in dated.ranked if hit.kind == "turn")
    assert all("shellfish" not in hit.text and "Porto" not in hit.text for hit in dated.ranked)

    store = MemoryStore.from_service(memory, tenant_id="acme")
    await store.aput(("facts", "ana"), "diet", {"content": "ana eats no meat"})
    await store.aput(("facts", "ana"), "diet", {"content": "ana eats fish again"})
    got = await store.aget(("facts", "ana"), "diet")
    assert got is not None and got.value["content"] == "ana eats fish again"
    found = await store.asearch(("facts", "ana"), query="fish")
    assert any("fish" in str(item.value) for item in found)
    assert await store.asearch(("facts", "ben"), query="fish") == [] or all(
        "ana" not in str(item.value) for item in await store.asearch(("facts", "ben"), query="fish")
    )
    await store.adelete(("facts", "ana"), "diet")
    assert await store.aget(("facts", "ana"), "diet") is None


async def test_hybrid_recall_with_an_embedder(open_memory):
    """With an embedder: the vector path over all of the user's vectors, fused with full text's hits, and alone when
    full text is not asked; each on the user's shards alone."""
    memory = await open_memory(model=OfflineSummaryModel(), embedder=HashingEmbeddings())
    app = with_memory(EchoChat().graph, memory)
    await talk(app, "trip", "ana", ["I live in Lisbon.", "I'm allergic to peanuts.", "I like green tea.", "Bye."])
    await talk(app, "other", "ben", ["I'm allergic to shellfish.", "I live in Porto.", "Fine.", "Bye."])
    assert await memory.drain(timeout=30)
    result = await memory.long_term.recall("ana", "peanuts allergy", tenant_id="acme")
    assert result.fts_hits >= 2 and result.vector_hits >= 1
    assert any(hit.paths == ["fts", "vector"] for hit in result.ranked)
    assert all("shellfish" not in hit.text and "Porto" not in hit.text for hit in result.ranked)
    async with memory.backend.session() as conn:
        alone = await recall(
            conn, tenant_id="acme", user_id="ana", query="peanuts allergy", embedder=memory.embedder, paths=("vector",)
        )
    assert alone.vector_hits >= 2 and alone.retrieval_path == "vector"
    assert any("peanuts" in hit.text for hit in alone.ranked)
    assert all("shellfish" not in hit.text and "Porto" not in hit.text for hit in alone.ranked)


async def test_the_catch_up_of_vectors_runs_on_the_cluster(open_memory):
    """The periodic catch-up (users picked at random across the shards) finds the turns a service without an
    embedder stored, and writes their vectors on the users' shards."""
    plain = await open_memory(model=OfflineSummaryModel())
    await talk(with_memory(EchoChat().graph, plain), "late", "cleo", ["I play the cello.", "On Sundays.", "Bye."])
    assert await plain.drain(timeout=30)
    memory = await open_memory(model=OfflineSummaryModel(), embedder=HashingEmbeddings())
    async with memory.backend.session() as conn:
        assert await index_pending(conn, memory.embedder) >= 6
        assert await index_pending(conn, memory.embedder) == 0
    alone = await memory.long_term.recall("cleo", "cello", tenant_id="acme")
    assert alone.vector_hits >= 1


async def test_forgetting_leaves_no_canary(open_memory, citus_url, schema):
    item_canary, thread_canary, user_canary = (f"zq{uuid.uuid4().hex[:8]}{kind}" for kind in ("item", "conv", "user"))
    memory = await open_memory(model=OfflineSummaryModel())
    app = with_memory(EchoChat().graph, memory)
    await talk(app, "kept", "ana", [f"I'm allergic to {item_canary}.", "I live in Lisbon.", "Fine.", "Bye."])
    await talk(app, "secret", "ana", [f"I'm allergic to {thread_canary}.", "I like tea.", "Fine.", "Bye."])
    await talk(app, "bens", "ben", [f"I'm allergic to {user_canary}.", "I like coffee.", "Fine.", "Bye."])
    assert await memory.drain(timeout=30)
    for canary in (item_canary, thread_canary, user_canary):
        assert "items.content" in columns_holding(citus_url, schema, canary)

    (item,) = [i for i in await memory.long_term.list_items("ana", tenant_id="acme") if item_canary in i.content]
    await memory.long_term.forget_item("ana", item.item_id, tenant_id="acme")
    assert [i for i in await memory.long_term.list_items("ana", tenant_id="acme") if item_canary in i.content] == []
    assert "items.content" not in columns_holding(citus_url, schema, item_canary)

    assert await memory.delete_conversation("secret", user_id="ana", tenant_id="acme")
    assert columns_holding(citus_url, schema, thread_canary) == []

    await memory.long_term.forget_user("ben", tenant_id="acme")
    assert columns_holding(citus_url, schema, user_canary) == []
    assert query(citus_url, schema, "SELECT count(*) FROM messages WHERE user_id = 'ben'") == [(0,)]
    # ana's other conversation is untouched.
    assert query(citus_url, schema, "SELECT count(*) FROM messages WHERE conversation_id = 'kept'") == [(8,)]


async def test_consolidation_over_a_week(open_memory, citus_url, schema):
    memory = await open_memory()
    start = datetime(2026, 6, 1, tzinfo=UTC)  # a Monday

    async def write(conn) -> None:
        for n in range(8):
            for user in ("ana", "ben"):
                await remember(
                    conn,
                    scope=ItemScope(tenant_id="acme", user_id=user),
                    items=items(
                        facts=[("mood", f"{user} felt {'calm' if n % 2 else 'busy'} on day {n}")],
                        decisions=[(f"step_{n}", f"{user} decided to ship step {n}")],
                    ),
                    source=ItemOrigin(conversation_id=None, memory_id=None),
                    now=start + timedelta(days=n, hours=12),
                )

    async def consolidate() -> None:
        async with memory.backend.session() as conn:
            await write(conn)
        runner = ConsolidationRunner(
            memory.backend.pool, OfflineConsolidationModel(), MemorySettings(consolidation_enabled=True)
        )
        for n in range(8):
            await runner.run_due(start + timedelta(days=n + 1, hours=5))

    await memory.loop.arun(consolidate())
    notes = dict(
        query(
            citus_url,
            schema,
            "SELECT period, count(*) FROM consolidation_notes WHERE user_id = 'ana' GROUP BY period",
        )
    )
    assert notes == {"daily": 8, "weekly": 1}
    assert query(citus_url, schema, "SELECT count(DISTINCT user_id) FROM consolidation_notes") == [(2,)]
