"""The round end: one transaction in one round trip, all or nothing, and the summary claim recorded by the
statement that makes it (its outcome in round_metrics is the outcome the round returns)."""

from __future__ import annotations

import asyncio
import os
import tempfile
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest
from langchain_core.messages import AIMessage, HumanMessage

from memory_agent.conversation.messages import serialize_round
from memory_agent.conversation.query_rows import StoredRound, TriggerRule, saved_round
from memory_agent.db.connector import rows_of
from memory_agent.schemas.keys import DEFAULT_TENANT_ID, ConversationKey, default_user_id
from tests.conftest import query
from tests.support import GatedSummaryModel

METRICS = (
    "SELECT summary_triggered, trigger_outcome, triggered_memory_id FROM round_metrics"
    " WHERE conversation_id = %s ORDER BY round_number"
)


async def one_round(memory, thread: str, n: int):
    user = HumanMessage(f"question {n}")
    _, info = await memory.conversations.prepare_round(thread, [user])
    return await memory.conversations.finish_round(thread, [user, AIMessage(f"answer {n}")], info)


def protocol(trace_path: str) -> list[str]:
    """The messages of a libpq trace as 'F Parse', 'B ReadyForQuery', ... in order."""
    with open(trace_path, encoding="utf-8") as trace:
        fields = [line.rstrip("\n").split("\t") for line in trace]
    return [f"{f[0]} {f[2].split(' ')[0]}" for f in fields if f[0] in ("F", "B") and len(f) > 2]


async def trace(memory, fd: int, on: bool) -> None:
    """libpq's trace of the (only) pooled connection into `fd`, on or off."""
    async with memory.backend.session() as conn:
        if on:
            conn.pgconn.trace(fd)
            conn.pgconn.set_trace_flags(psycopg.pq.Trace.SUPPRESS_TIMESTAMPS)
        else:
            conn.pgconn.untrace()


async def test_the_metrics_row_records_the_outcome_the_round_returns(open_memory, database_url):
    model = GatedSummaryModel()
    memory = await open_memory(model=model)
    outcomes = []
    for n in range(6):
        _, trigger = await one_round(memory, "recorded", n)
        outcomes.append((trigger.started, trigger.outcome, trigger.memory_id if trigger.started else None))
    # Rounds 1-2 are below the threshold; round 3 claims a summary; it stays gated, so 4-6 find it in flight.
    assert [outcome for _, outcome, _ in outcomes] == ["below_threshold"] * 2 + ["started"] + ["already_processing"] * 3
    assert query(database_url, METRICS, ["recorded"]) == outcomes
    claimed = outcomes[2][2]
    assert query(database_url, "SELECT status FROM memory WHERE memory_id = %s", [claimed]) == [("processing",)]
    model.release(10)
    assert await memory.drain(timeout=10)


async def test_a_claim_lost_to_another_process_is_recorded_as_already_processing(open_memory, database_url):
    """The trigger rule read no summary in flight, but another process claimed the slot before this round's
    statement claimed it: the unique index decides, and the round records what happened."""
    memory = await open_memory()
    for n in range(3):
        await one_round(memory, "lost", n)
    assert await memory.drain(timeout=10)  # round 3's summary is complete: the next round end finds one due
    user = HumanMessage("question 3")
    _, info = await memory.conversations.prepare_round("lost", [user])
    with psycopg.connect(database_url) as other:
        other.execute("SET search_path TO memory_agent, public")
        other.execute(
            "SELECT claim_summary(%s, %s, %s, 2, 7, NULL)", [DEFAULT_TENANT_ID, default_user_id("lost"), "lost"]
        )  # not committed yet: the round's claim waits on its index entry
        finishing = asyncio.ensure_future(
            memory.conversations.finish_round("lost", [user, AIMessage("answer 3")], info)
        )
        waiting: list[tuple[int]] = []
        for _ in range(250):
            waiting = query(
                database_url,
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE %s",
                ["%end_round(%"],
            )
            if waiting == [(1,)]:
                break
            await asyncio.sleep(0.02)
        assert waiting == [(1,)]
        other.commit()
        _, trigger = await finishing
    assert (trigger.outcome, trigger.memory_id) == ("already_processing", None)
    assert query(database_url, METRICS, ["lost"])[-1] == (False, "already_processing", None)
    assert query(
        database_url, "SELECT status, start_sequence FROM memory WHERE conversation_id = 'lost' ORDER BY memory_id"
    ) == [("completed", 0), ("processing", 2)]  # the other process's claim, and no second one


async def traced_round_end(memory: Any, thread: str) -> tuple[Any, list[str], int]:
    """Round 4 of `thread` ended under a protocol trace, the summary it starts (if any) drained: the trigger result,
    the traced messages, and where the round end's messages end (they come first: the connection is the round
    end's until it is answered). Asserts the round end is one round trip: end_round, then a Sync (psycopg follows a
    Sync with a Flush, which asks for nothing more): no Flush before it to read a reply."""
    user = HumanMessage("question 3")
    _, info = await memory.conversations.prepare_round(thread, [user])
    fd, path = tempfile.mkstemp(suffix=".trace")
    try:
        await memory.loop.arun(trace(memory, fd, True))
        _, trigger = await memory.conversations.finish_round(thread, [user, AIMessage("answer 3")], info)
        if trigger.started:  # its summary in the trace too
            assert await memory.drain(timeout=10)
        await memory.loop.arun(trace(memory, fd, False))
        messages = protocol(path)
    finally:
        os.close(fd)
        os.unlink(path)
    end = messages.index("B ReadyForQuery")
    sent = [m for m in messages[:end] if m.startswith("F ")]
    waits = [m for i, m in enumerate(sent) if m == "F Sync" or (m == "F Flush" and sent[i - 1] != "F Sync")]
    assert waits == ["F Sync"], messages[:end]
    return trigger, messages, end


