"""Forgetting with lineage: nothing derived from an erased source survives anywhere (the canary)."""

from __future__ import annotations

import uuid
from typing import Any, ClassVar

import psycopg
from langchain_core.messages import HumanMessage
from psycopg import sql

from memory_agent import with_memory
from memory_agent.llm.extract import Statement, extract_items
from memory_agent.llm.offline import OfflineSummaryModel
from memory_agent.long_term import (
    ClusterSummaries,
    ItemOrigin,
    ItemScope,
    forget_conversation,
    forget_item,
    forget_user,
    list_items,
    offline_cluster_summarizer,
    refresh_clusters,
    remember,
    touched_clusters,
)
from memory_agent.schemas.keys import UserKey
from tests.conftest import query
from tests.long_term.conftest import at, items
from tests.support import EchoChat

TEXT_TYPES = ("text", "character varying", "character", "json", "jsonb")


def tables_holding(url: str, needle: str) -> list[str]:
    """Every text, varchar, char, json and jsonb column (and text arrays) of every table and view in the
    schema, searched for `needle`: the columns that hold it, as table.column."""
    columns = query(
        url,
        "SELECT table_name, column_name FROM information_schema.columns"
        " WHERE table_schema = 'memory_agent'"
        " AND (data_type = ANY(%s) OR (data_type = 'ARRAY' AND udt_name IN ('_text', '_varchar', '_jsonb')))"
        " ORDER BY table_name, column_name",
        [list(TEXT_TYPES)],
    )
    assert len(columns) > 20  # the scan reaches the whole schema
    found = []
    for table, column in columns:
        statement = sql.SQL("SELECT count(*) FROM {} WHERE strpos({}::text, %s) > 0").format(
            sql.Identifier(table), sql.Identifier(column)
        )
        if query(url, statement.as_string(), [needle])[0][0]:
            found.append(f"{table}.{column}")
    return found


async def rounds(app, thread: str, texts: list[str], user: str = "ana", tenant: str = "default") -> None:
    for text in texts:
        config = {"configurable": {"thread_id": thread, "user_id": user, "tenant_id": tenant}}
        await app.ainvoke({"messages": [HumanMessage(text)]}, config)


async def items_of_conversation(url: str, thread: str):
    """What the summary job would hand remember(): the items of the newest completed memory version."""
    ((memory_id, start, end),) = query(
        url,
        "SELECT memory_id, start_sequence, end_sequence FROM memory WHERE conversation_id = %s"
        " AND status = 'completed' ORDER BY memory_id DESC LIMIT 1",
        [thread],
    )
    messages = query(
        url,
        "SELECT sequence_number, role, content FROM messages WHERE conversation_id = %s"
        " AND sequence_number BETWEEN %s AND %s ORDER BY sequence_number",
        [thread, start, end],
    )
    return memory_id, extract_items(Statement(*m) for m in messages)


