"""A round in flight when its conversation is erased (delete_conversation, forget_user) stores nothing: forgetting
wins the race. The erasure runs between the round's start and its end, so each race is taken the same way every
time. A round that only outlived its lease, or one of a conversation nothing was stored of yet, still stores."""

from __future__ import annotations

import logging
import uuid
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph import START, MessagesState, StateGraph

from memory_agent import MemoryMiddleware, MemoryService, with_memory
from memory_agent.llm.offline import OfflineSummaryModel
from tests.conftest import execute, query
from tests.integration.agent_support import ToolScriptModel
from tests.long_term.test_forget import tables_holding

THREAD_TABLES = ("conversations", "messages", "memory", "round_metrics", "round_leases", "conversation_owners")


async def with_served_memory(
    memory: MemoryService, url: str, thread: str, canary: str, user: str | None = None
) -> None:
    """Rounds of `thread` (the canary in the first) until a completed memory version is served to the next."""
    for n in range(8):
        text = f"I'm allergic to {canary}." if n == 0 else f"round {n} of {thread}"
        _, info = await memory.conversations.prepare_round(thread, [HumanMessage(text)], user_id=user)
        await memory.conversations.finish_round(thread, [HumanMessage(text), AIMessage(f"noted {n}")], info)
        assert await memory.drain(timeout=10)
        if query(url, "SELECT 1 FROM memory WHERE conversation_id = %s AND status = 'completed'", [thread]):
            return
    raise AssertionError("no summary completed: the round would not be served a memory")


def thread_rows(url: str, thread: str) -> dict[str, int]:
    """The tables that still hold a row of `thread` (and how many)."""
    counts = {
        t: query(url, f"SELECT count(*) FROM {t} WHERE conversation_id = %s", [thread])[0][0] for t in THREAD_TABLES
    }
    return {table: n for table, n in counts.items() if n}


def assert_round_dropped(url: str, thread: str, served_memory_id: int, canaries: list[str]) -> None:
    assert thread_rows(url, thread) == {}
    assert query(url, "SELECT count(*) FROM round_metrics WHERE memory_id = %s", [served_memory_id]) == [(0,)]
    for canary in canaries:
        assert tables_holding(url, canary) == [], canary


async def erased_round(open_memory, database_url, caplog, erase) -> None:
    memory = await open_memory(model=OfflineSummaryModel())
    thread, user = "raced", "ana"
    secret, late = f"zq{uuid.uuid4().hex[:10]}secret", f"zq{uuid.uuid4().hex[:10]}late"
    await with_served_memory(memory, database_url, thread, secret, user)
    _, info = await memory.conversations.prepare_round(thread, [HumanMessage(f"what about {late}?")], user_id=user)
    assert info.memory_id is not None

    await erase(memory, thread, user)  # between the round's start and its end
    with caplog.at_level(logging.WARNING, logger="memory_agent"):
        saved, result = await memory.conversations.finish_round(
            thread, [HumanMessage(f"what about {late}?"), AIMessage(f"{late}, as your memory says")], info
        )
    assert saved is None and result.outcome == "conversation_erased"
    assert any("erased while the round ran" in r.getMessage() for r in caplog.records)
    assert_round_dropped(database_url, thread, info.memory_id, [secret, late])

    # The thread starts over cleanly: the next round is round 1 of a new conversation.
    _, info = await memory.conversations.prepare_round(thread, [HumanMessage("hello again")], user_id=user)
    assert info.memory_id is None
    saved, _ = await memory.conversations.finish_round(thread, [HumanMessage("hello again"), AIMessage("hi")], info)
    assert saved is not None and (saved.round_number, saved.first_sequence) == (1, 0)


async def test_round_ending_after_delete_conversation_stores_nothing(open_memory, database_url, caplog):
    async def erase(memory: MemoryService, thread: str, user: str) -> None:
        assert await memory.delete_conversation(thread, user_id=user) is True

    await erased_round(open_memory, database_url, caplog, erase)


