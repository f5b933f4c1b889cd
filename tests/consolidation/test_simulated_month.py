"""Must-have 7: a 35-day run under a manual clock, every tick at 05:00 UTC, jobs run inline.

alice writes items every day of June 1 .. July 5, bob on June 1 .. 10 only. The runs of June 2 .. July 6 meet
5 Sundays (June 7, 14, 21, 28, July 5) and one 1st (July 1); with retain_days 30 the last run compacts the
dailies of June 1 .. 5.
"""

from __future__ import annotations

from datetime import date

from memory_agent.consolidation import ConsolidationRunner, ManualClock, search_key_insights
from memory_agent.settings import MemorySettings
from tests.conftest import execute, query
from tests.consolidation.conftest import CountingModel, day, write_day

NOTES = "SELECT * FROM consolidation_notes ORDER BY note_id"


def counts(url: str, user: str) -> dict[str, int]:
    rows = query(url, "SELECT period, count(*) FROM consolidation_notes WHERE user_id = %s GROUP BY period", [user])
    return dict(rows)


async def simulate(conn, pool, days: int = 35):
    model = CountingModel()
    runner = ConsolidationRunner(pool, model, MemorySettings(consolidation_enabled=True))
    clock = ManualClock(day(0, 5))
    for n in range(days):
        clock.set(day(n, 12))
        await write_day(conn, "alice", n)
        if n < 10:
            await write_day(conn, "bob", n)
        clock.set(day(n + 1, 5))
        await runner.run_due(clock())
    return runner, model, clock


async def test_a_simulated_month_writes_exactly_the_expected_notes(conn, pool, database_url):
    runner, model, clock = await simulate(conn, pool)

    assert counts(database_url, "alice") == {"daily": 35, "weekly": 5, "monthly": 1}
    assert counts(database_url, "bob") == {"daily": 10, "weekly": 2, "monthly": 1}
    compacted = query(
        database_url,
        "SELECT user_id, period_start FROM consolidation_notes WHERE compacted_at IS NOT NULL ORDER BY 1, 2",
    )
    first_five = [date(2026, 6, d) for d in range(1, 6)]
    assert compacted == [("alice", d) for d in first_five] + [("bob", d) for d in first_five]
    # A compacted daily keeps the consolidated text only; a recent one still has its raw material.
    (old,) = query(
        database_url,
        "SELECT content, consolidated FROM consolidation_notes WHERE user_id = 'alice'"
        " AND period = 'daily' AND period_start = '2026-06-01'",
    )
    assert old[0] == old[1]

    weeks = query(
        database_url,
        "SELECT period_start, period_end, notes_consolidated FROM consolidation_notes"
        " WHERE user_id = 'alice' AND period = 'weekly' ORDER BY period_start",
    )
    assert weeks == [
        (date(2026, 5, 31), date(2026, 6, 6), 6),
        (date(2026, 6, 7), date(2026, 6, 13), 7),
        (date(2026, 6, 14), date(2026, 6, 20), 7),
        (date(2026, 6, 21), date(2026, 6, 27), 7),
        (date(2026, 6, 28), date(2026, 7, 4), 7),
    ]
    assert query(
        database_url,
        "SELECT period_start, period_end, notes_consolidated FROM consolidation_notes"
        " WHERE user_id = 'alice' AND period = 'monthly'",
    ) == [(date(2026, 6, 1), date(2026, 6, 30), 4)]  # the weeklies that ended in June

    # One model call per note written, never per item: 35 + 5 + 1 for alice, 10 + 2 + 1 for bob.
    assert len(model.calls) == 54

    # Contradictions keep the most recent value: the week of June 7-13 holds one mood, June 13's (day 12).
    (insights,) = query(
        database_url,
        "SELECT insights FROM consolidation_notes WHERE user_id = 'alice' AND period = 'weekly'"
        " AND period_start = '2026-06-07'",
    )[0]
    moods = [i["text"] for i in insights if "mood" in i["text"]]
    assert moods == ["fact mood: The user felt busy on day 12"]
    # Every distinct fact kept: the week's 7 decisions.
    assert sum(1 for i in insights if i["text"].startswith("decision ")) == 7
    # Below 0.5 (people mentioned, scored 0.3): in the dailies, not in the rollups.
    daily_low = query(
        database_url,
        "SELECT count(*) FROM consolidation_notes, jsonb_array_elements(insights) AS i"
        " WHERE period = 'daily' AND (i->>'importance')::real < 0.5",
    )
    rollup_low = query(
        database_url,
        "SELECT count(*) FROM consolidation_notes, jsonb_array_elements(insights) AS i"
        " WHERE period <> 'daily' AND (i->>'importance')::real < 0.5",
    )
    assert daily_low[0][0] == 45 and rollup_low[0][0] == 0
    # Key insights: the top ones (at most 5), searchable by keyword.
    (monthly_keys,) = query(
        database_url, "SELECT key_insights FROM consolidation_notes WHERE user_id = 'alice' AND period = 'monthly'"
    )[0]
    assert len(monthly_keys) == 5 and all(k.startswith("decision ") for k in monthly_keys)
    found = await search_key_insights(conn, "acme", "alice", "ship step 29")
    # Day 29 is June 30: its daily and the week of June 28 hold it; June's monthly kept only its top 5.
    assert [(row["period"], row["period_start"]) for row in found] == [
        ("daily", date(2026, 6, 30)),
        ("weekly", date(2026, 6, 28)),
    ]
    assert await search_key_insights(conn, "acme", "bob", "ship step 29") == []

    # The schedule state: covered through July 5, next run July 7 05:00.
    assert query(
        database_url,
        "SELECT covered_until, next_run FROM consolidation_schedules WHERE user_id = 'alice' AND job = 'nightly'",
    ) == [(date(2026, 7, 5), day(36, 5))]


async def test_re_running_any_day_changes_nothing(conn, pool, database_url):
    runner, model, clock = await simulate(conn, pool)
    before = query(database_url, NOTES)
    calls = len(model.calls)

    # The same tick again: nobody is due.
    assert await runner.run_due(clock()) == {}
    # A job retried for every past day (the schedule forgotten): every note exists, no model call, no write.
    # Without the tenant cooldown, which would otherwise hold back runs at times before the last one.
    runner = ConsolidationRunner(pool, model, MemorySettings(consolidation_enabled=True, tenant_cooldown_s=0))
    execute(database_url, "UPDATE consolidation_schedules SET covered_until = NULL, next_run = %s", [day(0)])
    for n in range(1, 36):
        await runner.run_due(day(n, 5))
    await runner.run_due(clock())
    assert query(database_url, NOTES) == before
    assert len(model.calls) == calls


async def test_a_run_after_downtime_catches_up(conn, pool, database_url):
    model = CountingModel()
    runner = ConsolidationRunner(pool, model, MemorySettings(consolidation_enabled=True))
    for n in range(9):
        await write_day(conn, "alice", n)
    # No tick ran June 2 .. 9: the one of June 10 covers June 1 .. 9 and the Sunday rollup of June 7.
    done = await runner.run_due(day(9, 5))
    assert done == {("nightly", "acme", "alice"): "9 days: 9 daily, 1 weekly, 0 monthly, 0 compacted"}
    assert counts(database_url, "alice") == {"daily": 9, "weekly": 1}
    assert query(database_url, "SELECT covered_until FROM consolidation_schedules") == [(date(2026, 6, 9),)]
