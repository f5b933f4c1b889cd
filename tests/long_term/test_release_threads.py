"""The owner rows of erased threads (conversation_owners, keyed by thread id) are released after the erasure
commits, in transactions of their own (release_threads): an erasure that stopped between the two leaves an owner
row and nothing it could lead to, the thread stays its user's, and running the erasure again releases it. A thread
nothing was stored of (its first round failed) is forgotten too."""

from __future__ import annotations

import uuid

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from memory_agent.errors import ConversationOwnerError
from memory_agent.llm.offline import OfflineSummaryModel
from memory_agent.long_term import forget_user, release_threads, tenant_transaction
from memory_agent.schemas.keys import UserKey
from tests.conftest import query
from tests.long_term.test_forget import tables_holding

USER_TABLES = ("conversations", "messages", "memory", "round_metrics", "round_leases", "conversation_owners")


def rows_of(url: str, user: str) -> dict[str, int]:
    counts = {t: query(url, f"SELECT count(*) FROM {t} WHERE user_id = %s", [user])[0][0] for t in USER_TABLES}
    return {table: n for table, n in counts.items() if n}


async def one_round(memory, thread: str, text: str, user: str) -> None:
    _, info = await memory.conversations.prepare_round(thread, [HumanMessage(text)], user_id=user, tenant_id="acme")
    await memory.conversations.finish_round(thread, [HumanMessage(text), AIMessage("noted")], info)


async def test_forget_user_erases_a_thread_whose_first_round_failed(open_memory, database_url):
    """The first round of a thread failed: its metrics row (with the round's query) and the thread's owner row name
    the user, and no conversation row does. forget_user erases them too."""
    memory = await open_memory(model=OfflineSummaryModel())
    canary = f"zq{uuid.uuid4().hex[:10]}lost"
    _, info = await memory.conversations.prepare_round(
        "lost", [HumanMessage(f"I'm allergic to {canary}.")], user_id="ana", tenant_id="acme"
    )
    await memory.conversations.record_failed_round(info, "graph", RuntimeError("the model gave up"))
    await one_round(memory, "kept", "I live in Lisbon.", "ana")
    assert rows_of(database_url, "ana")["conversation_owners"] == 2

    report = await memory.long_term.forget_user("ana", tenant_id="acme")
    assert report.conversations_deleted == ("kept",)
    assert rows_of(database_url, "ana") == {}
    assert tables_holding(database_url, canary) == []


async def test_an_erasure_stopped_before_its_threads_were_released_is_finished_by_a_retry(open_memory, database_url):
    memory = await open_memory(model=OfflineSummaryModel())
    await one_round(memory, "t1", "I live in Lisbon.", "ana")
    await one_round(memory, "t2", "I like tea.", "ana")
    await one_round(memory, "b1", "I live in Porto.", "ben")
    # The erasure's transaction commits; the process stops before release_threads.
    async with memory.backend.session() as conn, tenant_transaction(conn, "acme"):
        await forget_user(conn, UserKey("acme", "ana"))
    assert rows_of(database_url, "ana") == {"conversation_owners": 2}
    assert tables_holding(database_url, "Lisbon") == []
    # The thread is still ana's: nobody else takes it, and nothing of ana's is read through it.
    with pytest.raises(ConversationOwnerError):
        await memory.conversations.prepare_round("t1", [HumanMessage("mine now?")], user_id="ben", tenant_id="acme")

    await memory.long_term.forget_user("ana", tenant_id="acme")  # run again: finds the owner rows by user
    assert rows_of(database_url, "ana") == {}
    await one_round(memory, "t1", "mine now.", "ben")
    assert query(database_url, "SELECT user_id FROM conversation_owners ORDER BY 1") == [("ben",), ("ben",)]


async def test_a_thread_used_again_since_the_erasure_stays_its_users(open_memory, database_url):
    """Rounds of the user that began after the erasure committed: one stored a new conversation of its thread, one
    is still running (it holds the lease of a thread it claimed). The release leaves both owner rows, so neither
    thread is taken from under its user."""
    memory = await open_memory(model=OfflineSummaryModel())
    await one_round(memory, "t1", "I live in Lisbon.", "ana")
    async with memory.backend.session() as conn, tenant_transaction(conn, "acme"):
        await forget_user(conn, UserKey("acme", "ana"))
    await one_round(memory, "t1", "I moved to Faro.", "ana")
    _, running = await memory.conversations.prepare_round("t2", [HumanMessage("Hi.")], user_id="ana", tenant_id="acme")
    assert await memory.loop.arun(release_threads(memory.backend.session, UserKey("acme", "ana"))) == ()
    await memory.conversations.finish_round("t2", [HumanMessage("Hi."), AIMessage("Hello.")], running)
    assert rows_of(database_url, "ana")["conversation_owners"] == 2
    assert await memory.delete_conversation("t1", user_id="ana", tenant_id="acme") is True
    assert query(database_url, "SELECT conversation_id FROM conversation_owners") == [("t2",)]
    await memory.long_term.forget_user("ana", tenant_id="acme")
    assert rows_of(database_url, "ana") == {}
