"""Batch summaries with retention (one user): old long-term items summarized in batches, originals forgotten
after keep_original_days.

Items older than min_age_days and in no batch summary yet are taken oldest first, per (project, environment),
max_memories_per_batch at a time; each batch is one model call and one batch_summaries row recording the
summarized ids and summarized_until. The TTL pass forgets the summarized originals older than
keep_original_days through long_term.expire_item (their lineage and the cluster summaries built on them go
with them, so nothing dangles); the batch summaries themselves are never deleted and keep the ids as lineage.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import psycopg

from memory_agent.consolidation.clock import check_aware
from memory_agent.consolidation.config import ConsolidationConfig
from memory_agent.consolidation.guards import OVER_BUDGET, call_within_budget
from memory_agent.consolidation.model import BATCH_PROMPT, BatchSummaryOutput
from memory_agent.consolidation.nightly import FORGOTTEN
from memory_agent.consolidation.queries import ConsolidationQueries
from memory_agent.consolidation.run import ConsolidationRun
from memory_agent.llm import LLMCall
from memory_agent.long_term import expire_item
from memory_agent.long_term.lineage import sources_held
from memory_agent.long_term.scope import check_identity
from memory_agent.schemas.keys import UserKey

BATCH_JOB = "batch_summaries"


@dataclass
class BatchReport:
    summaries: list[int] = field(default_factory=list)  # batch_summaries.summary_id written
    forgotten: list[int] = field(default_factory=list)  # originals erased by the TTL pass
    stopped: str | None = None  # what stopped the summaries (capped, over_budget, forgotten): the rest stays due


async def run_batch_summaries(
    conn: psycopg.AsyncConnection[Any],
    tenant_id: str,
    user_id: str,
    now: datetime,
    *,
    run: ConsolidationRun,
) -> BatchReport:
    """Summarize every due batch of the user, then run the TTL pass and schedule the next run (not when a guard
    stopped the summaries: the user stays due)."""
    check_identity(tenant_id, user_id)
    model, config, cap = run.model, run.settings, run.cap
    now = check_aware(now)
    scope = {"tenant_id": tenant_id, "user_id": user_id}
    report = BatchReport()
    before = now - timedelta(days=config.consolidation.min_age_days)
    for partition in await ConsolidationQueries.batch_partitions(conn, scope, before):
        if report.stopped == OVER_BUDGET:
            break
        where = {**scope, **partition, "before": before, "limit": config.consolidation.max_memories_per_batch}
        while batch := await ConsolidationQueries.next_batch(conn, where):
            material = "\n".join(f"- {row['item_type']} {row['key']}: {row['content']}" for row in batch)
            call = (model, BATCH_PROMPT, material, BatchSummaryOutput)
            answer = await call_within_budget(
                conn, scope, "batch_summary", now, config, call, cap, partition["project"]
            )
            if isinstance(answer, str):
                report.stopped = answer  # capped: this project waits, the others go on
                break
            summary_id = await _write(conn, where, batch, material, answer, now)
            if isinstance(summary_id, str):
                report.stopped = FORGOTTEN  # a forget erased some of the batch: the next run batches what is left
                return report
            if summary_id is None:
                break  # another run summarized some of these meanwhile: it owns this partition now
            report.summaries.append(summary_id)
    expired = now - timedelta(days=config.consolidation.keep_original_days)
    for item_id in await ConsolidationQueries.expired_originals(conn, scope, expired):
        forgotten = await expire_item(conn, UserKey(tenant_id, user_id), item_id, now=now)
        report.forgotten.extend(forgotten.items_deleted)
    if report.stopped is not None:
        return report
    async with conn.transaction():
        await sources_held(conn, scope)  # a forget of the user in progress first: then no schedule row is left
        await _advance_batches(conn, scope, now, config)
    return report


async def _advance_batches(
    conn: psycopg.AsyncConnection[Any], scope: dict[str, Any], now: datetime, config: ConsolidationConfig
) -> None:
    await ConsolidationQueries.advance_schedule(
        conn,
        {
            **scope,
            "job": BATCH_JOB,
            "schedule": config.consolidation.batch_summaries_schedule,
            "interval_days": config.consolidation.batch_interval_days,
            "covered_until": None,
            "now": now,
            "next_run": now + timedelta(days=config.consolidation.batch_interval_days),
        },
    )


async def _write(
    conn: psycopg.AsyncConnection[Any],
    where: dict[str, Any],
    batch: list[dict[str, Any]],
    material: str,
    answer: tuple[Any, LLMCall],
    now: datetime,
) -> int | str | None:
    """The batch's summary id; None when another run summarized some of it first; FORGOTTEN when a forget
    erased some of it while the model answered (nothing written)."""
    output, call = answer
    content = output.summary.strip() or material
    item_ids = [row["item_id"] for row in batch]
    async with conn.transaction():
        await ConsolidationQueries.lock_batch_summaries(conn, where)
        if not await sources_held(conn, where, item_ids=item_ids):
            return FORGOTTEN
        return await ConsolidationQueries.insert_batch_summary(
            conn,
            {
                **where,
                "content": content,
                "item_ids": item_ids,
                "conversation_ids": sorted({c for row in batch for c in row["conversation_ids"]}),
                "summarized_from": batch[0]["created_at"],
                "summarized_until": max(row["created_at"] for row in batch),
                "model": call.model,
                "input_tokens": call.input_tokens,
                "output_tokens": call.output_tokens,
                "now": now,
            },
        )
