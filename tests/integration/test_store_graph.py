"""MemoryStore inside real LangGraph apps: a StateGraph compiled with store= whose nodes use runtime.store and
get_store(), sync and async; create_agent(store=...) with a tool reading ToolRuntime.store; LangMem's memory
tools. Every write lands in the long-term items of the user the namespace names."""

from __future__ import annotations

import json
from typing import Any, TypedDict

from langchain.agents import create_agent
from langchain.tools import ToolRuntime
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langgraph.config import get_store
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from langmem import create_manage_memory_tool, create_search_memory_tool
from pydantic import Field

from memory_agent import MemoryService, MemorySettings, MemoryStore
from tests.conftest import query


class ScriptModel(BaseChatModel):
    """Replies with the given messages in order (tool calls included), whatever it is asked."""

    replies: list[AIMessage] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "script"

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptModel:
        return self

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self.replies.pop(0))])


def call(name: str, args: dict[str, Any], call_id: str) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": name, "args": args, "id": call_id}])


class Note(TypedDict, total=False):
    user_id: str
    text: str
    found: list[str]


def note_graph(store: MemoryStore, *, asynchronous: bool) -> Any:
    """remember (runtime.store) → recall (get_store()), sync or async nodes."""

    def remember(state: Note, runtime: Runtime) -> Note:
        assert runtime.store is store
        runtime.store.put(("memories", state["user_id"]), "allergy", {"content": state["text"]})
        return {}

    def recall(state: Note) -> Note:
        hits = get_store().search(("memories", state["user_id"]), query="allergic")
        return {"found": [hit.value["content"] for hit in hits]}

    async def aremember(state: Note, runtime: Runtime) -> Note:
        assert runtime.store is not None
        await runtime.store.aput(("memories", state["user_id"]), "allergy", {"content": state["text"]})
        return {}

    async def arecall(state: Note) -> Note:
        hits = await get_store().asearch(("memories", state["user_id"]), query="allergic")
        return {"found": [hit.value["content"] for hit in hits]}

    graph = StateGraph(Note)
    graph.add_node("remember", aremember if asynchronous else remember)
    graph.add_node("recall", arecall if asynchronous else recall)
    graph.add_edge(START, "remember")
    graph.add_edge("remember", "recall")
    graph.add_edge("recall", END)
    return graph.compile(store=store)


def current_contents(url: str, user_id: str) -> list[str]:
    return [
        content
        for (content,) in query(
            url,
            "SELECT value->>'content' FROM items WHERE user_id = %s AND upper_inf(valid_during) ORDER BY item_id",
            [user_id],
        )
    ]


def test_a_sync_graph_node_writes_and_reads_through_the_store(database_url):
    with MemoryService.from_settings(MemorySettings(database_url=database_url, drain_timeout_s=5)) as service:
        graph = note_graph(MemoryStore.from_service(service), asynchronous=False)
        result = graph.invoke({"user_id": "alice", "text": "Alice is allergic to peanuts"})
        assert result["found"] == ["Alice is allergic to peanuts"]
        result = graph.invoke({"user_id": "alice", "text": "Alice is allergic to shellfish"})
        assert result["found"] == ["Alice is allergic to shellfish"]  # one current version, the old one closed
        bob = graph.invoke({"user_id": "bob", "text": "Bob is allergic to latex"})
        assert bob["found"] == ["Bob is allergic to latex"]
    assert current_contents(database_url, "alice") == ["Alice is allergic to shellfish"]
    assert query(database_url, "SELECT count(*) FROM items WHERE user_id = 'alice'") == [(2,)]


async def test_an_async_graph_node_writes_and_reads_through_the_store(open_memory, database_url):
    memory = await open_memory()
    graph = note_graph(MemoryStore.from_service(memory, tenant_id="acme"), asynchronous=True)
    result = await graph.ainvoke({"user_id": "alice", "text": "Alice is allergic to peanuts"})
    assert result["found"] == ["Alice is allergic to peanuts"]
    assert query(database_url, "SELECT tenant_id, user_id FROM items") == [("acme", "alice")]


async def test_create_agent_tools_use_the_store_through_tool_runtime(open_memory, database_url):
    @tool
    def save_note(note: str, runtime: ToolRuntime) -> str:
        """Save a note about the user."""
        assert runtime.store is not None
        runtime.store.put(("notes", runtime.config["configurable"]["user_id"]), "latest", {"content": note})
        return "saved"

    @tool
    async def find_notes(topic: str, runtime: ToolRuntime) -> str:
        """Find the user's notes about a topic."""
        assert runtime.store is not None
        hits = await runtime.store.asearch(("notes", runtime.config["configurable"]["user_id"]), query=topic)
        return json.dumps([hit.value["content"] for hit in hits])

    memory = await open_memory()
    store = MemoryStore.from_service(memory)
    model = ScriptModel(
        replies=[
            call("save_note", {"note": "Alice's home city is Lyon"}, "c1"),
            call("find_notes", {"topic": "home city"}, "c2"),
            AIMessage("You live in Lyon."),
        ]
    )
    agent = create_agent(model, [save_note, find_notes], store=store)
    config = {"configurable": {"user_id": "alice"}}
    # The sync tool runs in a worker thread of the async run: its store.put blocks that thread, not the loop.
    result = await agent.ainvoke({"messages": [HumanMessage("remember my city, then tell me")]}, config)
    tool_results = [m.content for m in result["messages"] if isinstance(m, ToolMessage)]
    assert tool_results == ["saved", json.dumps(["Alice's home city is Lyon"])]
    assert current_contents(database_url, "alice") == ["Alice's home city is Lyon"]
    assert query(database_url, "SELECT store_namespace, item_type FROM items") == [(["notes", "alice"], "fact")]


async def test_langmem_memory_tools_create_search_update_and_delete(open_memory, database_url):
    memory = await open_memory()
    store = MemoryStore.from_service(memory)
    namespace = ("memories", "{langgraph_user_id}")
    tools = [create_manage_memory_tool(namespace), create_search_memory_tool(namespace)]
    config = {"configurable": {"langgraph_user_id": "alice"}}

    async def run(*replies: AIMessage) -> list[Any]:
        agent = create_agent(ScriptModel(replies=[*replies, AIMessage("ok")]), tools, store=store)
        result = await agent.ainvoke({"messages": [HumanMessage("go")]}, config)
        return [m.content for m in result["messages"] if isinstance(m, ToolMessage)]

    await run(call("manage_memory", {"content": "User is allergic to peanuts", "action": "create"}, "c1"))
    found = await run(call("search_memory", {"query": "allergy"}, "c2"))
    hits = json.loads(found[0])
    assert [hit["value"]["content"] for hit in hits] == ["User is allergic to peanuts"]
    assert hits[0]["namespace"] == ["memories", "alice"] and hits[0]["score"] > 0
    memory_id = hits[0]["key"]
    update = {"content": "User is allergic to peanuts and cashews", "action": "update", "id": memory_id}
    await run(call("manage_memory", update, "c3"))
    assert current_contents(database_url, "alice") == ["User is allergic to peanuts and cashews"]
    assert query(database_url, "SELECT count(*) FROM items WHERE key = %s", [memory_id]) == [(2,)]  # history kept
    await run(call("manage_memory", {"action": "delete", "id": memory_id}, "c4"))
    assert query(database_url, "SELECT count(*) FROM items") == [(0,)]  # forgotten, every version
    assert await run(call("search_memory", {"query": "allergy"}, "c5")) == ["[]"]
