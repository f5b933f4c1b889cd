"""`memory-agent demo --days 35` on the test database: the simulated month writes the expected notes and
prints them, and a second run (which forgets the first run's user) prints the same month again."""

from __future__ import annotations

from datetime import date

import psycopg
from typer.testing import CliRunner

from memory_agent.cli.demo import DEMO_TENANT
from memory_agent.cli.main import app
from tests.conftest import query


def demo(database_url: str, days: int):
    env = {"MEMORY_AGENT_DATABASE_URL": database_url, "COLUMNS": "200", "NO_COLOR": "1", "OPENAI_API_KEY": ""}
    return CliRunner().invoke(app, ["demo", "--days", str(days)], env=env)


def counts(url: str) -> dict[str, int]:
    return dict(query(url, "SELECT period, count(*) FROM consolidation_notes WHERE user_id = 'sam' GROUP BY 1"))


def test_a_simulated_month_ends_in_5_weekly_and_1_monthly_rollups(database_url):
    result = demo(database_url, 35)
    assert result.exit_code == 0, result.output
    # 14 days with a chat, each a daily note; nights meet 5 Sundays and one 1st; the last night (October 6)
    # compacts the dailies that began before September 6 (retain_days 30): the five of September 1 .. 5.
    assert counts(database_url) == {"daily": 14, "weekly": 5, "monthly": 1}
    compacted = query(
        database_url, "SELECT period_start FROM consolidation_notes WHERE compacted_at IS NOT NULL ORDER BY 1"
    )
    assert compacted == [(date(2025, 9, d),) for d in range(1, 6)]
    out = result.output
    assert "daily notes: 14, compacted: 5, weekly rollups: 5, monthly rollups: 1" in out
    assert "5 weekly rollups (kept forever)" in out and "1 monthly rollup (kept forever)" in out
    assert "Mon Sep 01 .. Tue Sep 30 (4 notes consolidated)" in out
    # The monthly keeps the latest value of what changed: Lisbon, not Porto.
    (monthly,) = query(database_url, "SELECT key_insights FROM consolidation_notes WHERE period = 'monthly'")[0]
    assert any("Lisbon" in insight for insight in monthly) and not any("Porto" in i for i in monthly)
    assert "the night of Oct 06 again: 0 days to cover" in out
    assert "weekly Sep 28: exists" in out and "notes unchanged: yes" in out

    before = query(database_url, "SELECT period, period_start, key_insights FROM consolidation_notes ORDER BY 1, 2")
    again = demo(database_url, 35)
    assert again.exit_code == 0, again.output
    assert "forgot the previous run's user" in again.output
    assert query(database_url, "SELECT period, period_start, key_insights FROM consolidation_notes ORDER BY 1, 2") == (
        before
    )


def test_the_month_keeps_to_the_demo_tenant_and_demo_clean_removes_it(database_url):
    assert demo(database_url, 8).exit_code == 0
    assert query(database_url, "SELECT DISTINCT tenant_id FROM consolidation_notes") == [(DEMO_TENANT,)]
    assert query(database_url, "SELECT DISTINCT tenant_id FROM conversation_owners") == [(DEMO_TENANT,)]
    env = {"MEMORY_AGENT_DATABASE_URL": database_url, "OPENAI_API_KEY": ""}
    cleaned = CliRunner().invoke(app, ["demo", "--clean"], env=env)
    assert cleaned.exit_code == 0, cleaned.output
    for table in ("consolidation_notes", "conversation_owners", "items"):
        assert query(database_url, f"SELECT count(*) FROM {table}") == [(0,)], table


def test_a_month_while_another_demo_runs_is_refused(database_url):
    with psycopg.connect(database_url, autocommit=True) as running:  # the lock a running demo holds
        assert running.execute("SELECT pg_try_advisory_lock(hashtextextended('memory_agent.demo', 0))").fetchone()
        refused = demo(database_url, 8)
    assert refused.exit_code == 2 and "another `memory-agent demo` is running" in refused.output, refused.output
    assert query(database_url, "SELECT count(*) FROM consolidation_notes") == [(0,)]


def test_a_month_an_earlier_version_ran_in_tenant_demo_is_run_again(database_url):
    # Earlier versions ran the month in a tenant named 'demo': its thread ids belonged to that owner, and every
    # later `demo --days` failed on the first day ("belongs to another user or tenant: use a new thread id").
    from langchain_core.messages import HumanMessage

    from memory_agent import MemoryService, MemorySettings, with_memory
    from memory_agent.llm import OfflineModel
    from tests.support import EchoChat

    with MemoryService(MemorySettings(database_url=database_url), model=OfflineModel()) as memory:
        app = with_memory(EchoChat().graph, memory)
        for thread, tenant in (("month-sam-2025-09-01", "demo"), ("month-sam-2025-09-02", "acme")):
            config = {"configurable": {"thread_id": thread, "user_id": "sam", "tenant_id": tenant}}
            app.invoke({"messages": [HumanMessage("My name is Sam.")]}, config)
    result = demo(database_url, 1)
    assert result.exit_code == 0, result.output
    owners = query(database_url, "SELECT conversation_id, tenant_id FROM conversation_owners ORDER BY 1")
    # The legacy owner's thread is the demo's again; a thread another tenant holds is not touched.
    assert owners == [("month-sam-2025-09-01", DEMO_TENANT), ("month-sam-2025-09-02", "acme")]
    assert query(database_url, "SELECT count(*) FROM messages WHERE tenant_id = 'demo'") == [(0,)]
