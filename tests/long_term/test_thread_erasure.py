"""A call by thread id that names the tenant and no user (what docs/concepts/privacy.md tells a role bound by the
policies to do) acts on the thread's owner in that tenant: delete_conversation erases the thread's messages, memory
versions, metrics and items; another tenant's thread of the same call is neither found nor erased."""

from __future__ import annotations

import uuid

from memory_agent import with_memory
from memory_agent.llm.offline import OfflineSummaryModel
from memory_agent.long_term.embedders import HashingEmbeddings
from tests.conftest import query
from tests.long_term.test_forget import rounds, tables_holding
from tests.support import EchoChat

THREAD_ROWS = (
    "SELECT (SELECT count(*) FROM messages WHERE conversation_id = %(t)s),"
    " (SELECT count(*) FROM memory WHERE conversation_id = %(t)s),"
    " (SELECT count(*) FROM round_metrics WHERE conversation_id = %(t)s),"
    " (SELECT count(*) FROM conversation_owners WHERE conversation_id = %(t)s)"
)


def thread_rows(url: str, thread: str) -> tuple[int, ...]:
    return tuple(query(url, THREAD_ROWS, {"t": thread})[0])


def items_holding(url: str, canary: str) -> int:
    return query(url, "SELECT count(*) FROM items WHERE strpos(content, %s) > 0", [canary])[0][0]


async def say(memory, thread: str, user: str | None, tenant: str, canary: str) -> None:
    """Three rounds of the thread (no user: the thread is its own scope), their summary job finished."""
    app = with_memory(EchoChat().graph, memory)
    texts = [f"I'm allergic to {canary}.", f"My code word is {canary}.", "Bye."]
    await rounds(app, thread, texts, user=user, tenant=tenant)
    assert await memory.drain(timeout=10)


async def test_delete_conversation_naming_the_tenant_erases_its_owner_s_thread_and_no_other_tenant_s(
    open_memory, database_url
):
    ours, theirs = (f"zq{uuid.uuid4().hex[:10]}canary" for _ in range(2))
    memory = await open_memory(model=OfflineSummaryModel())
    await say(memory, "acme-thread", "ana", "acme", ours)
    await say(memory, "globex-thread", "bob", "globex", theirs)
    assert items_holding(database_url, ours) > 0 and items_holding(database_url, theirs) > 0
    assert all(count > 0 for count in thread_rows(database_url, "acme-thread"))
    before = thread_rows(database_url, "globex-thread")

    # Another tenant's thread: not found in acme, nothing erased.
    assert not await memory.delete_conversation("globex-thread", tenant_id="acme")
    assert thread_rows(database_url, "globex-thread") == before
    assert await memory.conversations.get_memory_history("globex-thread", tenant_id="acme") == []

    # The tenant's own thread, named without its user: found through its owner, erased with everything from it.
    assert await memory.conversations.get_memory_history("acme-thread", tenant_id="acme") != []
    assert await memory.delete_conversation("acme-thread", tenant_id="acme")
    assert thread_rows(database_url, "acme-thread") == (0, 0, 0, 0)
    assert tables_holding(database_url, ours) == []
    assert not await memory.delete_conversation("acme-thread", tenant_id="acme")

    # The other tenant's thread is whole, and its owner's tenant erases it the same way.
    assert thread_rows(database_url, "globex-thread") == before and items_holding(database_url, theirs) > 0
    assert await memory.delete_conversation("globex-thread", tenant_id="globex")
    assert thread_rows(database_url, "globex-thread") == (0, 0, 0, 0) and items_holding(database_url, theirs) == 0


async def test_a_bound_role_naming_the_tenant_deletes_a_thread_by_its_id(open_memory, app_role, database_url):
    canary = f"zq{uuid.uuid4().hex[:10]}canary"
    memory = await open_memory(
        model=OfflineSummaryModel(), embedder=HashingEmbeddings(), database_url=app_role, auto_migrate=False
    )
    await say(memory, "acme-thread", "ana", "acme", canary)
    await say(memory, "anonymous-thread", None, "acme", canary)  # a thread without a user: its own scope
    # The summary jobs embedded the turns as that role (each write locks its row, under the tenant's policies).
    assert query(database_url, "SELECT count(*) FROM message_embeddings WHERE tenant_id = 'acme'")[0][0] >= 6
    assert await memory.delete_conversation("acme-thread", tenant_id="acme")
    assert await memory.delete_conversation("anonymous-thread", tenant_id="acme")
    assert thread_rows(database_url, "acme-thread") == thread_rows(database_url, "anonymous-thread") == (0, 0, 0, 0)
    assert tables_holding(database_url, canary) == []
    assert query(database_url, "SELECT count(*) FROM message_embeddings") == [(0,)]
