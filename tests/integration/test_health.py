"""Memory health (sql/queries/health.sql) on generated data, against values computed here from the stored rows.

The data is the benchmark's generator (benchmarks/scale_data.sql) at a small size, plus rows it does not
make: a processing row quiet for an hour (stuck), failed summaries with and without a model, a round that
failed before it was stored. Every expected value is computed in Python from plain SELECTs of the tables,
never from a view or query under test, so a wrong aggregate, a wrong tie-break or a wrong join fails.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Any

import psycopg
from psycopg.rows import dict_row

from memory_agent import resources
from memory_agent.observability import queries as observability_queries
from memory_agent.observability import reads as obs
from memory_agent.testing import generate_conversations
from tests.integration.test_observability import execute, percentile_cont, read

CONVERSATIONS = 61  # an average lag of 5.57: a rounding to one place would show
ROUNDS = 6


def rounded(value: float | int | None, places: int) -> Decimal | None:
    """PostgreSQL's round(numeric, places): half away from zero."""
    if value is None:
        return None
    return Decimal(str(value)).quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP)


def ratio(numerator: int, denominator: int, places: int = 4) -> Decimal | None:
    if denominator == 0:
        return None
    return (Decimal(numerator) / Decimal(denominator)).quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP)


def rows(url: str, statement: str, params: Any = None) -> list[dict[str, Any]]:
    with psycopg.connect(url, row_factory=dict_row) as conn:
        conn.execute("SET search_path TO memory_agent, public")
        return conn.execute(statement, params).fetchall()


def stage(url: str) -> None:
    """The generated data, plus the situations the generator does not make."""
    generate_conversations(url, CONVERSATIONS, ROUNDS)
    # A failed summary no model answered (reclaimed): the NULL model group. Conversation 11 has k = 1 + 11 % 4
    # = 4 versions capped at (6 - 1) / 2 = 2, ending at sequence 7; this one covers up to 11.
    execute(
        url,
        "INSERT INTO memory (tenant_id, user_id, conversation_id, memory_text, start_sequence, end_sequence,"
        " base_memory_id, status, error, attempts, created_at) VALUES ('default', 'user-2', 'conv-0000011', '', 0,"
        " 11, 82, 'failed', 'reclaimed', 2,"
        " now() - interval '1 day')",
    )
    # A round that failed before it was stored: a metrics row without a round number, raw path.
    execute(
        url,
        "INSERT INTO round_metrics (tenant_id, user_id, conversation_id, round_number, retrieval_path,"
        " context_tokens, truncated, error_stage, error)"
        " VALUES ('default', 'user-1', 'conv-0000005', NULL, 'raw', 300, true, 'graph', 'boom')",
    )
    # Structured items on some completed versions: non-empty lists, empty lists (not counted), dropped-only.
    execute(
        url,
        "UPDATE memory SET items = CASE memory_id % 3"
        """ WHEN 0 THEN '{"facts": [{"key": "home_city", "content": "The user lives in Lyon"}], "todos": []}'::jsonb"""
        """ WHEN 1 THEN '{"facts": [], "preferences": [], "dropped": ["facts[0]: key empty"]}'::jsonb"""
        """ ELSE '{"todos": [{"key": "todo_call", "content": "Call mom"}]}'::jsonb END"""
        " WHERE status = 'completed' AND memory_id % 5 <> 0",
    )
    # The generator's stuck row (conversation 7) is quiet for an hour; conversation 57's was picked up
    # 2 seconds ago. Make 57's quiet for 10 minutes: stuck after 300 s, not after 900 s.
    execute(
        url,
        "UPDATE memory SET started_at = now() - interval '10 minutes' WHERE conversation_id = 'conv-0000057'"
        " AND status = 'processing'",
    )


def has_items(items: dict[str, Any] | None) -> bool:
    """A version with at least one structured item in its five lists (`dropped` is not an item)."""
    lists = ("facts", "preferences", "decisions", "todos", "entities")
    return bool(items) and any(items.get(name) for name in lists)  # type: ignore[union-attr]