async def test_round_ending_after_forget_user_stores_nothing(open_memory, database_url, caplog):
    async def erase(memory: MemoryService, thread: str, user: str) -> None:
        report = await memory.long_term.forget_user(user)
        assert thread in report.conversations_deleted

    await erased_round(open_memory, database_url, caplog, erase)


async def test_round_ending_after_its_thread_was_erased_and_made_again_stores_nothing(open_memory, database_url):
    """Between the round's start and end the thread is erased and a later round makes it anew: the late round is
    not stored into the new conversation."""
    memory = await open_memory(model=OfflineSummaryModel())
    secret = f"zq{uuid.uuid4().hex[:10]}secret"
    await with_served_memory(memory, database_url, "t", secret)
    _, late = await memory.conversations.prepare_round("t", [HumanMessage("late question")])
    assert await memory.delete_conversation("t") is True
    _, fresh = await memory.conversations.prepare_round("t", [HumanMessage("new start")])
    await memory.conversations.finish_round("t", [HumanMessage("new start"), AIMessage("welcome")], fresh)

    saved, result = await memory.conversations.finish_round(
        "t", [HumanMessage("late question"), AIMessage("late answer")], late
    )
    assert saved is None and result.outcome == "conversation_erased"
    assert query(database_url, "SELECT content FROM messages WHERE conversation_id = 't' ORDER BY 1") == [
        ("new start",),
        ("welcome",),
    ]
    assert query(database_url, "SELECT round_number, memory_id FROM round_metrics WHERE conversation_id = 't'") == [
        (1, None)
    ]
    assert tables_holding(database_url, secret) == []


async def test_round_that_outlived_its_lease_still_stores(open_memory, database_url):
    """Not an erasure: another round took the expired lease over and ended first; the late round is stored after."""
    memory = await open_memory(model=OfflineSummaryModel())
    first = [HumanMessage("one"), AIMessage("reply one")]
    _, info = await memory.conversations.prepare_round("t", first[:1])
    await memory.conversations.finish_round("t", first, info)
    _, slow = await memory.conversations.prepare_round("t", [HumanMessage("slow")])
    execute(database_url, "UPDATE round_leases SET expires_at = now() - interval '1 second'")
    _, quick = await memory.conversations.prepare_round("t", [HumanMessage("quick")])
    await memory.conversations.finish_round("t", [HumanMessage("quick"), AIMessage("reply quick")], quick)

    saved, result = await memory.conversations.finish_round("t", [HumanMessage("slow"), AIMessage("reply slow")], slow)
    assert saved is not None and result.outcome != "conversation_erased"
    assert [r[0] for r in query(database_url, "SELECT content FROM messages ORDER BY sequence_number")] == [
        "one",
        "reply one",
        "quick",
        "reply quick",
        "slow",
        "reply slow",
    ]


async def test_first_round_of_a_thread_deleted_before_anything_was_stored_stores(open_memory, database_url):
    """Nothing of the thread was stored when the round started, so nothing of it can have been erased."""
    memory = await open_memory(model=OfflineSummaryModel())
    _, info = await memory.conversations.prepare_round("new", [HumanMessage("first")])
    assert await memory.delete_conversation("new") is False
    saved, _ = await memory.conversations.finish_round("new", [HumanMessage("first"), AIMessage("hello")], info)
    assert saved is not None and saved.round_number == 1


def one_node(respond: Any) -> Any:
    """A compiled graph of one node, `respond`."""
    builder = StateGraph(MessagesState)
    builder.add_node("respond", respond)
    builder.add_edge(START, "respond")
    return builder.compile()


def deleting_graph(memory: MemoryService) -> Any:
    """A one-node graph whose model step deletes the thread it runs in before answering (a user deleting the
    conversation while the model thinks)."""

    async def respond(state: MessagesState, config: RunnableConfig) -> dict[str, Any]:
        assert await memory.delete_conversation(config["configurable"]["thread_id"]) is True
        return {"messages": [AIMessage("answer written after the delete")]}

    return one_node(respond)


