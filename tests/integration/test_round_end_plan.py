"""A round end looks for copies of its messages only among those stored since the round started (the primary key's
range), whatever the statistics say. Without statistics (a new table, before its first ANALYZE) the planner's
estimates of the indexes that lead with (user_id, conversation_id) tie; the probe then took the round index and read
every message of the conversation for each message of the round: a round end that grew with the conversation."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from memory_agent import with_memory
from memory_agent.conversation.messages import serialize_round
from memory_agent.conversation.query_rows import StoredRound, TriggerRule, saved_round
from memory_agent.db.connector import rows_of
from memory_agent.schemas.keys import ConversationKey
from tests.conftest import execute, query
from tests.support import EchoChat

ROUNDS = 150  # 300 messages in the conversation


class RolledBack(Exception):
    """Raised to leave the measured round end uncommitted."""


async def test_a_round_end_reads_only_what_was_stored_since_it_started(open_memory, database_url):
    execute(database_url, "ALTER TABLE messages SET (autovacuum_enabled = false)")
    memory = await open_memory(analyze_interval_s=0)  # no ANALYZE: the table as a new deployment has it
    app = with_memory(EchoChat().graph, memory)
    for n in range(ROUNDS):
        await app.ainvoke({"messages": [HumanMessage(f"turn {n}")]}, {"configurable": {"thread_id": "long"}})
    assert await memory.drain(timeout=10)
    execute(database_url, "SELECT pg_clear_relation_stats('memory_agent', 'messages')")
    assert query(database_url, "SELECT reltuples FROM pg_class WHERE oid = 'messages'::regclass") == [(-1.0,)]
    last = 2 * ROUNDS - 1
    roles, contents, payloads = serialize_round([HumanMessage("one more", id="in"), AIMessage("reply", id="out")])
    read: list[int] = []

    async def index_entries_read(conn) -> int:
        """Entries of messages' indexes this backend read, not flushed to the statistics yet (a difference of two
        readings is what happened between them)."""
        cur = await conn.execute(
            "SELECT sum(pg_stat_get_xact_tuples_returned(i.indexrelid))::bigint AS read FROM pg_index AS i"
            " WHERE i.indrelid = 'messages'::regclass"
        )
        row = await cur.fetchone()
        assert row is not None
        return int(row["read"])

    async def round_end() -> None:
        async with memory.backend.session(transaction=True) as conn:
            before = await index_entries_read(conn)
            sent = await memory.backend.conversations.end_round(
                conn,
                ConversationKey.of("long"),
                StoredRound(roles, contents, payloads, after=last),
                holder=None,
                now=datetime.now(UTC),
                rule=TriggerRule(window=14, summarize_after=10_000, min_new=1, timeout_s=300.0, pick_up=False),
            )
            saved = saved_round("long", (await rows_of(sent))[0])
            assert saved is not None and saved.first_sequence == last + 1  # both stored
            read.append(await index_entries_read(conn) - before)
            raise RolledBack

    with pytest.raises(RolledBack):
        await memory.loop.arun(round_end())
    # Nothing of the conversation's 300 messages (the old probe read them all, once per message of the round).
    assert read and read[0] < 10, read


async def test_a_round_stored_twice_is_stored_once_and_a_repeated_reply_is_stored_again(open_memory, database_url):
    memory = await open_memory()
    roles, contents, payloads = serialize_round([HumanMessage("hello", id="h1"), AIMessage("hi", id="a1")])
    rule = TriggerRule(window=14, summarize_after=10_000, min_new=1, timeout_s=300.0, pick_up=False)

    async def end(stored: StoredRound) -> int:
        async with memory.backend.session(transaction=True, pipeline=True) as conn:
            sent = await memory.backend.conversations.end_round(
                conn, ConversationKey.of("twice"), stored, holder=None, now=datetime.now(UTC), rule=rule
            )
            saved = saved_round("twice", (await rows_of(sent))[0])
            return 0 if saved is None else len(saved.stored_positions)

    assert await memory.loop.arun(end(StoredRound(roles, contents, payloads, after=-1))) == 2
    # The same round again, started before the first one stored (a retry): nothing new.
    assert await memory.loop.arun(end(StoredRound(roles, contents, payloads, after=-1))) == 0
    # Without its start (no `after`), looked for in the whole conversation: nothing new either.
    assert await memory.loop.arun(end(StoredRound(roles, contents, payloads))) == 0
    # A round that started after they were stored: the same ids and texts are new messages (a repeated reply).
    assert await memory.loop.arun(end(StoredRound(roles, contents, payloads, after=1))) == 2
    assert query(database_url, "SELECT count(*) FROM messages WHERE conversation_id = 'twice'") == [(4,)]