async def test_canary_forget_conversation_leaves_no_trace_in_any_column(open_memory, database_url, conn):
    canary = f"zq{uuid.uuid4().hex[:10]}canary"
    memory = await open_memory(model=OfflineSummaryModel())
    app = with_memory(EchoChat().graph, memory)
    await rounds(
        app,
        "secret-thread",
        [
            f"I'm allergic to {canary}.",
            "I live in Lisbon.",
            "Nothing else today.",
            "Bye.",
        ],
    )
    await rounds(
        app,
        "other-thread",
        [
            "I'm allergic to peanuts. I'm allergic to shellfish.",
            "I'm allergic to penicillin.",
            "I live in Lisbon.",
        ],
    )
    assert await memory.drain(timeout=10)

    for thread, day in (("secret-thread", 1), ("other-thread", 2)):
        memory_id, found = await items_of_conversation(database_url, thread)
        outcomes = await remember(
            conn,
            scope=ItemScope(tenant_id="default", user_id="ana"),
            source=ItemOrigin(conversation_id=thread, memory_id=memory_id),
            items=found,
            now=at(day),
        )
        await refresh_clusters(
            conn, touched_clusters(outcomes), ClusterSummaries(offline_cluster_summarizer), now=at(day)
        )
    (summary,) = [i for i in await list_items(conn, UserKey("default", "ana")) if i.is_summary]
    assert canary in summary.content and len(summary.source_item_ids) == 4
    assert set(tables_holding(database_url, canary)) >= {
        "messages.content",
        "messages.message",
        "memory.memory_text",
        "items.content",
        "items.content_norm",
    }

    report = await forget_conversation(
        conn,
        UserKey("default", "ana"),
        "secret-thread",
        summaries=ClusterSummaries(offline_cluster_summarizer),
        now=at(3),
    )
    assert report.conversations_deleted == ("secret-thread",) and len(report.items_deleted) == 1
    assert report.summaries_refreshed == (summary.item_id,)
    assert tables_holding(database_url, canary) == []

    # What the user also said elsewhere stays, with that lineage only; the summary speaks of what is left.
    held = {i.content: i for i in await list_items(conn, UserKey("default", "ana"))}
    assert held["The user lives in Lisbon"].sources and all(
        s.conversation_id == "other-thread" for s in held["The user lives in Lisbon"].sources
    )
    assert held["The user is allergic to peanuts, penicillin and shellfish"].is_summary
    assert query(database_url, "SELECT count(*) FROM messages WHERE conversation_id = 'other-thread'") == [(6,)]


async def test_forget_without_a_summarizer_deletes_the_summaries_it_touched(conn, database_url):
    canary = f"zq{uuid.uuid4().hex[:10]}canary"
    for n, (thread, what) in enumerate((("c1", canary), ("c2", "peanuts"), ("c2", "shellfish"), ("c3", "latex"))):
        outcomes = await remember(
            conn,
            scope=ItemScope(tenant_id="t", user_id="ana"),
            source=ItemOrigin(conversation_id=thread, memory_id=n),
            now=at(n),
            items=items(
                facts=[
                    ("allergies", f"The user is allergic to {what}", {"single_valued": False, "source_sequences": [n]})
                ]
            ),
        )
        await refresh_clusters(
            conn, touched_clusters(outcomes), ClusterSummaries(offline_cluster_summarizer), now=at(n)
        )
    assert "items.content" in tables_holding(database_url, canary)
    report = await forget_conversation(conn, UserKey("t", "ana"), "c1")
    assert len(report.summaries_deleted) == 1 and report.conversations_deleted == ()
    assert tables_holding(database_url, canary) == []
    assert sorted(i.content for i in await list_items(conn, UserKey("t", "ana"))) == [
        "The user is allergic to latex",
        "The user is allergic to peanuts",
        "The user is allergic to shellfish",
    ]


async def remember_three_allergies(conn: Any) -> None:
    """Three allergies of ana (tenant t) remembered a day apart, each followed by its cluster's summary."""
    for n, what in enumerate(("peanuts", "shellfish", "penicillin")):
        outcomes = await remember(
            conn,
            scope=ItemScope(tenant_id="t", user_id="ana"),
            source=ItemOrigin(conversation_id="c1", memory_id=1),
            now=at(n),
            items=items(facts=[("allergies", f"The user is allergic to {what}", {"single_valued": False})]),
        )
        await refresh_clusters(
            conn, touched_clusters(outcomes), ClusterSummaries(offline_cluster_summarizer), now=at(n)
        )


async def test_forgetting_a_summary_forgets_what_it_stands_for(conn):
    await remember_three_allergies(conn)
    await remember(
        conn,
        scope=ItemScope(tenant_id="t", user_id="ana"),
        source=ItemOrigin(conversation_id="c1", memory_id=1),
        now=at(4),
        items=items(facts=[("home_city", "The user lives in Lisbon")]),
    )
    (summary,) = [i for i in await list_items(conn, UserKey("t", "ana")) if i.is_summary]
    report = await forget_item(conn, UserKey("t", "ana"), summary.item_id)
    assert report.summaries_deleted == (summary.item_id,) and len(report.items_deleted) == 3
    assert [i.content for i in await list_items(conn, UserKey("t", "ana"))] == ["The user lives in Lisbon"]
    assert (await forget_item(conn, UserKey("t", "ana"), 10**9)).items_deleted == ()


