"""The per-user public API: list_items, forget_item, forget_user, and delete_conversation forgetting everything
derived from the conversation (the canary, through rounds only)."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from langchain_core.messages import HumanMessage

from memory_agent import InvalidInputError, resources, with_memory
from memory_agent.llm.offline import OfflineSummaryModel
from memory_agent.long_term import ItemOrigin, ItemScope, remember
from tests.conftest import query
from tests.long_term.conftest import at, items
from tests.long_term.test_forget import tables_holding
from tests.support import EchoChat


async def say(memory, app, thread: str, texts: list[str], user: str = "ana", tenant: str | None = None) -> None:
    """Rounds, each followed by its summary (a summary still running when a round ends skips that round's
    trigger; the next round's summary covers it)."""
    for text in texts:
        configurable = {"thread_id": thread, "user_id": user, **({"tenant_id": tenant} if tenant else {})}
        await app.ainvoke({"messages": [HumanMessage(text)]}, {"configurable": configurable})
        assert await memory.drain(timeout=10)


async def test_canary_delete_conversation_leaves_no_trace_through_the_public_api(open_memory, database_url):
    canary = f"zq{uuid.uuid4().hex[:10]}canary"
    memory = await open_memory(model=OfflineSummaryModel())
    app = with_memory(EchoChat().graph, memory)
    await say(memory, app, "secret", [f"I'm allergic to {canary}.", "I live in Lisbon.", "Nothing else.", "Bye."])
    kept = [
        "I'm allergic to peanuts.",
        "I'm allergic to shellfish.",
        "I'm allergic to penicillin.",
        "I live in Lisbon.",
    ]
    await say(memory, app, "kept", kept)
    assert await memory.drain(timeout=10)

    held = await memory.long_term.list_items("ana")
    assert any(canary in i.content and not i.is_summary for i in held)
    (summary,) = [i for i in held if i.is_summary]  # four allergies: the cluster summary names the canary too
    assert canary in summary.content and len(summary.source_item_ids) == 4
    assert {"items.content", "memory.memory_text", "memory.items", "messages.content"} <= set(
        tables_holding(database_url, canary)
    )

    assert await memory.delete_conversation("secret") is True
    assert tables_holding(database_url, canary) == []
    after = {i.content: i for i in await memory.long_term.list_items("ana")}
    # Said in the other conversation too: kept, with that lineage only. The summary was rebuilt without it.
    assert [s.conversation_id for s in after["The user lives in Lisbon"].sources] == ["kept"]
    rebuilt = after["The user is allergic to peanuts, penicillin and shellfish"]
    assert rebuilt.is_summary and rebuilt.item_id == summary.item_id and len(rebuilt.source_item_ids) == 3
    assert query(database_url, "SELECT DISTINCT conversation_id FROM messages") == [("kept",)]
    assert await memory.delete_conversation("secret") is False


async def test_list_items_is_scoped_by_user_and_tenant_and_reads_the_past(open_memory):
    memory = await open_memory(model=OfflineSummaryModel())
    app = with_memory(EchoChat().graph, memory)
    await say(memory, app, "a1", ["I live in Lisbon.", "Hi.", "Bye."], user="ana", tenant="acme")
    await say(memory, app, "b1", ["I live in Porto.", "Hi.", "Bye."], user="bob", tenant="acme")
    await say(memory, app, "a2", ["I live in Faro.", "Hi.", "Bye."], user="ana")
    assert await memory.drain(timeout=10)
    assert [i.content for i in await memory.long_term.list_items("ana", tenant_id="acme")] == [
        "The user lives in Lisbon"
    ]
    assert [i.content for i in await memory.long_term.list_items("bob", tenant_id="acme")] == [
        "The user lives in Porto"
    ]
    assert [i.content for i in await memory.long_term.list_items("ana")] == [
        "The user lives in Faro"
    ]  # tenant 'default'
    (item,) = await memory.long_term.list_items("ana")
    assert await memory.long_term.list_items("ana", as_of=item.valid_from.replace(year=2000)) == []
    with pytest.raises(InvalidInputError, match="user_id"):
        await memory.long_term.list_items("")
    with pytest.raises(InvalidInputError, match="^as_of must be a timezone-aware datetime"):
        await memory.long_term.list_items("ana", as_of=item.valid_from.replace(tzinfo=None))


async def test_forget_item_and_forget_user(open_memory, database_url):
    memory = await open_memory(model=OfflineSummaryModel())
    app = with_memory(EchoChat().graph, memory)
    await say(memory, app, "a1", ["I live in Lisbon.", "I'm allergic to peanuts.", "Bye."], user="ana", tenant="acme")
    await say(memory, app, "b1", ["I live in Porto.", "Hi.", "Bye."], user="bob", tenant="acme")
    assert await memory.drain(timeout=10)

    city = next(i for i in await memory.long_term.list_items("ana", tenant_id="acme") if i.key == "home_city")
    assert (await memory.long_term.forget_item("bob", city.item_id, tenant_id="acme")).items_deleted == ()  # not bob's
    report = await memory.long_term.forget_item("ana", city.item_id, tenant_id="acme")
    assert report.items_deleted == (city.item_id,)
    assert [i.key for i in await memory.long_term.list_items("ana", tenant_id="acme")] == ["allergies"]
    with pytest.raises(InvalidInputError, match="item_id"):
        await memory.long_term.forget_item("ana", "1", tenant_id="acme")  # type: ignore[arg-type]

    report = await memory.long_term.forget_user("ana", tenant_id="acme")
    assert report.conversations_deleted == ("a1",) and len(report.items_deleted) == 1
    assert await memory.long_term.list_items("ana", tenant_id="acme") == []
    assert tables_holding(database_url, "peanuts") == []
    assert [i.content for i in await memory.long_term.list_items("bob", tenant_id="acme")] == [
        "The user lives in Porto"
    ]
    assert query(database_url, "SELECT conversation_id FROM conversations") == [("b1",)]


COMPLETE_FIELDS = [
    "memory_text",
    "items",
    "generation_time_ms",
    "model_name",
    "input_tokens",
    "output_tokens",
    "summarized_start",
    "summarized_end",
    "now",
    "finished_at",
    "calls",
]


async def test_a_summary_job_racing_delete_conversation_is_waited_for(open_memory, database_url, connect):
    canary = f"zq{uuid.uuid4().hex[:10]}canary"
    memory = await open_memory(model=OfflineSummaryModel())
    app = with_memory(EchoChat().graph, memory)
    await say(memory, app, "race", ["I'm allergic to peanuts.", "Hi.", "Bye."])

    job = await connect()  # a summary job of the conversation, between its completing statement and its commit
    async with job.transaction():
        # The version it completes was reclaimed meanwhile: the statement holds the conversation all the same.
        completing = {name: None for name in COMPLETE_FIELDS}
        completing.update(user_id="ana", tenant_id="default", conversation_id="race", memory_id=-1)
        await job.execute(resources.queries()["complete_memory"], completing)
        # Rounds go on under the job's hold.
        await asyncio.wait_for(say(memory, app, "race", ["Still here."]), timeout=10)
        delete = asyncio.create_task(memory.delete_conversation("race"))
        await asyncio.sleep(0.5)
        assert not delete.done()  # the forget waits for the job
        await remember(
            job,
            scope=ItemScope(tenant_id="default", user_id="ana"),
            source=ItemOrigin(conversation_id="race", memory_id=None),
            items=items(facts=[("pet", f"The user has a dog named {canary}", {"source_sequences": [8]})]),
            now=at(1),
        )
    assert await asyncio.wait_for(delete, timeout=10) is True
    assert tables_holding(database_url, canary) == [] and tables_holding(database_url, "peanuts") == []
    assert await memory.long_term.list_items("ana") == []
