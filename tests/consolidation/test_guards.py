"""The tenant guards of scheduled consolidation, against the real PostgreSQL: the cooldown between runs, the
summary jobs per user+project and run, the concurrent-job slots across processes, and the monthly cost ceiling."""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
import textwrap
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest

from memory_agent import llm
from memory_agent.consolidation import ConsolidationRunner
from memory_agent.consolidation.guards import TenantBusy, claim_scheduler_run, tenant_slot
from memory_agent.errors import ConfigurationError, SummarizationError
from memory_agent.long_term import ItemOrigin, ItemScope, ledger, remember
from memory_agent.settings import MemorySettings, ModelPrice
from tests.conftest import query
from tests.consolidation.conftest import CountingModel, day, write_day
from tests.long_term.conftest import items


class FailingModel(CountingModel):
    async def _agenerate(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("the provider is down")


NOTES = "SELECT period, count(*) FROM consolidation_notes GROUP BY period ORDER BY period"


async def test_a_run_within_the_tenant_cooldown_does_nothing_for_it(conn, pool):
    model = CountingModel()
    runner = ConsolidationRunner(pool, model, MemorySettings(consolidation_enabled=True))  # the seed's 2 minutes
    await write_day(conn, "alice", 0)
    await write_day(conn, "carol", 0, tenant_id="other")
    first = await runner.run_due(day(1, 5))
    assert set(first) == {("nightly", "acme", "alice"), ("nightly", "other", "carol")}

    await write_day(conn, "bob", 0)  # a new user of acme, due at once
    later = day(1, 5) + timedelta(seconds=119)
    held = await runner.run_due(later)
    assert held == {("nightly", "acme", "bob"): f"cooldown: last run {day(1, 5).isoformat()}"}
    assert len(model.calls) == 2  # alice's and carol's dailies only

    ran = await runner.run_due(day(1, 5) + timedelta(seconds=120))
    assert ran == {("nightly", "acme", "bob"): "1 days: 1 daily, 0 weekly, 0 monthly, 0 compacted"}


async def test_the_cooldown_is_decided_by_the_database_when_schedulers_race(connect):
    connections = [await connect() for _ in range(6)]
    now = day(3, 5)
    claims = await asyncio.gather(*(claim_scheduler_run(c, "acme", now, 120) for c in connections))
    assert sum(claim is None for claim in claims) == 1  # one run goes on, five see its cooldown
    assert [claim for claim in claims if claim is not None] == [now] * 5
    assert await claim_scheduler_run(connections[0], "acme", now + timedelta(minutes=2), 120) is None
    # A zero cooldown lets every run through.
    assert await claim_scheduler_run(connections[0], "acme", now + timedelta(minutes=2), 0) is None


async def test_at_most_n_summary_jobs_per_user_and_run_the_rest_waits_for_the_next_run(conn, pool, database_url):
    model = CountingModel()
    config = MemorySettings(consolidation_enabled=True, max_summary_jobs_per_run=4, tenant_cooldown_s=0)
    runner = ConsolidationRunner(pool, model, config)
    for n in range(9):
        await write_day(conn, "alice", n)
    # After downtime June 10 has 9 dailies and the weekly of June 7 to write: 10 summary jobs.
    first = await runner.run_due(day(9, 5))
    assert first == {("nightly", "acme", "alice"): "4 days: 4 daily, 0 weekly, 0 monthly, 0 compacted, stopped: capped"}
    assert len(model.calls) == 4
    second = await runner.run_due(day(9, 6))  # still due: the capped run did not move next_run
    assert second == {
        ("nightly", "acme", "alice"): "3 days: 3 daily, 1 weekly, 0 monthly, 0 compacted, stopped: capped"
    }
    third = await runner.run_due(day(9, 7))
    assert third == {("nightly", "acme", "alice"): "2 days: 2 daily, 0 weekly, 0 monthly, 0 compacted"}
    assert query(database_url, NOTES) == [("daily", 9), ("weekly", 1)]
    assert len(model.calls) == 10  # each note once: the caps cost no extra call
    assert await runner.run_due(day(9, 8)) == {}


async def test_the_batch_summary_cap_counts_per_project(conn, pool, database_url):
    for project in ("alpha", "beta"):
        for n in range(6):
            await remember(
                conn,
                scope=ItemScope(tenant_id="acme", user_id="alice", project=project),
                source=ItemOrigin(conversation_id=None, memory_id=None),
                items=items(facts=[(f"{project}_{n}", f"Fact {n} of {project}")]),
                now=day(n),
            )
    config = MemorySettings(
        consolidation_enabled=False,
        batch_summaries_enabled=True,
        max_memories_per_batch=2,
        max_summary_jobs_per_run=2,
        tenant_cooldown_s=0,
    )
    runner = ConsolidationRunner(pool, CountingModel(), config)
    first = await runner.run_due(day(20))
    assert first == {("batch_summaries", "acme", "alice"): "4 batch summaries, 0 originals forgotten, stopped: capped"}
    per_project = "SELECT project, count(*) FROM batch_summaries GROUP BY project ORDER BY project"
    assert query(database_url, per_project) == [("alpha", 2), ("beta", 2)]
    assert await runner.run_due(day(20, 1)) == {
        ("batch_summaries", "acme", "alice"): "2 batch summaries, 0 originals forgotten"
    }
    assert query(database_url, per_project) == [("alpha", 3), ("beta", 3)]


async def test_at_most_three_jobs_of_a_tenant_run_at_once(pool):
    running = 0
    peak = 0
    busy: list[str] = []
    ran: list[int] = []

    async def job(n: int, tenant: str) -> None:
        nonlocal running, peak
        try:
            async with tenant_slot(pool, tenant, 3) as slot:
                running += 1
                peak = max(peak, running)
                ran.append(slot)
                await asyncio.sleep(0.3)
                running -= 1
        except TenantBusy as exc:
            busy.append(str(exc))

    await asyncio.gather(*(job(n, "acme") for n in range(7)))
    assert peak == 3
    assert sorted(ran) == [0, 1, 2]
    assert busy == ["all 3 concurrent-job slots of tenant 'acme' are taken"] * 4
    # The slots were given back, and another tenant's slots are its own.
    ran.clear()
    await asyncio.gather(job(0, "acme"), job(1, "other"))
    assert sorted(ran) == [0, 0]


HOLDER = textwrap.dedent(
    """
    import sys, time, psycopg
    conn = psycopg.connect(sys.argv[1], autocommit=True)
    for slot in range(int(sys.argv[2])):
        key = "\\x1f".join(["memory_agent.tenant_job_slot", "acme", str(slot)])
        assert conn.execute("SELECT pg_try_advisory_lock(hashtextextended(%s, 0))", [key]).fetchone()[0]
    print("held", flush=True)
    time.sleep(60)
    """
)


async def test_slots_are_shared_across_processes_and_freed_when_a_worker_dies(pool, database_url):
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, database_url, "3"], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(TenantBusy):
            async with tenant_slot(pool, "acme", 3):
                pass
        async with tenant_slot(pool, "acme", 4) as slot:  # a fourth slot is free
            assert slot == 3
    finally:
        holder.kill()
        holder.wait()
    for _ in range(50):  # the server notices the closed socket at once; give it a moment
        try:
            async with tenant_slot(pool, "acme", 3) as slot:
                assert slot in (0, 1, 2)  # one of the dead worker's slots
            break
        except TenantBusy:
            await asyncio.sleep(0.1)
    else:
        pytest.fail("the killed worker's slots were never freed")