async def test_a_round_end_is_one_round_trip(open_memory, database_url):
    memory = await open_memory(model=GatedSummaryModel(), pool_min_size=1, pool_max_size=1)
    for n in range(3):
        await one_round(memory, "trips", n)
    trigger, messages, end = await traced_round_end(memory, "trips")
    assert trigger.outcome == "already_processing"  # the summary claimed at round 3 is gated
    in_flight = "SELECT memory_id FROM memory WHERE conversation_id = 'trips' AND status = 'processing'"
    assert [(trigger.memory_id,)] == query(database_url, in_flight)
    assert messages[:end].count("B CommandComplete") == 1  # end_round alone: its own transaction
    # The metrics row written by end_round records the round and the rule's outcome.
    assert query(
        database_url,
        "SELECT round_number, first_sequence, last_sequence, trigger_outcome, latency_round_ms > 0 FROM round_metrics"
        " WHERE conversation_id = 'trips' ORDER BY round_number DESC LIMIT 1",
    ) == [(4, 6, 7, "already_processing", True)]


async def test_a_round_end_that_starts_a_summary_is_one_round_trip(open_memory, database_url):
    """The claim's id and what the summary reads come back with COMMIT's reply (nothing is enqueued in the
    transaction by the inline executor), and the claim picks the row up: the summary needs no pick-up statement."""
    memory = await open_memory(pool_min_size=1, pool_max_size=1)
    for n in range(3):
        await one_round(memory, "started", n)
    assert await memory.drain(timeout=10)  # round 3's summary is complete: round 4's end claims the next one
    trigger, messages, end = await traced_round_end(memory, "started")
    assert trigger.started
    # After the round end, the summary's one statement (complete_memory): no pick-up statement before it.
    assert messages[end:].count("B CommandComplete") == 1, messages[end:]
    row = query(
        database_url,
        "SELECT status, attempts, started_at = created_at FROM memory WHERE memory_id = %s",
        [trigger.memory_id],
    )
    assert row == [("completed", 1, True)]  # picked up in the claiming transaction (now() is its start)


@pytest.mark.parametrize("failure", ["python", "statement"])
async def test_a_failure_inside_the_round_transaction_leaves_nothing(open_memory, database_url, failure):
    memory = await open_memory(pool_min_size=1, pool_max_size=1)
    await one_round(memory, "atomic", 0)
    backend = memory.backend
    roles, contents, payloads = serialize_round([HumanMessage("kept out"), AIMessage("also kept out")])

    async def fail() -> None:
        async with backend.session(transaction=True, pipeline=True) as conn:
            key = ConversationKey.of("atomic")
            sent = await backend.conversations.end_round(
                conn,
                key,
                StoredRound(roles, contents, payloads),
                holder=None,
                now=datetime.now(UTC),
                rule=TriggerRule(window=14, summarize_after=5, min_new=1, timeout_s=300.0, pick_up=False),
            )
            saved = saved_round(key.conversation_id, (await rows_of(sent))[0])
            assert saved is not None and saved.first_sequence == 2  # stored, inside the transaction
            if failure == "python":
                raise RuntimeError("the caller failed after storing")
            await conn.execute("SELECT 1 / 0")

    expected = RuntimeError if failure == "python" else psycopg.errors.DivisionByZero
    with pytest.raises(expected):
        await memory.loop.arun(fail())
    assert query(database_url, "SELECT count(*) FROM messages WHERE conversation_id = 'atomic'") == [(2,)]
    assert query(database_url, "SELECT next_sequence FROM conversations WHERE conversation_id = 'atomic'") == [(2,)]
    # The connection went back to the pool outside any transaction and serves the next round.
    _, trigger = await one_round(memory, "atomic", 1)
    assert query(database_url, "SELECT count(*) FROM messages WHERE conversation_id = 'atomic'") == [(4,)]
    assert trigger.outcome == "below_threshold"


async def test_round_ends_leave_the_connection_as_it_was(open_memory):
    memory = await open_memory(pool_min_size=1, pool_max_size=1)
    for n in range(4):
        await one_round(memory, "settings", n)

    async def read() -> dict:
        async with memory.backend.session() as conn:
            cur = await conn.execute(
                "SELECT current_setting('plan_cache_mode') AS mode,"
                " current_setting('synchronous_commit') AS sync,"
                " (SELECT generic_plans + custom_plans FROM pg_prepared_statements"
                "  WHERE statement LIKE 'SELECT * FROM end_round(%') AS ends"
            )
            row = await cur.fetchone()
            assert row is not None
            return row

    assert await memory.loop.arun(read()) == {"mode": "auto", "sync": "on", "ends": 4}
