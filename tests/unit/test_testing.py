"""memory_agent.testing.NoopMemory: a graph wrapped with it runs, sync and async, and remembers nothing."""

from __future__ import annotations

from langchain_core.messages import HumanMessage

from memory_agent import with_memory
from memory_agent.testing import NoopMemory
from tests.support import EchoChat


async def test_a_graph_with_the_noop_memory_sees_only_what_it_was_given():
    chat = EchoChat()
    app = with_memory(chat.graph, NoopMemory())
    config = {"configurable": {"thread_id": "t1"}}
    first = await app.ainvoke({"messages": [HumanMessage("hello", id="m1")]}, config)
    assert [m.text for m in first["messages"]] == ["hello", "reply 1"]
    await app.ainvoke({"messages": [HumanMessage("again", id="m2")]}, config)
    assert [m.text for m in chat.seen[1]] == ["again"]  # nothing of the first round was kept


def test_the_noop_memory_runs_a_sync_invoke():
    chat = EchoChat()
    app = with_memory(chat.graph, NoopMemory())
    result = app.invoke({"messages": [HumanMessage("hi", id="m1")]}, {"configurable": {"thread_id": "t1"}})
    assert [m.text for m in result["messages"]] == ["hi", "reply 1"]