async def test_a_job_without_a_free_slot_is_deferred_again_not_dropped(conn, pool, database_url):
    import procrastinate

    from memory_agent.consolidation.schedule import USER_TASK, register_tasks
    from memory_agent.db.backend import MemoryBackend

    await MemoryBackend(pool, "memory_agent").setup_procrastinate(apply=True)
    await write_day(conn, "alice", 0)
    config = MemorySettings(consolidation_enabled=True, max_concurrent_jobs_per_tenant=1, tenant_slot_retry_s=45)
    model = CountingModel()
    runner = ConsolidationRunner(pool, model, config)
    app = procrastinate.App(connector=procrastinate.PsycopgConnector())
    register_tasks(app, runner, queue="memory_agent")
    now = day(1, 5).isoformat()
    async with app.open_async(pool=pool):
        async with tenant_slot(pool, "acme", 1):  # another worker's job of acme holds the only slot
            outcome = await app.tasks[USER_TASK](job="nightly", tenant_id="acme", user_id="alice", now=now)
        assert outcome == "deferred: all 1 concurrent-job slots of tenant 'acme' are taken"
        assert model.calls == []
        jobs = query(
            database_url,
            "SELECT status, args->>'user_id', args->>'now', scheduled_at - now() > interval '30 seconds'"
            " FROM procrastinate_jobs",
        )
        assert jobs == [("todo", "alice", now, True)]
        # The slot free again, the job runs.
        outcome = await app.tasks[USER_TASK](job="nightly", tenant_id="acme", user_id="alice", now=now)
        assert outcome.startswith("1 days: 1 daily")


