"""The weekly upgrade report: the view over synthetic round_metrics and llm_calls rows, one tenant crossing every
threshold of the evolution plan and one sitting exactly on each (not crossed: the seed says "more than"), and
`memory-agent report` printing it."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any

import psycopg
from typer.testing import CliRunner

from memory_agent.cli.main import app
from tests.conftest import query

ROUND = (
    "INSERT INTO round_metrics (tenant_id, user_id, conversation_id, round_number, created_at, retrieval_path,"
    " truncated, fts_hits, trgm_hits, used_fallback, recall_path, recall_truncated, latency_round_ms)"
    " VALUES (%s, 'u', %s, 1, %s, 'raw', %s, %s, 0, %s, %s, %s, %s)"
)
CALL = (
    "INSERT INTO llm_calls (tenant_id, user_id, purpose, model, input_tokens, output_tokens, cost, priced, created_at)"
    " VALUES (%s, 'u', %s, 'm', 10, 10, %s, true, %s)"
)


def rounds(
    tenant: str, at: datetime, *, low_fts: int, fallback: int, summaries_only: int, truncated: int, slow: list[float]
) -> list[tuple[Any, ...]]:
    """Ten recalled rounds (one conversation each): the first `low_fts` with 1 full-text hit (else 5), and so on;
    latencies from `slow` then 1000 ms. One truncation is the recall block's, the others the context budget's."""
    rows = []
    for n in range(10):
        latency = slow[n] if n < len(slow) else 1000.0
        path = "summaries_only" if n < summaries_only else "fts"
        rows.append(
            (
                tenant,
                f"{tenant}-{n}",
                at + timedelta(hours=n),
                0 < n < truncated,
                1 if n < low_fts else 5,
                n < fallback,
                path,
                n == 0 and truncated > 0,
                latency,
            )
        )
    return rows


def insert(url: str, monday: date) -> None:
    at = datetime.combine(monday, datetime.min.time(), tzinfo=UTC) + timedelta(hours=1)
    crossing = rounds("crossing", at, low_fts=4, fallback=6, summaries_only=3, truncated=5, slow=[10000.0])
    calm = rounds("calm", at, low_fts=3, fallback=5, summaries_only=2, truncated=4, slow=[3000.0] * 10)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SET search_path TO memory_agent, public")
        with conn.cursor() as cur:
            cur.executemany(ROUND, crossing + calm)
            # A round of the next week that did not recall: no query to count.
            cur.execute(ROUND, ("calm", "calm-next", at + timedelta(days=7), False, None, None, None, False, 500.0))
            cur.executemany(
                CALL,
                [
                    ("crossing", "consolidation", Decimal(2), at),
                    ("crossing", "cluster_summary", Decimal(1), at),
                    ("crossing", "app", Decimal(7), at),
                    ("calm", "conversation_summary", Decimal(1), at),
                    ("calm", "app", Decimal(3), at),
                ],
            )


VIEW = (
    "SELECT iso_week, tenant_id, rounds, queries, low_fts_share, low_fts_crossed, fallback_share, fallback_crossed,"
    " summaries_only_share, summaries_only_crossed, truncation_rate, truncation_crossed, p95_latency_ms,"
    " p95_latency_crossed, summary_cost, llm_spend, summary_cost_share, summary_cost_crossed, crossed"
    " FROM upgrade_report_weekly ORDER BY week_start, tenant_id"
)


def d(text: str) -> Decimal:
    return Decimal(text)


def test_the_view_sets_each_metric_beside_its_threshold(database_url):
    insert(database_url, date(2026, 6, 1))  # a Monday: ISO week 23
    calm, crossing, next_week = query(database_url, VIEW)
    assert crossing == (
        "2026-W23", "crossing", 10, 10,
        d("0.4000"), True, d("0.6000"), True, d("0.3000"), True, d("0.5000"), True,
        d("5950.0"), True, d("3"), d("10"), d("0.3000"), True, 6,
    )  # fmt: skip
    assert calm == (
        "2026-W23", "calm", 10, 10,
        d("0.3000"), False, d("0.5000"), False, d("0.2000"), False, d("0.4000"), False,
        d("3000.0"), False, d("1"), d("4"), d("0.2500"), False, 0,
    )  # fmt: skip
    # No recall, no spend: nothing known, nothing crossed.
    assert next_week == (
        "2026-W24", "calm", 1, 0, None, None, None, None, None, None, d("0.0000"), False,
        d("500.0"), False, None, None, None, None, 0,
    )  # fmt: skip
    thresholds = query(
        database_url,
        "SELECT DISTINCT low_fts_threshold, fallback_threshold, summaries_only_threshold, truncation_threshold,"
        " p95_latency_threshold_ms, summary_cost_threshold FROM upgrade_report_weekly",
    )
    assert thresholds == [(d("0.30"), d("0.50"), d("0.20"), d("0.40"), 3000, d("0.25"))]


def invoke(database_url: str, *args: str) -> Any:
    env = {"MEMORY_AGENT_DATABASE_URL": database_url, "COLUMNS": "250", "NO_COLOR": "1", "OPENAI_API_KEY": ""}
    return CliRunner().invoke(app, ["report", *args], env=env)


def test_memory_agent_report_prints_one_table_to_read_the_answer_off(database_url):
    today = datetime.now(UTC).date()
    last_monday = today - timedelta(days=today.weekday() + 7)
    insert(database_url, last_monday)
    week = last_monday.strftime("%G-W%V")

    shown = invoke(database_url, "--weeks", "4")
    assert shown.exit_code == 0, shown.output
    text = shown.stdout
    for header in ("FTS hits < 3", "(>30%)", "fallback", "(>50%)", "summaries-only", "(>20%)", "truncation",
                   "(>40%)", "p95 latency", "(>3 s)", "summary cost share", "(>25%)"):  # fmt: skip
        assert header in text
    crossing = next(line for line in text.splitlines() if "crossing" in line)
    assert week in crossing
    for cell in ("40.0% YES", "60.0% YES", "30.0% YES", "50.0% YES", "5.95 s YES"):
        assert cell in crossing
    calm = next(line for line in text.splitlines() if "calm" in line and week in line)
    for cell in ("30.0% no", "50.0% no", "20.0% no", "40.0% no", "3.00 s no", "25.0% no"):
        assert cell in calm
    assert "YES" not in calm
    assert f"crossing, {week}: 6 of 6 crossed, upgrade signals: FTS hits < 3, fallback" in text

    as_json = json.loads(invoke(database_url, "--weeks", "4", "--tenant", "crossing", "--json").stdout)
    assert [row["tenantId"] for row in as_json] == ["crossing"]
    (row,) = as_json
    assert row["week"] == week and row["crossed"] == 6 and row["rounds"] == 10
    assert row["metrics"]["summary_cost"] == {
        "label": "summary cost share",
        "value": 0.3,
        "threshold": 0.25,
        "crossed": True,
        "meaning": "need lower frequency/compression",
    }
    assert row["llmSpend"] == 10.0 and row["appCalls"] == 1

    # Only the current week: last week's rows are left out.
    current = invoke(database_url, "--weeks", "1", "--json")
    assert all(r["week"] != week for r in json.loads(current.stdout))
    assert invoke(database_url, "--weeks", "0").exit_code != 0
