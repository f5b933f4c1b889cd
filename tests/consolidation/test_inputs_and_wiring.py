"""Conversation memories as daily material; the executor's procrastinate app carrying the schedules; settings
and clock errors that name the problem."""

from __future__ import annotations

from datetime import datetime

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from memory_agent.consolidation import (
    ConsolidationRunner,
    ManualClock,
    latest_period,
    run_nightly,
)
from memory_agent.consolidation.periods import cron_for, next_tick
from memory_agent.consolidation.run import ConsolidationRun
from memory_agent.consolidation.schedule import TICK_TASK, USER_TASK
from memory_agent.db.schema import SchemaManager
from memory_agent.errors import ConfigurationError, InvalidInputError
from memory_agent.jobs.base import SummaryJobs
from memory_agent.jobs.procrastinate_executor import build_app
from memory_agent.service._wiring import worker_options
from memory_agent.settings import MemorySettings
from tests.conftest import execute, query
from tests.consolidation.conftest import CountingModel, day


async def test_a_days_conversation_memory_is_daily_material(open_memory, conn, database_url):
    memory = await open_memory()
    for n in range(4):
        await memory.conversations.finish_round(
            "trip", [HumanMessage(f"Planning the Lisbon trip, part {n}"), AIMessage("noted")], user_id="alice"
        )
    assert await memory.drain(timeout=10)
    completed = query(database_url, "SELECT count(*) FROM memory WHERE status = 'completed'")[0][0]
    assert completed >= 1
    # The memory versions were written on the real clock: date them into the simulated day.
    execute(database_url, "UPDATE memory SET finished_at = %s", [day(0, 10)])
    model = CountingModel()
    report = await run_nightly(
        conn, "default", "alice", day(1, 5), run=ConsolidationRun(model, MemorySettings(consolidation_enabled=True))
    )
    assert report.written("daily") == 1 and len(model.calls) == 1
    ((content, consolidated),) = query(database_url, "SELECT content, notes_consolidated FROM consolidation_notes")
    # Only the latest version of the conversation: it already carries the earlier ones.
    ((latest,),) = query(
        database_url, "SELECT memory_text FROM memory WHERE status = 'completed' ORDER BY end_sequence DESC LIMIT 1"
    )
    assert consolidated == 1 and content == "- " + " ".join(latest.split())
    assert "Lisbon trip, part 2" in content


def test_the_executor_app_schedules_the_tick_at_schedule_time():
    async def run_summary(memory_id: int, user_id: str, started=None) -> str:
        return "completed"

    async def sweep() -> list[int]:
        return []

    jobs = SummaryJobs(run_summary, sweep)
    enabled = MemorySettings(consolidation_enabled=True, schedule_time="04:30", executor="procrastinate")
    app = build_app(jobs, worker_options(enabled), pool=object())
    assert {TICK_TASK, USER_TASK} <= set(app.tasks)
    crons = {task.periodic_id: task.cron for task in app.periodic_registry.periodic_tasks.values()}
    assert crons[TICK_TASK] == "30 4 * * *"
    assert TICK_TASK not in build_app(jobs, worker_options(MemorySettings()), pool=object()).tasks  # off by default


def test_settings_and_inputs_are_checked():
    with pytest.raises(ConfigurationError, match="MEMORY_AGENT_SCHEDULE_TIME"):
        MemorySettings(schedule_time="25:00")
    with pytest.raises(ConfigurationError, match="MEMORY_AGENT_MAX_MEMORIES_PER_BATCH"):
        MemorySettings(max_memories_per_batch=0)
    with pytest.raises(ConfigurationError, match="MEMORY_AGENT_BATCH_SUMMARIES_SCHEDULE"):
        MemorySettings(batch_summaries_schedule="hourly")
    with pytest.raises(InvalidInputError, match="MEMORY_AGENT_SCHEDULE_TIME"):
        cron_for("5 o'clock")
    with pytest.raises(InvalidInputError, match="timezone-aware"):
        ManualClock(datetime(2026, 6, 1))
    with pytest.raises(InvalidInputError, match="period must be one of"):
        latest_period("yearly", day(0))
    assert next_tick(day(3, 23), "05:00") == day(4, 5)


async def test_bad_identity_writes_nothing(conn, pool, database_url):
    with pytest.raises(InvalidInputError, match="user_id"):
        await run_nightly(
            conn, "acme", "", day(1), run=ConsolidationRun(CountingModel(), MemorySettings(consolidation_enabled=True))
        )
    with pytest.raises(InvalidInputError, match="timezone-aware"):
        await ConsolidationRunner(pool, CountingModel(), MemorySettings(consolidation_enabled=True)).run_due(
            datetime(2026, 6, 2)
        )
    assert query(database_url, "SELECT count(*) FROM consolidation_schedules") == [(0,)]


async def test_the_tick_defers_one_waiting_job_per_user(conn, pool, database_url):
    import procrastinate

    from memory_agent.consolidation.schedule import defer_due, register_tasks
    from memory_agent.service.backend import MemoryBackend
    from tests.consolidation.conftest import write_day

    await SchemaManager(MemoryBackend(pool, "memory_agent")).migrate_procrastinate(apply=True)
    for user in ("alice", "bob"):
        await write_day(conn, user, 0)
    runner = ConsolidationRunner(pool, CountingModel(), MemorySettings(consolidation_enabled=True))
    app = procrastinate.App(connector=procrastinate.PsycopgConnector())
    register_tasks(app, runner, queue="memory_agent")
    async with app.open_async(pool=pool):
        assert await defer_due(app, runner, day(1, 5)) == 2
        assert await defer_due(app, runner, day(1, 5)) == 0  # both still waiting: the queueing lock holds
    jobs = query(
        database_url,
        "SELECT args->>'user_id', args->>'now', queueing_lock FROM procrastinate_jobs ORDER BY 1",
    )
    assert [(user, now) for user, now, _ in jobs] == [("alice", day(1, 5).isoformat()), ("bob", day(1, 5).isoformat())]
    assert jobs[0][2] == "memory_agent.consolidation:nightly:acme:alice"


class FailingModel(CountingModel):
    async def _agenerate(self, messages, *args, **kwargs):
        raise RuntimeError("provider down")


async def test_a_failed_model_call_leaves_the_user_due(conn, pool, database_url):
    from memory_agent.errors import SummarizationError
    from tests.consolidation.conftest import write_day

    for n in range(3):
        await write_day(conn, "alice", n)
    failing = ConsolidationRunner(pool, FailingModel(), MemorySettings(consolidation_enabled=True))
    with pytest.raises(SummarizationError, match="provider down"):
        await failing.run_due(day(3, 5))
    assert query(database_url, "SELECT count(*) FROM consolidation_notes") == [(0,)]
    # Nothing covered, still due: the next tick writes the three days.
    working = ConsolidationRunner(pool, CountingModel(), MemorySettings(consolidation_enabled=True))
    assert await working.run_due(day(3, 6)) == {
        ("nightly", "acme", "alice"): "3 days: 3 daily, 0 weekly, 0 monthly, 0 compacted"
    }