def expected_health(
    url: str, stuck_after_s: float
) -> tuple[dict[str, Any], list[dict[str, Any]], dict[Any, dict[str, Any]]]:
    """(totals, every conversation most lagging first, per-model stats) computed from the rows."""
    conversations = rows(
        url, "SELECT conversation_id, next_sequence, round_count, updated_at, user_id, tenant_id FROM conversations"
    )
    messages = {
        (r["conversation_id"], r["sequence_number"]): r["round_number"]
        for r in rows(url, "SELECT conversation_id, sequence_number, round_number FROM messages")
    }
    memory = rows(url, "SELECT * FROM memory")
    metrics = rows(url, "SELECT retrieval_path, truncated, context_tokens FROM round_metrics")
    now = rows(url, "SELECT now() AS now")[0]["now"]
    stuck_cutoff = now - dt.timedelta(seconds=stuck_after_s)

    def is_stuck(m: dict[str, Any]) -> bool:
        return m["status"] == "processing" and (m["started_at"] or m["created_at"]) < stuck_cutoff

    by_conversation: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for m in memory:
        by_conversation[m["conversation_id"]].append(m)

    health = []
    for c in conversations:
        mine = by_conversation[c["conversation_id"]]
        completed = [m for m in mine if m["status"] == "completed"]
        failed = [m for m in mine if m["status"] == "failed"]
        served = max(completed, key=lambda m: (m["end_sequence"], m["memory_id"]), default=None)
        served_end = served["end_sequence"] if served else -1
        served_round = messages.get((c["conversation_id"], served_end), 0) if served else 0
        input_tokens = sum(m["input_tokens"] or 0 for m in completed)
        output_tokens = sum(m["output_tokens"] or 0 for m in completed)
        health.append(
            {
                "conversation_id": c["conversation_id"],
                "rounds": c["round_count"],
                "newest_sequence": c["next_sequence"] - 1,
                "served_memory_id": served["memory_id"] if served else None,
                "served_end_sequence": served["end_sequence"] if served else None,
                "summary_lag": c["next_sequence"] - 1 - served_end,
                "rounds_behind": c["round_count"] - served_round,
                "served_memory_age": (now - (served["finished_at"] or served["created_at"])) if served else None,
                "completed": len(completed),
                "failed": len(failed),
                "processing": sum(m["status"] == "processing" for m in mine),
                "failure_rate": ratio(len(failed), len(completed) + len(failed)),
                "input_tokens": input_tokens,
                "output_tokens": output_tokens,
                "compression_ratio": ratio(input_tokens, output_tokens),
                "stuck": sum(is_stuck(m) for m in mine),
                "last_round_at": c["updated_at"],
                "user_id": c["user_id"],
                "tenant_id": c["tenant_id"],
            }
        )
    health.sort(key=lambda h: (-h["summary_lag"], h["conversation_id"]))

    completed = [m for m in memory if m["status"] == "completed"]
    failed = [m for m in memory if m["status"] == "failed"]
    times = [m["generation_time_ms"] for m in completed if m["generation_time_ms"] is not None]
    input_tokens = sum(m["input_tokens"] or 0 for m in completed)
    output_tokens = sum(m["output_tokens"] or 0 for m in completed)
    context_tokens = sum(r["context_tokens"] or 0 for r in metrics)
    lags = [h["summary_lag"] for h in health]
    totals = {
        "conversations": len(conversations),
        "rounds": len(metrics),
        "completed": len(completed),
        "failed": len(failed),
        "processing": sum(m["status"] == "processing" for m in memory),
        "failure_rate": ratio(len(failed), len(completed) + len(failed)),
        "max_summary_lag": max(lags),
        "avg_summary_lag": ratio(sum(lags), len(lags), 2),
        "fallback_share": ratio(sum(r["retrieval_path"] == "raw" for r in metrics), len(metrics)),
        "truncation_share": ratio(sum(r["truncated"] for r in metrics), len(metrics)),
        "generation_p50_ms": percentile_cont(times, 0.5),
        "generation_p95_ms": percentile_cont(times, 0.95),
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "compression_ratio": ratio(input_tokens, output_tokens),
        "context_tokens": context_tokens,
        "summary_token_share": ratio(input_tokens + output_tokens, input_tokens + output_tokens + context_tokens),
        "stuck": sum(is_stuck(m) for m in memory),
        "structured_rate": ratio(sum(has_items(m["items"]) for m in completed), len(completed)),
    }

    models: dict[Any, dict[str, Any]] = {}
    per_model: dict[Any, list[dict[str, Any]]] = defaultdict(list)
    for m in memory:
        if m["status"] != "processing":
            per_model[m["model_name"]].append(m)
    for name, mine in per_model.items():
        done = [m for m in mine if m["status"] == "completed"]
        done_times = [m["generation_time_ms"] for m in done if m["generation_time_ms"] is not None]
        spent_in = sum(m["input_tokens"] or 0 for m in done)
        spent_out = sum(m["output_tokens"] or 0 for m in done)
        models[name] = {
            "model_name": name,
            "summaries": len(mine),
            "completed": len(done),
            "failed": sum(m["status"] == "failed" for m in mine),
            "failure_rate": ratio(sum(m["status"] == "failed" for m in mine), len(mine)),
            "generation_p50_ms": percentile_cont(done_times, 0.5) if done_times else None,
            "generation_p95_ms": percentile_cont(done_times, 0.95) if done_times else None,
            "avg_attempts": ratio(sum(m["attempts"] for m in mine), len(mine), 2),
            "input_tokens": spent_in,
            "output_tokens": spent_out,
            "compression_ratio": ratio(spent_in, spent_out) if done else None,
        }
    return totals, health, models


def assert_close(actual: Any, expected: Any, key: str) -> None:
    if isinstance(expected, float) or isinstance(actual, float):
        assert actual is not None and abs(actual - expected) < 1e-9, (key, actual, expected)
    elif isinstance(expected, dt.timedelta):
        # now() of the test's read and of the query under test differ by the time between them
        assert actual is not None and abs((actual - expected).total_seconds()) < 30, (key, actual, expected)
    else:
        assert actual == expected, (key, actual, expected)