async def test_forget_user_erases_the_user_and_nobody_else(open_memory, database_url, conn):
    memory = await open_memory(model=OfflineSummaryModel())
    app = with_memory(EchoChat().graph, memory)
    await rounds(app, "ana-1", ["I live in Lisbon.", "Hi.", "Bye."], user="ana", tenant="t")
    await rounds(app, "bob-1", ["I live in Porto.", "Hi.", "Bye."], user="bob", tenant="t")
    assert await memory.drain(timeout=10)
    for user, thread in (("ana", "ana-1"), ("bob", "bob-1")):
        memory_id, found = await items_of_conversation(database_url, thread)
        await remember(
            conn,
            scope=ItemScope(tenant_id="t", user_id=user),
            source=ItemOrigin(conversation_id=thread, memory_id=memory_id),
            items=found,
            now=at(0),
        )
    # Same user id in another tenant: a different user.
    await remember(
        conn,
        scope=ItemScope(tenant_id="t2", user_id="ana"),
        source=ItemOrigin(conversation_id=None, memory_id=None),
        items=items(facts=[("home_city", "The user lives in Faro")]),
        now=at(0),
    )

    report = await forget_user(conn, UserKey("t", "ana"))
    assert report.conversations_deleted == ("ana-1",) and len(report.items_deleted) == 1
    assert tables_holding(database_url, "Lisbon") == []
    assert [i.content for i in await list_items(conn, UserKey("t", "bob"))] == ["The user lives in Porto"]
    assert [i.content for i in await list_items(conn, UserKey("t2", "ana"))] == ["The user lives in Faro"]
    assert query(database_url, "SELECT conversation_id FROM conversations") == [("bob-1",)]


async def test_a_forget_that_fails_midway_erases_nothing(conn, database_url):
    await remember_three_allergies(conn)
    before = query(database_url, "SELECT item_id, content FROM items ORDER BY item_id")

    class Crash(Exception):
        pass

    try:
        async with conn.transaction():  # the caller's transaction, which dies before it commits
            report = await forget_conversation(
                conn, UserKey("t", "ana"), "c1", summaries=ClusterSummaries(offline_cluster_summarizer)
            )
            assert len(report.items_deleted) == 3 and len(report.summaries_deleted) == 1
            raise Crash
    except Crash:
        pass
    assert query(database_url, "SELECT item_id, content FROM items ORDER BY item_id") == before
    assert query(database_url, "SELECT count(*) FROM item_sources") == [(3,)]


class CountingCursor(psycopg.AsyncCursor[Any]):
    """A cursor that notes every statement it runs (the connector runs each named statement through one)."""

    statements: ClassVar[list[str]] = []

    async def execute(self, query: Any, params: Any = None, **kwargs: Any) -> Any:
        CountingCursor.statements.append(query if isinstance(query, str) else repr(query))
        return await super().execute(query, params, **kwargs)


async def test_forget_user_runs_the_same_statements_however_many_conversations(open_memory, conn):
    memory = await open_memory(model=OfflineSummaryModel())
    app = with_memory(EchoChat().graph, memory)
    for thread in ("one-1", "many-1", "many-2", "many-3", "many-4", "many-5"):
        await rounds(app, thread, ["I live in Lisbon."], user=thread.split("-")[0], tenant="t")
    assert await memory.drain(timeout=10)
    conn.cursor_factory = CountingCursor
    counts = {}
    for user in ("one", "many"):
        CountingCursor.statements = []
        report = await forget_user(conn, UserKey("t", user))
        counts[user] = len(CountingCursor.statements)
        assert len(report.conversations_deleted) == (1 if user == "one" else 5)
    # One set of statements for the user, not two more for each of their conversations.
    assert counts["many"] == counts["one"], counts
