"""A graph for the LangGraph server under test: it writes and reads the server's store slot (`runtime.store`)
and answers with what it found, so a test sees what a deployed graph's store is."""

from __future__ import annotations

import json

from langchain_core.messages import AIMessage
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.runtime import Runtime


async def use_store(state: MessagesState, runtime: Runtime) -> dict:
    store = runtime.store
    assert store is not None
    namespace = ("memories", "ana")
    await store.aput(namespace, "city", {"content": state["messages"][-1].text})
    found = await store.asearch(namespace, query="Lyon")
    item = await store.aget(namespace, "city")
    answer = {"found": [hit.value["content"] for hit in found], "got": item.value if item else None}
    return {"messages": [AIMessage(json.dumps(answer))]}


builder = StateGraph(MessagesState)
builder.add_node("use_store", use_store)
builder.add_edge(START, "use_store")
store_probe = builder.compile(name="store_probe")
