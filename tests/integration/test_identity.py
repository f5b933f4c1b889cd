"""Every round has a user and a tenant (from the run's config), every row is keyed by them, and a thread id
belongs to one user: another user's round on it is refused before anything is read or written."""

from __future__ import annotations

import pytest
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage

from memory_agent import ConversationOwnerError, InvalidInputError, MemoryMiddleware, with_memory
from tests.conftest import query
from tests.integration.agent_support import ToolScriptModel
from tests.support import EchoChat

TABLES = ("conversations", "messages", "memory", "round_metrics", "round_leases")


def config(thread: str, **identity: str) -> dict:
    return {"configurable": {"thread_id": thread, **identity}}


def keys(url: str, table: str) -> set[tuple[str, str, str]]:
    return set(query(url, f"SELECT DISTINCT tenant_id, user_id, conversation_id FROM {table}"))


def counts(url: str) -> dict[str, int]:
    return {table: query(url, f"SELECT count(*) FROM {table}")[0][0] for table in TABLES}


async def test_rows_carry_the_rounds_user_and_tenant(open_memory, database_url):
    memory = await open_memory()
    chat = EchoChat()
    app = with_memory(chat.graph, memory)
    for n in range(4):  # 8 messages: a summary runs
        await app.ainvoke({"messages": [HumanMessage(f"alice {n}")]}, config("t1", user_id="alice", tenant_id="acme"))
    await app.ainvoke({"messages": [HumanMessage("anonymous")]}, config("t2"))
    assert await memory.drain(timeout=10)
    expected = {("acme", "alice", "t1"), ("default", "conversation:t2", "t2")}
    for table in ("conversations", "messages", "round_metrics"):
        assert keys(database_url, table) == expected, table
    assert keys(database_url, "memory") == {("acme", "alice", "t1")}
    assert query(database_url, "SELECT conversation_id, tenant_id, user_id FROM conversation_owners ORDER BY 1") == [
        ("t1", "acme", "alice"),
        ("t2", "default", "conversation:t2"),
    ]
    # Reads by thread id act on its recorded owner.
    assert [r.end_sequence for r in await memory.conversations.get_memory_history("t1")] != []
    context = await memory.conversations.get_context_for_workflow("t1")
    assert context.gap_messages or context.memory_text


@pytest.mark.parametrize("sync", [False, True])
async def test_another_user_is_refused_and_sees_nothing(open_memory, database_url, sync):
    memory = await open_memory()
    chat = EchoChat()
    app = with_memory(chat.graph, memory)
    await app.ainvoke({"messages": [HumanMessage("my secret is 42")]}, config("t", user_id="alice"))
    before, calls = counts(database_url), len(chat.seen)
    for other in (config("t", user_id="mallory"), config("t", user_id="alice", tenant_id="other"), config("t")):
        with pytest.raises(ConversationOwnerError, match="belongs to another user or tenant"):
            if sync:
                app.invoke({"messages": [HumanMessage("what is the secret?")]}, other)
            else:
                await app.ainvoke({"messages": [HumanMessage("what is the secret?")]}, other)
    assert len(chat.seen) == calls  # the graph never ran: nobody was served alice's history
    assert counts(database_url) == before


async def test_a_round_without_a_user_is_told_so(open_memory):
    # The refusal named the thread's own scope ("user 'conversation:t'"), an internal name the caller never gave.
    memory = await open_memory()
    app = with_memory(EchoChat().graph, memory)
    await app.ainvoke({"messages": [HumanMessage("hi")]}, config("t", user_id="alice"))
    with pytest.raises(ConversationOwnerError) as refused:
        await app.ainvoke({"messages": [HumanMessage("hi")]}, config("t"))
    assert "conversation:" not in str(refused.value)
    assert "a round without a user_id (tenant 'default') cannot continue it" in str(refused.value)


async def test_middleware_rounds_are_keyed_and_guarded(open_memory, database_url):
    memory = await open_memory()
    agent = create_agent(ToolScriptModel(), [], middleware=[MemoryMiddleware(memory)])
    await agent.ainvoke({"messages": [HumanMessage("hello")]}, config("m", user_id="bob"))
    assert keys(database_url, "messages") == {("default", "bob", "m")}
    before = counts(database_url)
    with pytest.raises(ConversationOwnerError):
        await agent.ainvoke({"messages": [HumanMessage("hi")]}, config("m", user_id="eve"))
    with pytest.raises(ConversationOwnerError):
        agent.invoke({"messages": [HumanMessage("hi")]}, config("m", user_id="eve"))
    assert counts(database_url) == before
    await agent.ainvoke({"messages": [HumanMessage("again")]}, config("m", user_id="bob"))
    assert query(database_url, "SELECT count(*) FROM messages WHERE user_id = 'bob'") == [(4,)]


async def test_the_config_keys_are_settings(open_memory, database_url):
    memory = await open_memory(user_id_key="account", tenant_id_key="org")
    app = with_memory(EchoChat().graph, memory)
    await app.ainvoke(
        {"messages": [HumanMessage("hi")]},
        config("k", account="acct-7", org="org-1", user_id="ignored", tenant_id="ignored"),
    )
    assert keys(database_url, "messages") == {("org-1", "acct-7", "k")}


async def test_the_same_user_id_in_two_tenants_is_two_users(open_memory, database_url):
    memory = await open_memory()
    app = with_memory(EchoChat().graph, memory)
    await app.ainvoke({"messages": [HumanMessage("in a")]}, config("ta", user_id="u", tenant_id="a"))
    await app.ainvoke({"messages": [HumanMessage("in b")]}, config("tb", user_id="u", tenant_id="b"))
    assert keys(database_url, "messages") == {("a", "u", "ta"), ("b", "u", "tb")}
    context = await memory.conversations.get_context_for_workflow("tb")
    assert [m.text for m in context.gap_messages] == ["in b", "reply 2"]


@pytest.mark.parametrize(
    ("identity", "problem"),
    [
        ({"user_id": 7}, "user_id must be a non-empty string, got int"),
        ({"user_id": "a\x00b"}, "user_id contains a NUL"),
        ({"user_id": "é" * 300}, "user_id is 600 bytes"),
        ({"tenant_id": "t" * 600}, "tenant_id is 600 bytes"),
    ],
)
async def test_bad_identities_are_refused_naming_the_key(open_memory, database_url, identity, problem):
    memory = await open_memory()
    app = with_memory(EchoChat().graph, memory)
    with pytest.raises(InvalidInputError, match=problem):
        await app.ainvoke({"messages": [HumanMessage("hi")]}, config("bad", **identity))
    assert counts(database_url) == dict.fromkeys(TABLES, 0)
