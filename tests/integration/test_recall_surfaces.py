"""One recall on every read surface: items the summary job extracted, batch summaries and key insights of
consolidation notes reach LangGraph nodes and LangMem's tools through MemoryStore.search, LangChain chains and
agents through memory.as_retriever, in recall's order with their provenance."""

from __future__ import annotations

import asyncio
import json
from datetime import datetime
from typing import Any, TypedDict

from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import RunnablePassthrough
from langchain_core.tools import create_retriever_tool
from langgraph.config import get_store
from langgraph.graph import END, START, StateGraph
from langmem import create_manage_memory_tool, create_search_memory_tool

from memory_agent import MemoryStore, with_memory
from memory_agent.consolidation import ConsolidationRun, run_batch_summaries
from memory_agent.errors import InvalidInputError
from memory_agent.llm import OfflineConsolidationModel
from memory_agent.llm.offline import OfflineSummaryModel
from memory_agent.long_term import ItemOrigin, ItemScope, remember
from memory_agent.long_term.store_keys import derived_item_key
from memory_agent.settings import MemorySettings
from tests.conftest import query
from tests.integration.test_store_graph import ScriptModel, call
from tests.long_term.conftest import at, items
from tests.support import EchoChat

ALLERGY = "The user is allergic to peanuts"
QUESTION = "What am I allergic to?"


async def chat(memory: Any, thread: str, user: str, texts: list[str]) -> None:
    app = with_memory(EchoChat().graph, memory)
    for text in texts:
        await app.ainvoke({"messages": [HumanMessage(text)]}, {"configurable": {"thread_id": thread, "user_id": user}})
    assert await memory.drain(timeout=10)


async def extracted_allergy(open_memory: Any) -> Any:
    """A service whose summary job extracted the allergy item from a conversation of ana's (no store put)."""
    memory = await open_memory(model=OfflineSummaryModel())
    await chat(memory, "dinner", "ana", ["I'm allergic to peanuts.", "What should I cook tonight?", "Thanks."])
    assert [item.content for item in await memory.long_term.list_items("ana")] == [ALLERGY]
    return memory


class Found(TypedDict, total=False):
    user_id: str
    question: str
    found: list[dict[str, Any]]


def search_graph(store: MemoryStore, *, asynchronous: bool) -> Any:
    """One node that searches the store the graph was compiled with (get_store()), sync or async."""

    def search(state: Found) -> Found:
        hits = get_store().search(("memories", state["user_id"]), query=state["question"])
        return {"found": [{**hit.value, "store_key": hit.key} for hit in hits]}

    async def asearch(state: Found) -> Found:
        hits = await get_store().asearch(("memories", state["user_id"]), query=state["question"])
        return {"found": [{**hit.value, "store_key": hit.key} for hit in hits]}

    graph = StateGraph(Found)
    graph.add_node("search", asearch if asynchronous else search)
    graph.add_edge(START, "search")
    graph.add_edge("search", END)
    return graph.compile(store=store)


async def test_a_graph_node_finds_what_the_summary_job_extracted_through_the_store(open_memory):
    memory = await extracted_allergy(open_memory)
    store = MemoryStore.from_service(memory)
    (item,) = await memory.long_term.list_items("ana")
    expected = (await memory.long_term.recall("ana", QUESTION)).results
    for asynchronous in (True, False):
        graph = search_graph(store, asynchronous=asynchronous)
        state = {"user_id": "ana", "question": QUESTION}
        result = await (graph.ainvoke(state) if asynchronous else asyncio.to_thread(graph.invoke, state))
        found = result["found"]
        # Recall's memories, in recall's order, each with its provenance.
        assert [hit["content"] for hit in found] == [hit.text for hit in expected]
        (allergy,) = [hit for hit in found if hit["kind"] == "item"]
        assert allergy["content"] == ALLERGY and allergy["store_key"] == derived_item_key(item.item_id)
        assert allergy["item_ids"] == [item.item_id] and allergy["sources"] == [["dinner", 0]]
        assert allergy["is_summary"] is False
    # Another user's namespace shows nothing of ana's; a deeper prefix is the application's own partition.
    assert await store.asearch(("memories", "bob"), query=QUESTION) == []
    assert await store.asearch(("memories", "ana", "work"), query=QUESTION) == []
    assert [
        h.value["kind"] for h in await store.asearch(("memories", "ana"), query=QUESTION, filter={"kind": "item"})
    ] == ["item"]


