"""Per-tenant guards of scheduled consolidation (docs/concepts/consolidation.md), each decided by PostgreSQL:

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
  'over_budget' in the run report and a WARNING naming the tenant, its spend and the ceiling. Each model call
  first reserves its estimated cost in the database (call_within_budget): while the spend plus the calls in
  flight reach the ceiling no call starts, whichever path (scheduler, HTTP, CLI) or process asks.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime, timedelta
from typing import Any

import psycopg
from langchain_core.language_models import BaseChatModel
from psycopg_pool import AsyncConnectionPool
from pydantic import BaseModel

from memory_agent.consolidation.config import ConsolidationConfig
from memory_agent.consolidation.model import ConsolidationModelError, call_consolidation_model, consolidation_prompt
from memory_agent.consolidation.queries import ConsolidationQueries
from memory_agent.db.connector import Connector
from memory_agent.errors import MemoryAgentError
from memory_agent.llm import CallLog, LLMCall, Purpose, model_name
from memory_agent.long_term import ledger
from memory_agent.long_term.lineage import ledger_user

logger = logging.getLogger("memory_agent.consolidation")

CAPPED = "capped"
OVER_BUDGET = "over_budget"


class TenantBusy(MemoryAgentError):
    """Every concurrent-job slot of the tenant is taken: run the job later (the scheduler defers it; never
    dropped)."""

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
    if await ConsolidationQueries.claim_scheduler_run(conn, tenant_id, now, now - timedelta(seconds=cooldown_s)):
        return None
    return await ConsolidationQueries.scheduler_last_run(conn, tenant_id) or now


async def open_tenant(
    conn: psycopg.AsyncConnection[Any], tenant_id: str, now: datetime, config: ConsolidationConfig
) -> str | None:
    """Whether a scheduler run may work for the tenant: None, or why not ('cooldown: ...', 'over_budget: ...')."""
    last = await claim_scheduler_run(conn, tenant_id, now, config.guards.tenant_cooldown_s)
    if last is not None:
        logger.info(
            "tenant %r ran at %s, within its %ss cooldown: skipped", tenant_id, last, config.guards.tenant_cooldown_s
        )
        return f"cooldown: last run {last.isoformat()}"
    return await over_budget(conn, tenant_id, now, config)


async def over_budget(
    conn: psycopg.AsyncConnection[Any], tenant_id: str, now: datetime, config: ConsolidationConfig
) -> str | None:
    """'over_budget: ...' (and a WARNING) when the tenant's month reached its cost ceiling, else None."""
    budget = await ledger.tenant_budget(conn, tenant_id, config.guards.monthly_cost_ceiling, now)
    if not budget.over:
        return None
    logger.warning("%s: consolidation stops for this tenant until next month", budget.describe())
    return f"{OVER_BUDGET}: {budget.describe()}"


async def call_within_budget(
    conn: psycopg.AsyncConnection[Any],
    scope: dict[str, Any],
    purpose: Purpose,
    now: datetime,
    config: ConsolidationConfig,
    call: tuple[BaseChatModel, str, str, type[BaseModel]],
    cap: SummaryJobCap | None = None,
    project: str = "",
) -> tuple[Any, LLMCall] | str:
    """A summary job's model call (`call`: model, instructions, material, answer schema) under the guards: its
    estimated cost reserved against the tenant's monthly ceiling in the database first (ledger.reserve: calls
    racing on any path or process are admitted one at a time, each seeing those in flight), then the run's
    cap; the call's actual cost settles the reservation in the ledger, a failed call releases it. The guard
    that stopped it (OVER_BUDGET, CAPPED: no call made), else the parsed answer and the call."""
    model, instructions, material, schema = call
    prompt = consolidation_prompt(instructions, material)
    estimate = ledger.estimate_cost(purpose, model_name(model), prompt, config.guards.llm_prices)
    reservation = await ledger.reserve(conn, scope["tenant_id"], config.guards.monthly_cost_ceiling, estimate, now)
    if reservation is None:
        logger.warning(
            "tenant %r reached its monthly cost ceiling %s (spent and reserved by calls in flight): no %s call",
            scope["tenant_id"],
            config.guards.monthly_cost_ceiling,
            purpose,
        )
        return OVER_BUDGET
    if cap is not None and not cap.take(scope["tenant_id"], scope["user_id"], project):
        await ledger.release(conn, reservation)
        return CAPPED
    try:
        output, made = await call_consolidation_model(model, instructions, material, schema, purpose)
    except ConsolidationModelError as exc:
        if exc.call is None:
            await ledger.release(conn, reservation)
        else:  # answers that were no usable note cost as much as one: counted against the ceiling
            await _settle(conn, scope, now, config, reservation, exc.call)
        raise
    except BaseException:
        await ledger.release(conn, reservation)
        raise
    await _settle(conn, scope, now, config, reservation, made)
    return output, made


async def _settle(
    conn: psycopg.AsyncConnection[Any],
    scope: dict[str, Any],
    now: datetime,
    config: ConsolidationConfig,
    reservation: ledger.Reservation,
    made: LLMCall,
) -> None:
    """Record `made` in the ledger, settling `reservation` with its actual cost."""
    async with conn.transaction():
        user = await ledger_user(conn, scope)  # a call answered after forget_user is counted under no user
        await ledger.record_log(
            conn,
            scope["tenant_id"],
            user,
            CallLog([made]),
            now=now,
            prices=config.guards.llm_prices,
            reservation=reservation,
        )


@asynccontextmanager
async def tenant_slot(pool: AsyncConnectionPool[Any], tenant_id: str, slots: int) -> AsyncIterator[int]:
    """Hold one of the tenant's `slots` concurrent-job slots for the block (TenantBusy when all are taken)."""
    async with Connector(pool).session() as conn:
        taken = None
        for slot in range(slots):
            if await ConsolidationQueries.try_tenant_slot(conn, tenant_id, slot):
                taken = slot
                break
        if taken is None:
            raise TenantBusy(tenant_id, slots)
        try:
            yield taken
        finally:
            try:
                await ConsolidationQueries.release_tenant_slot(conn, tenant_id, taken)
            except BaseException:
                # The lock must not go back to the pool with the connection: closing it frees the slot.
                await conn.close()
                raise
