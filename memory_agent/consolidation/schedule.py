"""The schedules: a procrastinate periodic tick (cron in UTC from schedule_time) fans out one job per due user.

procrastinate defers one tick per cron time whatever the number of workers, but a tick missed while no worker
ran is lost, and a job runs at least once. So the tick decides nothing by itself: it asks the database which
users are due at its time (no schedule row yet, or next_run passed), and each user's job covers every day not
yet covered (catch-up). Per-user jobs carry a queueing lock (one waiting job per user and job kind), and every
output is idempotent per (user, period, period_start). No running lock: the job of a worker killed mid-run stays
`doing` in procrastinate and would hold such a lock forever; two runs of one user only race to the same rows.
The tenant guards (guards.py) sit on both sides: the tick skips tenants in their cooldown or over their cost
ceiling, and each user's job runs in one of its tenant's concurrent-job slots or is deferred again.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import procrastinate
import procrastinate.exceptions
import psycopg
from langchain_core.language_models import BaseChatModel
from psycopg_pool import AsyncConnectionPool

from memory_agent.consolidation.batches import BATCH_JOB, run_batch_summaries
from memory_agent.consolidation.clock import check_aware
from memory_agent.consolidation.config import ConsolidationConfig
from memory_agent.consolidation.guards import SummaryJobCap, TenantBusy, open_tenant, over_budget, tenant_slot
from memory_agent.consolidation.nightly import NIGHTLY, run_nightly
from memory_agent.consolidation.periods import cron_for
from memory_agent.consolidation.queries import ConsolidationQueries
from memory_agent.consolidation.run import ConsolidationRun
from memory_agent.db.connector import Connector
from memory_agent.db.tenancy import tenant_scope
from memory_agent.errors import InvalidInputError

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
        enabled = {
            NIGHTLY: self.config.consolidation.consolidation_enabled,
            BATCH_JOB: self.config.consolidation.batch_summaries_enabled,
        }
        return tuple(job for job in JOBS if enabled[job])

    async def due_users(self, job: str, now: datetime) -> list[tuple[str, str]]:
        """(tenant_id, user_id) of every user whose `job` is due at `now`."""
        rows = await ConsolidationQueries(Connector(self.pool)).due_users(job, check_aware(now))
        return [(row["tenant_id"], row["user_id"]) for row in rows]

    async def run_user(
        self, job: str, tenant_id: str, user_id: str, now: datetime, cap: SummaryJobCap | None = None
    ) -> str:
        """One user's run of `job` at `now`, in one of its tenant's concurrent-job slots (TenantBusy when none is
        free); a line saying what it wrote, or 'over_budget: ...' when the tenant's cost ceiling stops it."""
        if job not in JOBS:
            raise InvalidInputError(f"job must be one of {', '.join(JOBS)}, got {job!r}")
        config = self.config
        cap = cap or SummaryJobCap(config.guards.max_summary_jobs_per_run)
        slot = tenant_slot(self.pool, tenant_id, config.guards.max_concurrent_jobs_per_tenant)
        # The tenant's scope: a role bound by row-level security reads and writes this tenant's rows (db/tenancy.py).
        with tenant_scope(tenant_id):
            async with slot, Connector(self.pool).session() as conn:
                return await self._run_user(conn, job, tenant_id, user_id, now, cap)

    async def _run_user(
        self,
        conn: psycopg.AsyncConnection[Any],
        job: str,
        tenant_id: str,
        user_id: str,
        now: datetime,
        cap: SummaryJobCap,
    ) -> str:
        config = self.config
        stopped = await over_budget(conn, tenant_id, now, config)
        if stopped is not None:
            return stopped
        if job == NIGHTLY:
            nightly = await run_nightly(
                conn, tenant_id, user_id, now, run=ConsolidationRun(self.model, config, cap=cap)
            )
            line = (
                f"{len(nightly.days)} days: {nightly.written('daily')} daily, {nightly.written('weekly')} "
                f"weekly, {nightly.written('monthly')} monthly, {len(nightly.compacted)} compacted"
            )
            return line + (f", stopped: {nightly.stopped}" if nightly.stopped else "")
        batches = await run_batch_summaries(
            conn, tenant_id, user_id, now, run=ConsolidationRun(self.model, config, cap=cap)
        )
        line = f"{len(batches.summaries)} batch summaries, {len(batches.forgotten)} originals forgotten"
        return line + (f", stopped: {batches.stopped}" if batches.stopped else "")

    async def open_tenants(self, tenants: Iterable[str], now: datetime) -> dict[str, str | None]:
        """For each tenant, None when this run may work for it, else why not (cooldown, over_budget)."""
        gates: dict[str, str | None] = {}
        for tenant in dict.fromkeys(tenants):
            with tenant_scope(tenant):  # each tenant's spend, under row-level security too
                async with Connector(self.pool).session() as conn:
                    gates[tenant] = await open_tenant(conn, tenant, now, self.config)
        return gates

    async def run_due(self, now: datetime) -> dict[tuple[str, str, str], str]:
        """Every due user's every job, inline, in this process (tests, the CLI, the demo). A tenant the guards
        hold back reports why for each of its due users; a user whose tenant has no free slot waits (still due)."""
        due = [(job, tenant_id, user_id) for job in self.jobs for tenant_id, user_id in await self.due_users(job, now)]
        gates = await self.open_tenants((tenant_id for _, tenant_id, _ in due), now)
        cap = SummaryJobCap(self.config.guards.max_summary_jobs_per_run)
        done: dict[tuple[str, str, str], str] = {}
        for job, tenant_id, user_id in due:
            gate = gates[tenant_id]
            if gate is not None:
                done[(job, tenant_id, user_id)] = gate
                continue
            try:
                done[(job, tenant_id, user_id)] = await self.run_user(job, tenant_id, user_id, now, cap)
            except TenantBusy as busy:
                done[(job, tenant_id, user_id)] = f"waiting: {busy}"
        return done


