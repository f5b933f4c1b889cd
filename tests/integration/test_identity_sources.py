"""Where a round's user comes from (the server's authenticated user, the runtime context, the configurable keys,
in that order), a blank id as "no user", and the reserved form of a conversation's own scope."""

from __future__ import annotations

import logging
from dataclasses import dataclass

import pytest
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage

from memory_agent import InvalidInputError, MemoryMiddleware, MemoryStore, with_memory
from tests.conftest import query
from tests.integration.agent_support import ToolScriptModel
from tests.support import EchoChat


@dataclass
class Account:
    user_id: str | None = None
    tenant_id: str | None = None


def owners(url: str) -> list[tuple[str, str, str]]:
    return query(url, "SELECT conversation_id, tenant_id, user_id FROM conversation_owners ORDER BY 1")


async def test_a_caller_cannot_name_a_conversations_own_scope(open_memory, database_url):
    memory = await open_memory()
    chat = EchoChat()
    app = with_memory(chat.graph, memory)
    await app.ainvoke({"messages": [HumanMessage("my PIN is 4321")]}, {"configurable": {"thread_id": "private-thread"}})
    before = query(database_url, "SELECT count(*) FROM messages")
    intruder = {"configurable": {"thread_id": "other", "user_id": "conversation:private-thread"}}
    with pytest.raises(InvalidInputError, match="reserved for the scope of conversations run without a user"):
        await app.ainvoke({"messages": [HumanMessage("what is my PIN?")]}, intruder)
    assert len(chat.seen) == 1  # the graph never ran for the intruder
    assert query(database_url, "SELECT count(*) FROM messages") == before
    # Every other door refuses the same id: the service's reads, forgetting, recall and the store.
    for call in (
        memory.long_term.list_items("conversation:private-thread"),
        memory.long_term.recall("conversation:private-thread", "PIN"),
        memory.long_term.forget_user("conversation:private-thread"),
        memory.conversations.get_memory_history("private-thread", user_id="conversation:private-thread"),
    ):
        with pytest.raises(InvalidInputError, match="reserved"):
            await call
    store = MemoryStore.from_service(memory)
    with pytest.raises(InvalidInputError, match="reserved"):
        await store.asearch(("memories", "conversation:private-thread"), query="PIN")
    # The owner's own reads by thread id still work.
    assert [m.text for m in (await memory.conversations.get_context_for_workflow("private-thread")).gap_messages] == [
        "my PIN is 4321",
        "reply 1",
    ]


async def test_a_blank_user_is_the_conversation_scope_with_a_debug_line(open_memory, database_url, caplog):
    memory = await open_memory()
    app = with_memory(EchoChat().graph, memory)
    with caplog.at_level(logging.DEBUG, logger="memory_agent.conversation.identity"):
        await app.ainvoke({"messages": [HumanMessage("hi")]}, {"configurable": {"thread_id": "b", "user_id": ""}})
        await app.ainvoke({"messages": [HumanMessage("hi")]}, {"configurable": {"thread_id": "c", "user_id": "  "}})
    assert owners(database_url) == [("b", "default", "conversation:b"), ("c", "default", "conversation:c")]
    assert "thread 'b' names no user" in caplog.text


@pytest.mark.parametrize("sync", [False, True])
async def test_the_runtime_context_names_the_user_before_the_configurable_keys(open_memory, database_url, sync):
    memory = await open_memory()
    app = with_memory(EchoChat().graph, memory)
    config = {"configurable": {"thread_id": "ctx", "user_id": "from-config", "tenant_id": "config-tenant"}}
    call = app.invoke if sync else app.ainvoke
    result = call({"messages": [HumanMessage("hi")]}, config, context=Account("from-context", "ctx-tenant"))
    if not sync:
        result = await result
    assert owners(database_url) == [("ctx", "ctx-tenant", "from-context")]
    # A context that names no user (None, blank or a dict without the key) leaves it to the configurable keys.
    await app.ainvoke(
        {"messages": [HumanMessage("hi")]}, {"configurable": {"thread_id": "c2", "user_id": "u"}}, context={}
    )
    await app.ainvoke(
        {"messages": [HumanMessage("hi")]}, {"configurable": {"thread_id": "c3", "user_id": "u"}}, context=Account(" ")
    )
    assert owners(database_url) == [
        ("c2", "default", "u"),
        ("c3", "default", "u"),
        ("ctx", "ctx-tenant", "from-context"),
    ]