async def test_langmem_search_tool_finds_extracted_items_beside_store_rows(open_memory):
    memory = await extracted_allergy(open_memory)
    store = MemoryStore.from_service(memory)
    await store.aput(("memories", "ana"), "diet", {"content": "User avoids peanuts and eats vegetarian"})
    await store.aput(("preferences", "ana"), "snacks", {"content": "User likes peanuts-free granola"})
    tool = create_search_memory_tool(("memories", "{langgraph_user_id}"))
    model = ScriptModel(replies=[call("search_memory", {"query": "peanuts"}, "c1"), AIMessage("ok")])
    agent = create_agent(model, [tool], store=store)
    result = await agent.ainvoke({"messages": [HumanMessage("go")]}, {"configurable": {"langgraph_user_id": "ana"}})
    (output,) = [m.content for m in result["messages"] if isinstance(m, ToolMessage)]
    hits = json.loads(output)
    by_content = {hit["value"]["content"]: hit for hit in hits}
    assert ALLERGY in by_content and "User avoids peanuts and eats vegetarian" in by_content
    assert "User likes peanuts-free granola" not in by_content  # another category's row
    assert by_content[ALLERGY]["namespace"] == ["memories", "ana"] and by_content[ALLERGY]["score"] > 0
    assert by_content["User avoids peanuts and eats vegetarian"]["key"] == "diet"  # a put row as it was put
    assert by_content["I'm allergic to peanuts."]["value"]["kind"] == "turn"  # the turn itself, with its place
    assert by_content["I'm allergic to peanuts."]["key"] == "turn:dinner:0"


async def old_batch(memory: Any) -> int:
    """Two old items of ana's summarized in a batch, then forgotten by the retention pass; the summary's id."""
    config = MemorySettings(consolidation_enabled=False, batch_summaries_enabled=True, keep_original_days=30)

    async def run() -> int:
        async with memory.backend.pool.connection() as conn:
            for n, text in enumerate(["Decided to book the Kyoto ryokan for April", "Decided on a rail pass"]):
                await remember(
                    conn,
                    scope=ItemScope(tenant_id="default", user_id="ana"),
                    source=ItemOrigin(conversation_id=None, memory_id=None),
                    items=items(decisions=[(f"trip_{n}", text)]),
                    now=at(n),
                )
            report = await run_batch_summaries(
                conn, "default", "ana", at(60), run=ConsolidationRun(OfflineConsolidationModel(), config)
            )
        assert len(report.forgotten) == 2
        (summary_id,) = report.summaries
        return summary_id

    summary_id: int = await memory.loop.arun(run())
    assert await memory.long_term.list_items("ana") == []
    return summary_id


async def test_a_batch_summary_reaches_the_store_and_the_retriever_after_its_originals_are_deleted(open_memory):
    memory = await open_memory()
    summary_id = await old_batch(memory)
    question = "Where did I book in Kyoto?"
    (hit,) = (await memory.long_term.recall("ana", question)).results
    assert hit.batch_summary_id == summary_id and hit.is_summary and len(hit.source_item_ids) == 2

    (found,) = await MemoryStore.from_service(memory).asearch(("memories", "ana"), query=question)
    assert found.key == f"batch:{summary_id}" and found.value["is_summary"] is True
    assert found.value["source_item_ids"] == hit.source_item_ids and "Kyoto ryokan" in found.value["content"]

    (document,) = await memory.as_retriever(user_id="ana").ainvoke(question)
    assert document.page_content == hit.text
    assert document.metadata["batch_summary_id"] == summary_id and document.metadata["is_summary"] is True
    assert document.metadata["source_item_ids"] == hit.source_item_ids


async def test_a_retriever_tool_and_a_chain_read_the_users_memory(open_memory):
    memory = await extracted_allergy(open_memory)
    retriever = memory.as_retriever(user_id="ana", k=3)
    tool = create_retriever_tool(retriever, "recall_memory", "Search what the user told us before.")
    model = ScriptModel(replies=[call("recall_memory", {"query": QUESTION}, "c1"), AIMessage("Peanuts.")])
    result = await create_agent(model, [tool]).ainvoke({"messages": [HumanMessage(QUESTION)]})
    (output,) = [m.content for m in result["messages"] if isinstance(m, ToolMessage)]
    assert ALLERGY in output and "allergic to peanuts." in output

    prompt = ChatPromptTemplate.from_messages([("system", "Known about the user:\n{context}"), ("human", "{question}")])

    def context(documents: list[Any]) -> str:
        return "\n".join(f"{d.page_content} ({d.metadata['kind']})" for d in documents)

    chain = {"context": retriever | context, "question": RunnablePassthrough()} | prompt
    value = await asyncio.to_thread(chain.invoke, QUESTION)  # the sync path: call_sync on the memory loop
    system = value.to_messages()[0].text
    assert f"{ALLERGY} (item)" in system and "I'm allergic to peanuts. (turn)" in system
    documents = await retriever.ainvoke(QUESTION)
    assert [d.page_content for d in documents] == [
        h.text for h in (await memory.long_term.recall("ana", QUESTION, limit=3)).results
    ]
    assert await memory.as_retriever(user_id="bob").ainvoke(QUESTION) == []
    try:
        memory.as_retriever(user_id="")
    except InvalidInputError:
        pass
    else:
        raise AssertionError("an empty user id was accepted")