async def test_over_its_monthly_ceiling_a_tenant_is_not_consolidated(conn, pool, database_url, caplog):
    prices = {"offline-consolidator": ModelPrice(input=1000.0, output=1000.0)}
    config = MemorySettings(
        consolidation_enabled=True, monthly_cost_ceiling=5.0, llm_prices=prices, tenant_cooldown_s=0
    )
    model = CountingModel()
    runner = ConsolidationRunner(pool, model, config)
    for user, tenant in (("alice", "acme"), ("carol", "other")):
        await write_day(conn, user, 0, tenant_id=tenant)
    # acme spent 6.0 in June already; other spent nothing.
    await ledger.record_calls(
        conn,
        "acme",
        "alice",
        [llm.LLMCall("consolidation", "offline-consolidator", 3000, 3000)],
        now=day(0, 1),
        prices=prices,
    )
    assert await ledger.tenant_spend(conn, "acme", day(1)) == Decimal("6")
    with caplog.at_level(logging.WARNING, logger="memory_agent.consolidation"):
        done = await runner.run_due(day(1, 5))
    assert done[("nightly", "acme", "alice")] == (
        "over_budget: tenant 'acme' spent 6.0000 of its monthly cost ceiling 5.0"
    )
    assert done[("nightly", "other", "carol")].startswith("1 days: 1 daily")
    assert len(model.calls) == 1
    assert "tenant 'acme' spent 6.0000 of its monthly cost ceiling 5.0" in caplog.text
    # A job queued before the ceiling was crossed stops too.
    assert (await runner.run_user("nightly", "acme", "alice", day(1, 6))).startswith("over_budget")
    # Next calendar month: the tenant starts again from nothing.
    july = datetime(2026, 7, 1, 5, tzinfo=UTC)
    assert (await runner.run_due(july))[("nightly", "acme", "alice")].startswith("30 days: 1 daily")


async def test_the_ceiling_stops_a_run_between_two_model_calls(conn, pool):
    # Each daily note costs a tenth or more here: a ceiling of 0.25 stops the catch-up after a few of them.
    prices = {"offline-consolidator": ModelPrice(input=1000.0, output=0.0)}
    model = CountingModel()
    for n in range(6):
        await write_day(conn, "alice", n)
    runner = ConsolidationRunner(
        pool, model, MemorySettings(consolidation_enabled=True, monthly_cost_ceiling=0.25, llm_prices=prices)
    )
    done = await runner.run_due(day(6, 5))
    outcome = done[("nightly", "acme", "alice")]
    assert outcome.endswith("stopped: over_budget") and 1 <= len(model.calls) < 6
    assert await ledger.tenant_spend(conn, "acme", day(6)) >= Decimal("0.25")