async def test_create_agents_context_schema_names_the_user(open_memory, database_url):
    memory = await open_memory()
    agent = create_agent(ToolScriptModel(), [], middleware=[MemoryMiddleware(memory)], context_schema=Account)
    await agent.ainvoke(
        {"messages": [HumanMessage("hello")]}, {"configurable": {"thread_id": "a1"}}, context=Account("bob")
    )
    agent.invoke(
        {"messages": [HumanMessage("hello")]}, {"configurable": {"thread_id": "a2"}}, context=Account("eve", "t")
    )
    assert owners(database_url) == [("a1", "default", "bob"), ("a2", "t", "eve")]


async def test_the_servers_authenticated_user_wins_over_what_a_client_sends(open_memory, database_url):
    memory = await open_memory()
    app = with_memory(EchoChat().graph, memory)
    configurable = {
        "thread_id": "auth",
        "user_id": "mallory",
        "tenant_id": "elsewhere",
        "langgraph_auth_user_id": "alice",
        "langgraph_auth_user": {"identity": "alice", "tenant_id": "acme"},
    }
    await app.ainvoke(
        {"messages": [HumanMessage("hi")]}, {"configurable": configurable}, context=Account("mallory", "x")
    )
    # No tenant on the authenticated user: the default tenant, not the client's.
    configurable = {"thread_id": "auth2", "tenant_id": "elsewhere", "langgraph_auth_user_id": "bob"}
    await app.ainvoke({"messages": [HumanMessage("hi")]}, {"configurable": configurable})
    # The server's unauthenticated user ("") is no user: the next sources decide.
    configurable = {"thread_id": "auth3", "user_id": "carol", "langgraph_auth_user_id": ""}
    await app.ainvoke({"messages": [HumanMessage("hi")]}, {"configurable": configurable})
    assert owners(database_url) == [
        ("auth", "acme", "alice"),
        ("auth2", "default", "bob"),
        ("auth3", "default", "carol"),
    ]


@pytest.mark.parametrize(
    ("configurable", "context", "problem"),
    [
        ({"user_id": 7}, None, "user_id must be a non-empty string, got int"),
        ({}, Account(user_id=7), "context.user_id must be a non-empty string, got int"),  # type: ignore[arg-type]
        ({"langgraph_auth_user_id": "conversation:x"}, None, "langgraph_auth_user_id 'conversation:x' starts with"),
        ({}, Account("conversation:t"), "context.user_id 'conversation:t' starts with"),
        # A LangGraph server copies configurable into the context: the id was sent in configurable, named so.
        ({"user_id": "conversation:t"}, Account("conversation:t"), "^user_id 'conversation:t' starts with"),
        ({"user_id": "a", "tenant_id": "a\x00b"}, Account("a", "a\x00b"), "^tenant_id "),
        # A blank tenant beside a named user: taken as absent, the user's memory would join the default tenant's.
        ({"user_id": "alice", "tenant_id": ""}, None, "tenant_id is blank while the run names user 'alice'"),
        ({}, Account("alice", "  "), "context.tenant_id is blank while the run names user 'alice'"),
        (
            {"langgraph_auth_user_id": "alice", "langgraph_auth_user": {"tenant_id": ""}},
            None,
            "langgraph_auth_user.tenant_id is blank while the run names user 'alice'",
        ),
    ],
)
async def test_bad_ids_name_their_source(open_memory, database_url, configurable, context, problem):
    memory = await open_memory()
    app = with_memory(EchoChat().graph, memory)
    with pytest.raises(InvalidInputError, match=problem):
        await app.ainvoke(
            {"messages": [HumanMessage("hi")]}, {"configurable": {"thread_id": "t", **configurable}}, context=context
        )
    assert owners(database_url) == []


async def test_a_blank_tenant_without_a_user_is_the_conversations_own_scope(open_memory, database_url):
    # No user is named: the round has the conversation's own scope, whatever tenant it would have had.
    memory = await open_memory()
    app = with_memory(EchoChat().graph, memory)
    await app.ainvoke({"messages": [HumanMessage("hi")]}, {"configurable": {"thread_id": "t", "tenant_id": " "}})
    assert owners(database_url) == [("t", "default", "conversation:t")]
