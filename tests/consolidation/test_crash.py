"""A procrastinate worker SIGKILLed in the middle of a weekly rollup: after a restart there is no duplicate
and no gap. The tick runs in the worker as in production: it finds the due user in the database and defers
their job; the restarted worker's tick (a tick re-deferred, as the next cron time would) catches up."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from datetime import date, timedelta
from pathlib import Path

import pytest

from memory_agent.consolidation.schedule import TICK_TASK
from memory_agent.db.schema import SchemaManager
from memory_agent.service.backend import MemoryBackend
from tests.conftest import query
from tests.consolidation.conftest import day, write_day
from tests.reliability.test_stale_rows import wait_for

ROOT = Path(__file__).resolve().parents[2]
NOTES = "SELECT note_id, period, period_start, content, insights, created_at FROM consolidation_notes ORDER BY 1"


def start_worker(database_url: str, block: str, marker: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.consolidation.worker_process", database_url, block, str(marker)],
        cwd=ROOT,
        env=dict(os.environ),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


async def defer_tick(database_url: str, when) -> None:
    import procrastinate

    pool = MemoryBackend.create_pool(database_url, "memory_agent")
    await pool.open(wait=True)
    try:
        await SchemaManager(MemoryBackend(pool, "memory_agent")).migrate_procrastinate(apply=True)
        app = procrastinate.App(connector=procrastinate.PsycopgConnector())
        async with app.open_async(pool=pool):
            await app.configure_task(TICK_TASK, queue="memory_agent").defer_async(timestamp=int(when.timestamp()))
    finally:
        await pool.close()


@pytest.mark.slow
async def test_worker_killed_mid_rollup_leaves_no_duplicate_and_no_gap(conn, database_url, tmp_path):
    for n in range(6):  # June 1 .. 6
        await write_day(conn, "alice", n)
    # The Sunday tick (June 7, 05:00) after a week without one: dailies of June 1 .. 6, then the weekly.
    await defer_tick(database_url, day(6, 5))
    marker = tmp_path / "blocked"
    worker = start_worker(database_url, "weekly", marker)
    try:
        await wait_for(marker.exists, 60, "the worker to reach the weekly rollup")
        worker.send_signal(signal.SIGKILL)
        worker.wait(timeout=10)
    finally:
        if worker.poll() is None:
            worker.kill()
    assert worker.returncode == -signal.SIGKILL
    assert marker.read_text() == "Period: weekly 2026-05-31..2026-06-06"
    before = query(database_url, NOTES)
    assert [(period, start) for _, period, start, *_ in before] == [("daily", date(2026, 6, d)) for d in range(1, 7)]
    # The killed day is not covered: the next run redoes it.
    assert query(database_url, "SELECT covered_until FROM consolidation_schedules") == [(date(2026, 6, 5),)]
    assert query(
        database_url, "SELECT status FROM procrastinate_jobs WHERE task_name = %s", ["memory_agent.consolidation.user"]
    ) == [("doing",)]

    # The restarted worker's tick comes past the tenant's 2-minute cooldown, as the next cron time would.
    await defer_tick(database_url, day(6, 5) + timedelta(minutes=3))
    second = start_worker(database_url, "", marker)
    assert second.wait(timeout=120) == 0, second.stderr.read().decode()[-2000:]

    after = query(database_url, NOTES)
    assert after[:6] == before  # the dailies written before the kill, untouched
    assert [(period, start) for _, period, start, *_ in after] == [
        *[("daily", date(2026, 6, d)) for d in range(1, 7)],
        ("weekly", date(2026, 5, 31)),
    ]
    assert query(database_url, "SELECT covered_until FROM consolidation_schedules") == [(date(2026, 6, 6),)]
    assert query(
        database_url,
        "SELECT status, count(*) FROM procrastinate_jobs WHERE task_name = %s GROUP BY 1 ORDER BY 1",
        ["memory_agent.consolidation.user"],
    ) == [("doing", 1), ("succeeded", 1)]
