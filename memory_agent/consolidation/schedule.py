"""The schedules: a procrastinate periodic tick (cron in UTC from schedule_time) fans out one job per due user.

procrastinate defers one tick per cron time whatever the number of workers, but a tick missed while no worker
ran is lost, and a job runs at least once. So the tick decides nothing by itself: it asks the database which
users are due at its time (no schedule row yet, or next_run passed), and each user's job covers every day not
yet covered (catch-up). Per-user jobs carry a queueing lock (one waiting job per user and job kind), and every
output is idempotent per (user, period, period_start). No running lock: the job of a worker killed mid-run stays
`doing` in procrastinate and would hold such a lock forever; two runs of one user only race to the same rows.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import procrastinate
import procrastinate.exceptions
from langchain_core.language_models import BaseChatModel
from psycopg_pool import AsyncConnectionPool

from memory_agent.consolidation.batches import BATCH_JOB, run_batch_summaries
from memory_agent.consolidation.clock import check_aware
from memory_agent.consolidation.config import ConsolidationConfig
from memory_agent.consolidation.nightly import NIGHTLY, run_nightly
from memory_agent.consolidation.periods import cron_for
from memory_agent.errors import InvalidInputError
from memory_agent.long_term.scope import fetch

logger = logging.getLogger("memory_agent.consolidation")

TICK_TASK = "memory_agent.consolidation.tick"
USER_TASK = "memory_agent.consolidation.user"
JOBS = (NIGHTLY, BATCH_JOB)


@dataclass
class ConsolidationRunner:
    """The job functions, on a pool of autocommit connections whose search_path reaches memory_agent."""

    pool: AsyncConnectionPool[Any]
    model: BaseChatModel
    config: ConsolidationConfig

    @property
    def jobs(self) -> tuple[str, ...]:
        enabled = {NIGHTLY: self.config.nightly_enabled, BATCH_JOB: self.config.batch_summaries_enabled}
        return tuple(job for job in JOBS if enabled[job])

    async def due_users(self, job: str, now: datetime) -> list[tuple[str, str]]:
        """(tenant_id, user_id) of every user whose `job` is due at `now`."""
        async with self.pool.connection() as conn:
            rows = await fetch(conn, "consolidation_due_users", {"job": job, "now": check_aware(now)})
        return [(row["tenant_id"], row["user_id"]) for row in rows]

    async def run_user(self, job: str, tenant_id: str, user_id: str, now: datetime) -> str:
        """One user's run of `job` at `now`; a line saying what it wrote."""
        async with self.pool.connection() as conn:
            if job == NIGHTLY:
                nightly = await run_nightly(conn, tenant_id, user_id, now, model=self.model, config=self.config)
                return (
                    f"{len(nightly.days)} days: {nightly.written('daily')} daily, {nightly.written('weekly')} "
                    f"weekly, {nightly.written('monthly')} monthly, {len(nightly.compacted)} compacted"
                )
            if job == BATCH_JOB:
                batches = await run_batch_summaries(conn, tenant_id, user_id, now, model=self.model, config=self.config)
                return f"{len(batches.summaries)} batch summaries, {len(batches.forgotten)} originals forgotten"
        raise InvalidInputError(f"job must be one of {', '.join(JOBS)}, got {job!r}")

    async def run_due(self, now: datetime) -> dict[tuple[str, str, str], str]:
        """Every due user's every job, inline, in this process (tests, the CLI, the demo)."""
        done: dict[tuple[str, str, str], str] = {}
        for job in self.jobs:
            for tenant_id, user_id in await self.due_users(job, now):
                done[(job, tenant_id, user_id)] = await self.run_user(job, tenant_id, user_id, now)
        return done


def user_lock(job: str, tenant_id: str, user_id: str) -> str:
    return f"memory_agent.consolidation:{job}:{tenant_id}:{user_id}"


async def defer_due(app: procrastinate.App, runner: ConsolidationRunner, now: datetime) -> int:
    """Defer one job per due user (one waiting job per user at most); how many were deferred."""
    deferred = 0
    for job in runner.jobs:
        for tenant_id, user_id in await runner.due_users(job, now):
            lock = user_lock(job, tenant_id, user_id)
            task = app.tasks[USER_TASK].configure(queueing_lock=lock)
            try:
                await task.defer_async(job=job, tenant_id=tenant_id, user_id=user_id, now=now.isoformat())
                deferred += 1
            except procrastinate.exceptions.AlreadyEnqueued:
                logger.info("consolidation %s of %s/%s is already queued", job, tenant_id, user_id)
    return deferred


def register_tasks(app: procrastinate.App, runner: ConsolidationRunner, *, queue: str) -> None:
    """Add the tick (periodic, cron from schedule_time) and the per-user task to `app`."""

    @app.periodic(cron=cron_for(runner.config.schedule_time), periodic_id=TICK_TASK)
    @app.task(name=TICK_TASK, queue=queue, queueing_lock=TICK_TASK)
    async def tick(timestamp: int) -> int:
        return await defer_due(app, runner, datetime.fromtimestamp(timestamp, UTC))

    @app.task(name=USER_TASK, queue=queue)
    async def consolidate_user(job: str, tenant_id: str, user_id: str, now: str) -> str:
        outcome = await runner.run_user(job, tenant_id, user_id, datetime.fromisoformat(now))
        logger.info("consolidation %s of %s/%s at %s: %s", job, tenant_id, user_id, now, outcome)
        return outcome