async def test_health_equals_values_computed_from_the_rows(open_memory, database_url):
    stage(database_url)
    memory = await open_memory()
    for stuck_after_s, limit in ((300.0, 7), (900.0, 1), (300.0, CONVERSATIONS + 5)):
        health = await read(memory, obs.health, stuck_after_s, limit)
        totals, conversations, models = expected_health(database_url, stuck_after_s)

        assert list(health.totals) == list(totals)  # same columns, same order as memory_health_totals
        for key, value in totals.items():
            assert_close(health.totals[key], value, key)

        assert [c["conversation_id"] for c in health.conversations] == [
            c["conversation_id"] for c in conversations[:limit]
        ]
        for actual, expected in zip(health.conversations, conversations):
            assert list(actual) == list(expected)
            for key, value in expected.items():
                assert_close(actual[key], value, f"{expected['conversation_id']}.{key}")

        assert [m["model_name"] for m in health.models] == sorted(
            models, key=lambda name: (-models[name]["summaries"], name is None, name or "")
        )
        for actual in health.models:
            expected = models[actual["model_name"]]
            assert list(actual) == list(expected)
            for key, value in expected.items():
                assert_close(actual[key], value, f"{actual['model_name']}.{key}")

        assert [r["memory_id"] for r in health.stuck] == [
            r["memory_id"]
            for r in rows(
                database_url,
                "SELECT memory_id FROM memory WHERE status = 'processing' AND COALESCE(started_at, created_at)"
                " < now() - make_interval(secs => %s) ORDER BY created_at",
                [stuck_after_s],
            )
        ]

    # The situations the data was built to hold are there: stuck rows (one only after 300 s), failed
    # summaries with and without a model, raw fallbacks, a failed round.
    assert totals["stuck"] == 2 and totals["failed"] > 0 and None in models
    assert 0 < totals["structured_rate"] < 1
    assert totals["fallback_share"] > 0 and any(c["served_memory_id"] is None for c in conversations)
    health_900 = await read(memory, obs.health, 900.0, CONVERSATIONS)
    assert health_900.totals["stuck"] == 1


async def test_health_agrees_with_the_0003_views(open_memory, database_url):
    # The views are what a psql reader queries; with their 5 minutes as the timeout both must say the same.
    stage(database_url)
    memory = await open_memory()
    health = await read(memory, obs.health, 300.0, CONVERSATIONS)
    view_totals = rows(database_url, "SELECT * FROM memory_health_totals")[0]
    assert health.totals == view_totals
    view_rows = rows(database_url, "SELECT * FROM memory_health ORDER BY summary_lag DESC, conversation_id")
    for row in (*view_rows, *health.conversations):
        row.pop("served_memory_age")  # now() differs between the two statements
    assert health.conversations == view_rows
    view_models = rows(database_url, "SELECT * FROM summary_model_stats ORDER BY summaries DESC, model_name")
    assert health.models == view_models


async def test_inspect_counts_stuck_rows_after_the_configured_timeout(open_memory, database_url):
    # Conversation 57's processing row has been quiet for 10 minutes (stage). A psql reader's views use the
    # design's 5 minutes; `inspect` (observe_conversation, on memory_agent's connections) uses the service's
    # processing_timeout_s, the reclaimer's: with 900 s the row is not stuck yet, as the sweep would not reclaim it.
    stage(database_url)
    stuck_57 = "SELECT stuck FROM memory_health WHERE conversation_id = 'conv-0000057'"
    assert rows(database_url, stuck_57) == [{"stuck": 1}]
    assert rows(database_url, "SELECT count(*) AS n FROM stuck_processing WHERE conversation_id = 'conv-0000057'") == [
        {"n": 1}
    ]
    for timeout_s, stuck in ((900, 0), (300, 1)):
        memory = await open_memory(processing_timeout_s=timeout_s)
        row = await read(memory, obs.conversation, "conv-0000057")
        assert row["stuck"] == stuck, timeout_s
        await memory.aclose()


async def test_health_of_an_empty_database_and_a_bad_limit(open_memory):
    memory = await open_memory()
    health = await read(memory, obs.health, 300.0, 5)
    assert health.conversations == [] and health.models == [] and health.stuck == []
    assert (health.totals["conversations"], health.totals["rounds"], health.totals["stuck"]) == (0, 0, 0)
    assert health.totals["max_summary_lag"] is None and health.totals["failure_rate"] is None
    try:
        await read(memory, obs.health, 300.0, 0)
    except obs.InvalidInputError as exc:
        assert "limit" in str(exc)
    else:
        raise AssertionError("limit 0 must be refused")


async def test_every_health_query_is_run_by_the_module():
    text = (resources.queries_dir() / "health.sql").read_text(encoding="utf-8")
    source = Path(observability_queries.__file__).read_text(encoding="utf-8")
    for name in resources.parse_queries(text):
        assert f'"{name}"' in source, name
