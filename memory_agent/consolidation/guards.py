"""Per-tenant guards of scheduled consolidation (cluster-summarization-pipeline.md), each decided by PostgreSQL:

- cooldown (MEMORY_AGENT_TENANT_COOLDOWN_S, 2 minutes): a scheduler run for a tenant within the cooldown of its
  previous run does nothing for it; one conditional upsert of tenant_scheduler_runs decides, so two schedulers
  ticking at once run a tenant once.
- summary jobs per run (MEMORY_AGENT_MAX_SUMMARY_JOBS_PER_RUN, 20): a *summary job* is one model call that
  writes a summary — a period note (daily, weekly, monthly) of the nightly run, one batch summary, or one
  cluster summary refreshed by the periodic safety net (summarize/runner.py applies the same limit there). At
  most that many per (tenant, user, project) in one run; nightly notes are not per project (project ''), batch
  summaries are per (project, environment) partition. What a capped run leaves stays due for the next run.
- concurrent jobs (MEMORY_AGENT_MAX_CONCURRENT_JOBS_PER_TENANT, 3): a job holds one of its tenant's N slots, a
  session advisory lock on a connection of its own, for its whole run, whatever process runs it; a job that
  finds every slot taken raises TenantBusy and is deferred again (never dropped). A killed worker's connection
  ends and frees its slot.
- monthly cost ceiling (MEMORY_AGENT_MONTHLY_COST_CEILING, off by default): over it (the tenant's spend this
  calendar month, from the ledger, reached the ceiling) consolidation stops for the tenant: status
  'over_budget' in the run report and a WARNING naming the tenant, its spend and the ceiling.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime, timedelta
from typing import Any

import psycopg
from psycopg_pool import AsyncConnectionPool

from memory_agent import ledger
from memory_agent.consolidation.config import ConsolidationConfig
from memory_agent.consolidation.model import ModelCall
from memory_agent.long_term.scope import fetch, fetch_one

logger = logging.getLogger("memory_agent.consolidation")

CAPPED = "capped"
OVER_BUDGET = "over_budget"


class TenantBusy(Exception):
    """Every concurrent-job slot of the tenant is taken: run the job later."""

    def __init__(self, tenant_id: str, slots: int) -> None:
        super().__init__(f"all {slots} concurrent-job slots of tenant {tenant_id!r} are taken")
        self.tenant_id = tenant_id


class SummaryJobCap:
    """The summary jobs of one scheduler run, counted per (tenant, user, project) against the limit."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used: Counter[tuple[str, str, str]] = Counter()

    def take(self, tenant_id: str, user_id: str, project: str = "") -> bool:
        key = (tenant_id, user_id, project)
        if self.used[key] >= self.limit:
            return False
        self.used[key] += 1
        return True


async def claim_scheduler_run(
    conn: psycopg.AsyncConnection[Any], tenant_id: str, now: datetime, cooldown_s: float
) -> datetime | None:
    """Record the tenant's run at `now`: None when it may go on, else the previous run holding the cooldown."""
    params = {"tenant_id": tenant_id, "now": now, "cooldown": timedelta(seconds=cooldown_s)}
    if await fetch_one(conn, "claim_scheduler_run", params):
        return None
    row = await fetch_one(conn, "scheduler_last_run", {"tenant_id": tenant_id})
    return row["last_run"] if row else now


async def open_tenant(
    conn: psycopg.AsyncConnection[Any], tenant_id: str, now: datetime, config: ConsolidationConfig
) -> str | None:
    """Whether a scheduler run may work for the tenant: None, or why not ('cooldown: ...', 'over_budget: ...')."""
    last = await claim_scheduler_run(conn, tenant_id, now, config.tenant_cooldown_s)
    if last is not None:
        logger.info("tenant %r ran at %s, within its %ss cooldown: skipped", tenant_id, last, config.tenant_cooldown_s)
        return f"cooldown: last run {last.isoformat()}"
    return await over_budget(conn, tenant_id, now, config)


async def over_budget(
    conn: psycopg.AsyncConnection[Any], tenant_id: str, now: datetime, config: ConsolidationConfig
) -> str | None:
    """'over_budget: ...' (and a WARNING) when the tenant's month reached its cost ceiling, else None."""
    budget = await ledger.tenant_budget(conn, tenant_id, config.monthly_cost_ceiling, now)
    if not budget.over:
        return None
    logger.warning("%s: consolidation stops for this tenant until next month", budget.describe())
    return f"{OVER_BUDGET}: {budget.describe()}"


async def before_summary_job(
    conn: psycopg.AsyncConnection[Any],
    scope: dict[str, Any],
    now: datetime,
    config: ConsolidationConfig,
    cap: SummaryJobCap | None,
    project: str = "",
) -> str | None:
    """Right before a summary job's model call: None when it may run, else the guard that stops it."""
    if await over_budget(conn, scope["tenant_id"], now, config):
        return OVER_BUDGET
    if cap is not None and not cap.take(scope["tenant_id"], scope["user_id"], project):
        return CAPPED
    return None


async def record_model_call(
    conn: psycopg.AsyncConnection[Any],
    scope: dict[str, Any],
    purpose: ledger.Purpose,
    call: ModelCall,
    now: datetime,
    config: ConsolidationConfig,
) -> None:
    """The call in the ledger (a failure to record is logged: the model's answer is still used)."""
    log = ledger.CallLog([ledger.LLMCall(purpose, call.model, call.input_tokens, call.output_tokens)])
    await ledger.record_log(conn, scope["tenant_id"], scope["user_id"], log, now=now, prices=config.prices)


@asynccontextmanager
async def tenant_slot(pool: AsyncConnectionPool[Any], tenant_id: str, slots: int) -> AsyncIterator[int]:
    """Hold one of the tenant's `slots` concurrent-job slots for the block (TenantBusy when all are taken)."""
    async with pool.connection() as conn:
        taken = None
        for slot in range(slots):
            row = await fetch_one(conn, "try_tenant_slot", {"tenant_id": tenant_id, "slot": slot})
            if row and row["taken"]:
                taken = slot
                break
        if taken is None:
            raise TenantBusy(tenant_id, slots)
        try:
            yield taken
        finally:
            try:
                await fetch(conn, "release_tenant_slot", {"tenant_id": tenant_id, "slot": taken})
            except BaseException:
                # The lock must not go back to the pool with the connection: closing it frees the slot.
                await conn.close()
                raise