def user_lock(job: str, tenant_id: str, user_id: str) -> str:
    return f"memory_agent.consolidation:{job}:{tenant_id}:{user_id}"


async def defer_due(app: procrastinate.App, runner: ConsolidationRunner, now: datetime) -> int:
    """Defer one job per due user (one waiting job per user at most); how many were deferred."""
    due = [(job, tenant_id, user_id) for job in runner.jobs for tenant_id, user_id in await runner.due_users(job, now)]
    gates = await runner.open_tenants((tenant_id for _, tenant_id, _ in due), now)
    deferred = 0
    for job, tenant_id, user_id in due:
        if gates[tenant_id] is None and await defer_user(app, job, tenant_id, user_id, now):
            deferred += 1
    return deferred


async def defer_user(
    app: procrastinate.App, job: str, tenant_id: str, user_id: str, now: datetime, *, delay_s: float = 0
) -> bool:
    """Defer a user's job (at most one waiting per user and job); whether this call queued it."""
    options: dict[str, Any] = {"queueing_lock": user_lock(job, tenant_id, user_id)}
    if delay_s > 0:
        options["schedule_in"] = {"seconds": delay_s}
    task = app.tasks[USER_TASK].configure(**options)
    try:
        await task.defer_async(job=job, tenant_id=tenant_id, user_id=user_id, now=now.isoformat())
    except procrastinate.exceptions.AlreadyEnqueued:
        logger.info("consolidation %s of %s/%s is already queued", job, tenant_id, user_id)
        return False
    return True


def register_tasks(
    app: procrastinate.App,
    runner: ConsolidationRunner,
    *,
    queue: str,
    retry: procrastinate.BaseRetryStrategy | bool = False,
) -> None:
    """Add the tick (periodic, cron from schedule_time) and the per-user task to `app`. A run that fails raises
    (the job ends `failed`, the user stays due); `retry` says which errors run the job again."""

    @app.periodic(cron=cron_for(runner.config.consolidation.schedule_time), periodic_id=TICK_TASK)
    @app.task(name=TICK_TASK, queue=queue, queueing_lock=TICK_TASK, retry=retry)
    async def tick(timestamp: int) -> int:
        return await defer_due(app, runner, datetime.fromtimestamp(timestamp, UTC))

    @app.task(name=USER_TASK, queue=queue, retry=retry)
    async def consolidate_user(job: str, tenant_id: str, user_id: str, now: str) -> str:
        at = datetime.fromisoformat(now)
        try:
            outcome = await runner.run_user(job, tenant_id, user_id, at)
        except TenantBusy as busy:
            # Not dropped: the same job again later (the queueing lock keeps it one per user).
            delay = runner.config.guards.tenant_slot_retry_s
            await defer_user(app, job, tenant_id, user_id, at, delay_s=delay)
            logger.info("consolidation %s of %s/%s deferred by %ss: %s", job, tenant_id, user_id, delay, busy)
            return f"deferred: {busy}"
        logger.info("consolidation %s of %s/%s at %s: %s", job, tenant_id, user_id, now, outcome)
        return outcome