async def test_the_ceiling_is_reserved_by_the_database_before_each_call(connect, database_url):
    connections = [await connect() for _ in range(12)]
    now = day(3, 5)
    # Twelve callers at once, each estimating 0.3 of a ceiling of 1.0: admitted one at a time while the calls
    # in flight stay below the ceiling (0, 0.3, 0.6, 0.9), whatever their timing: four, never more.
    held = await asyncio.gather(*(ledger.reserve(c, "acme", 1.0, Decimal("0.3"), now) for c in connections))
    admitted = [r for r in held if r is not None]
    assert len(admitted) == 4 and len({r.reservation_id for r in admitted}) == 4
    assert await ledger.reserve(connections[0], "other", 1.0, Decimal("0.3"), now) is not None  # its own month
    # A failed call gives its reservation back: the next caller is admitted, then none.
    for reservation in admitted[1:]:
        await ledger.release(connections[0], reservation)
    again = await ledger.reserve(connections[1], "acme", 1.0, Decimal("0.3"), now)
    assert again is not None
    # The call's actual cost settles the reservation, in one statement with its ledger rows.
    prices = {"m": ModelPrice(input=1_000_000.0, output=0.0)}
    await ledger.record_calls(
        connections[1],
        "acme",
        "alice",
        [llm.LLMCall("consolidation", "m", 1, 0)],
        now=now,
        prices=prices,
        reservation=again,
    )
    assert query(database_url, "SELECT tenant_id FROM budget_reservations ORDER BY 1") == [("acme",), ("other",)]
    assert await ledger.tenant_spend(connections[1], "acme", now) == Decimal("1")
    assert await ledger.reserve(connections[2], "acme", 1.0, Decimal("0.01"), now) is None  # spent: over
    # A reservation never settled (its process died) stops counting when it expires.
    assert await ledger.reserve(connections[2], "late", 1.0, Decimal("5"), now) is not None
    assert await ledger.reserve(connections[2], "late", 1.0, Decimal("5"), now) is None
    later = now + ledger.RESERVATION_TTL + timedelta(seconds=1)
    assert await ledger.reserve(connections[2], "late", 1.0, Decimal("5"), later) is not None
    # No ceiling: nothing is held.
    assert (await ledger.reserve(connections[3], "acme", None, Decimal("9"), now)).reservation_id is None


async def test_a_failed_model_call_releases_its_reservation(conn, pool, database_url):
    prices = {"offline-consolidator": ModelPrice(input=1000.0, output=1000.0)}
    await write_day(conn, "alice", 0)
    runner = ConsolidationRunner(
        pool, FailingModel(), MemorySettings(consolidation_enabled=True, monthly_cost_ceiling=5.0, llm_prices=prices)
    )
    with pytest.raises(SummarizationError):
        await runner.run_user("nightly", "acme", "alice", day(1, 5))
    assert query(database_url, "SELECT count(*) FROM budget_reservations") == [(0,)]
    assert await ledger.tenant_spend(conn, "acme", day(1)) == 0


@pytest.mark.parametrize(
    ("field", "value", "variable"),
    [
        ("tenant_cooldown_s", -1, "MEMORY_AGENT_TENANT_COOLDOWN_S"),
        ("max_summary_jobs_per_run", 0, "MEMORY_AGENT_MAX_SUMMARY_JOBS_PER_RUN"),
        ("max_concurrent_jobs_per_tenant", 0, "MEMORY_AGENT_MAX_CONCURRENT_JOBS_PER_TENANT"),
        ("monthly_cost_ceiling", -0.5, "MEMORY_AGENT_MONTHLY_COST_CEILING"),
        ("tenant_slot_retry_s", 0, "MEMORY_AGENT_TENANT_SLOT_RETRY_S"),
    ],
)
def test_a_bad_guard_setting_is_an_error_naming_its_variable(field, value, variable):
    with pytest.raises(ConfigurationError, match=variable):
        MemorySettings(**{field: value})