async def test_with_memory_run_completes_when_the_thread_is_deleted_mid_run(open_memory, database_url, caplog):
    memory = await open_memory(model=OfflineSummaryModel())
    secret = f"zq{uuid.uuid4().hex[:10]}secret"
    await with_served_memory(memory, database_url, "g", secret)
    app = with_memory(deleting_graph(memory), memory)
    with caplog.at_level(logging.WARNING, logger="memory_agent"):
        result = await app.ainvoke({"messages": [HumanMessage("still there?")]}, {"configurable": {"thread_id": "g"}})
    assert result["messages"][-1].text == "answer written after the delete"
    assert any("erased while the round ran" in r.getMessage() for r in caplog.records)
    assert thread_rows(database_url, "g") == {}
    assert tables_holding(database_url, secret) == []


class DeletingModel(ToolScriptModel):
    """ToolScriptModel that deletes the thread before its first answer."""

    memory: Any = None

    async def _agenerate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        assert await self.memory.delete_conversation("m") is True
        return self._generate(messages, *args, **kwargs)


async def test_agent_middleware_run_completes_when_the_thread_is_deleted_mid_run(open_memory, database_url):
    memory = await open_memory(model=OfflineSummaryModel())
    secret = f"zq{uuid.uuid4().hex[:10]}secret"
    await with_served_memory(memory, database_url, "m", secret)
    agent = create_agent(DeletingModel(memory=memory), [], middleware=[MemoryMiddleware(memory)])
    result = await agent.ainvoke({"messages": [HumanMessage("still there?")]}, {"configurable": {"thread_id": "m"}})
    assert result["messages"][-1].text == "final answer without tools"
    assert thread_rows(database_url, "m") == {}
    assert tables_holding(database_url, secret) == []


async def test_failed_round_after_delete_conversation_records_no_metrics(open_memory, database_url):
    """A round that fails after its thread was deleted writes no metrics row (it would name the erased memory and
    hold the round's query)."""
    memory = await open_memory(model=OfflineSummaryModel())
    secret, late = f"zq{uuid.uuid4().hex[:10]}secret", f"zq{uuid.uuid4().hex[:10]}late"
    await with_served_memory(memory, database_url, "f", secret)
    _, info = await memory.conversations.prepare_round("f", [HumanMessage(f"what about {late}?")])
    assert info.memory_id is not None
    assert await memory.delete_conversation("f") is True
    await memory.conversations.record_failed_round(info, "graph", RuntimeError("the model gave up"))
    assert_round_dropped(database_url, "f", info.memory_id, [secret, late])


async def test_with_memory_run_failing_after_the_thread_is_deleted_records_nothing(open_memory, database_url):
    memory = await open_memory(model=OfflineSummaryModel())
    secret = f"zq{uuid.uuid4().hex[:10]}secret"
    await with_served_memory(memory, database_url, "x", secret)

    async def respond(state: MessagesState, config: RunnableConfig) -> dict[str, Any]:
        assert await memory.delete_conversation("x") is True
        raise RuntimeError("the model gave up")

    app = with_memory(one_node(respond), memory)
    with pytest.raises(RuntimeError, match="gave up"):
        await app.ainvoke({"messages": [HumanMessage("still there?")]}, {"configurable": {"thread_id": "x"}})
    assert thread_rows(database_url, "x") == {}
    assert tables_holding(database_url, secret) == []


async def test_failed_round_of_a_stored_thread_is_still_recorded(open_memory, database_url):
    memory = await open_memory(model=OfflineSummaryModel())
    _, info = await memory.conversations.prepare_round("k", [HumanMessage("one")])
    await memory.conversations.finish_round("k", [HumanMessage("one"), AIMessage("two")], info)
    _, info = await memory.conversations.prepare_round("k", [HumanMessage("three")])
    await memory.conversations.record_failed_round(info, "graph", RuntimeError("boom"))
    assert query(database_url, "SELECT round_number, error_stage FROM round_metrics ORDER BY id") == [
        (1, None),
        (None, "graph"),
    ]
