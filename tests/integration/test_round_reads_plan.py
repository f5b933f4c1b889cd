"""The round's reads of a conversation's latest messages (the gap at round start, the window's round starts at round
end) go through the primary key on the generic plans begin_round and end_round keep, even while one conversation is
most of the messages table (a new deployment): no sequential scan of the table, which grew every round with it."""

from __future__ import annotations

import psycopg
from langchain_core.messages import HumanMessage

from memory_agent import with_memory
from tests.support import EchoChat

ROUNDS = 150  # 300 messages: a sequential scan is the cheaper generic plan for a range open above


def run(conn: psycopg.Connection, sql: str, mode: str) -> tuple[list[tuple], int]:
    """`sql`'s rows on plans of `mode` (plan_cache_mode), and the sequential scans of `messages` it made."""
    with conn.transaction():
        conn.execute(f"SET LOCAL plan_cache_mode = {mode}")
        rows = conn.execute(sql).fetchall()
        row = conn.execute("SELECT seq_scan FROM pg_stat_xact_user_tables WHERE relname = 'messages'").fetchone()
        return rows, row[0] if row else 0


async def test_round_reads_use_the_primary_key_when_one_conversation_is_the_table(open_memory, database_url):
    memory = await open_memory()
    app = with_memory(EchoChat().graph, memory)
    config = {"configurable": {"thread_id": "big"}}
    for n in range(ROUNDS):
        await app.ainvoke({"messages": [HumanMessage(f"message {n}")]}, config)
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("SET search_path TO memory_agent, public")
        conn.execute("ANALYZE messages")  # the statistics: this conversation is the whole table
        last = 2 * ROUNDS - 1
        trigger = f"SELECT * FROM trigger_state('conversation:big', 'big', {last}, 14)"
        context = "SELECT * FROM round_context('conversation:big', 'big', ARRAY['none'], 28)"
        for sql in (trigger, context):
            generic, scans = run(conn, sql, "force_generic_plan")
            assert scans == 0
            assert generic == run(conn, sql, "force_custom_plan")[0]  # the same rows as a plan made for the values
        starts = run(conn, trigger, "force_generic_plan")[0][0][4]
        assert starts == list(range(last - 13 + (last - 13) % 2, last + 1, 2))  # the window's round starts