async def test_langmem_deletes_an_extracted_item_it_found_and_cannot_overwrite_it(open_memory, database_url):
    memory = await extracted_allergy(open_memory)
    store = MemoryStore.from_service(memory)
    (item,) = await memory.long_term.list_items("ana")
    key = derived_item_key(item.item_id)
    # An update through the store would leave the extracted item beside a copy: refused, nothing written.
    try:
        await store.aput(("memories", "ana"), key, {"content": "User is allergic to peanuts and cashews"})
    except InvalidInputError as exc:
        assert "extracted" in str(exc)
    else:
        raise AssertionError("a put over an extracted item was accepted")
    assert [i.content for i in await memory.long_term.list_items("ana")] == [ALLERGY]
    assert await store.aget(("memories", "ana"), key) is None
    # Another user's namespace cannot reach it; a deeper namespace is not the derived key's.
    await store.adelete(("memories", "bob"), key)
    await store.adelete(("memories", "ana", "work"), key)
    assert [i.item_id for i in await memory.long_term.list_items("ana")] == [item.item_id]
    # LangMem's delete of what its search found forgets the item with its lineage.
    tools = [create_manage_memory_tool(("memories", "{langgraph_user_id}"))]
    model = ScriptModel(replies=[call("manage_memory", {"action": "delete", "id": key}, "c1"), AIMessage("ok")])
    agent = create_agent(model, tools, store=store)
    await agent.ainvoke({"messages": [HumanMessage("forget it")]}, {"configurable": {"langgraph_user_id": "ana"}})
    assert await memory.long_term.list_items("ana") == []
    assert query(database_url, "SELECT count(*) FROM items WHERE content = %s", [ALLERGY]) == [(0,)]
    # A key of that shape that the application put itself is an ordinary store row.
    await store.aput(("memories", "ana"), "6d656d6f-7279-8000-8000-0000000f423f", {"content": "mine"})
    assert (await store.aget(("memories", "ana"), "6d656d6f-7279-8000-8000-0000000f423f")).value == {"content": "mine"}
    await store.adelete(("memories", "ana"), "6d656d6f-7279-8000-8000-0000000f423f")
    assert await store.aget(("memories", "ana"), "6d656d6f-7279-8000-8000-0000000f423f") is None


async def test_queries_the_driver_would_refuse_and_queries_that_match_nothing(open_memory):
    memory = await extracted_allergy(open_memory)
    store = MemoryStore.from_service(memory)
    for query_text in ("allergic\x00peanuts", "allergic \ud800 peanuts"):  # as the round stores such a message
        assert ALLERGY in [hit.text for hit in (await memory.long_term.recall("ana", query_text)).results]
        assert ALLERGY in [hit.value["content"] for hit in await store.asearch(("memories", "ana"), query=query_text)]
    # Nothing matches: the round start falls back to the latest turns (paths ['recent']); a search answers nothing.
    assert {tuple(hit.paths) for hit in (await memory.long_term.recall("ana", "zzyzx qwvv")).results} == {("recent",)}
    assert await store.asearch(("memories", "ana"), query="zzyzx qwvv") == []
    assert await memory.as_retriever(user_id="ana").ainvoke("zzyzx qwvv") == []
    for bad in (0, -1, True, "3"):
        try:
            memory.as_retriever(user_id="ana", k=bad)
        except InvalidInputError:
            continue
        raise AssertionError(f"k={bad!r} was accepted")
    # A time without its zone would be read in the server's: refused by name, as list_items refuses it.
    for naive in (datetime(2020, 1, 1), "2020-01-01"):
        try:
            await memory.long_term.recall("ana", "peanuts", as_of=naive)
        except InvalidInputError as exc:
            assert str(exc).startswith("as_of must be a timezone-aware datetime")
            continue
        raise AssertionError(f"as_of={naive!r} was accepted")
