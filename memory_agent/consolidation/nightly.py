"""The nightly run of one user: daily notes, weekly and monthly rollups, compaction of old dailies.

Each output is one note per (tenant, user, period, period_start), written with INSERT ... ON CONFLICT, so a
re-run, a retried job or two workers racing write it once. A note already written costs no model call. The
run covers every day from the day after the schedule's covered_until to yesterday, in order: a run after
downtime catches up, and a run killed mid-day redoes only what that day had not written.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from typing import Any

import psycopg
from langchain_core.language_models import BaseChatModel
from psycopg.types.json import Jsonb

from memory_agent.consolidation.claims import NIGHTLY, Covered, claimed_note, schedule_held
from memory_agent.consolidation.clock import check_aware
from memory_agent.consolidation.config import ConsolidationConfig
from memory_agent.consolidation.guards import (
    CAPPED,
    OVER_BUDGET,
    SummaryJobCap,
    call_within_budget,
)
from memory_agent.consolidation.model import (
    CONSOLIDATE_PROMPT,
    ConsolidationOutput,
    Insight,
)
from memory_agent.consolidation.parts import consolidate_in_parts
from memory_agent.consolidation.periods import (
    Period,
    day_bounds,
    next_tick,
    rollups_due_after,
    utc_day,
)
from memory_agent.consolidation.queries import ConsolidationQueries
from memory_agent.consolidation.run import ConsolidationRun
from memory_agent.llm import LLMCall
from memory_agent.llm.calls import model_name
from memory_agent.long_term.lineage import Lineage, sources_held
from memory_agent.long_term.scope import check_identity
from memory_agent.tracing import memory_span, record

FORGOTTEN = "forgotten"


@dataclass(frozen=True)
class PeriodOutcome:
    """What consolidating one period did: complete (written), exists (already written, nothing done), empty
    (nothing to consolidate, nothing written), capped or over_budget (a tenant guard stopped it before its
    model call: guards.py), forgotten (a forget of the user erased some of its material while the model
    answered: nothing written, the period stays due and is made again from what is left)."""

    period: Period
    status: str
    note_id: int | None = None
    notes_consolidated: int = 0


@dataclass
class NightlyReport:
    days: list[date] = field(default_factory=list)
    outcomes: list[PeriodOutcome] = field(default_factory=list)
    compacted: list[int] = field(default_factory=list)
    stopped: str | None = None  # what stopped the run (capped, over_budget, forgotten): the rest stays due

    def written(self, period: str) -> int:
        return sum(1 for o in self.outcomes if o.period.name == period and o.status == "complete")


async def run_nightly(
    conn: psycopg.AsyncConnection[Any],
    tenant_id: str,
    user_id: str,
    now: datetime,
    *,
    run: ConsolidationRun,
) -> NightlyReport:
    """Consolidate every day of the user not yet covered, up to yesterday (UTC) at `now`; a guard that stops a
    period (`cap`, the cost ceiling) ends the run there, the day not covered, the user still due."""
    check_identity(tenant_id, user_id)
    model, config, cap = run.model, run.settings, run.cap
    now = check_aware(now)
    scope = {"tenant_id": tenant_id, "user_id": user_id}
    state = await ConsolidationQueries.schedule(conn, scope, NIGHTLY)
    covered: date | None = state["covered_until"]
    first = covered + timedelta(days=1) if covered is not None else state["first_day"]
    report = NightlyReport()
    yesterday = utc_day(now) - timedelta(days=1)
    day = first
    while day is not None and day <= yesterday:
        for period in [Period("daily", day, day), *rollups_due_after(day)]:
            outcome = await _claimed_period(conn, scope, period, now, _Job(model, config, False, cap, Covered(covered)))
            report.outcomes.append(outcome)
            if outcome.status in (CAPPED, OVER_BUDGET, FORGOTTEN):
                report.stopped = outcome.status
                return report
        async with conn.transaction():
            if not await schedule_held(conn, scope, Covered(covered)):
                report.stopped = FORGOTTEN
                return report
            run_day = day + timedelta(days=1)
            before = run_day - timedelta(days=config.consolidation.retain_days)
            report.compacted.extend(await ConsolidationQueries.compact_dailies(conn, scope, before, now))
            await _advance(conn, scope, day, now, None)
        report.days.append(day)
        covered = day
        day += timedelta(days=1)
    # Only a finished run moves next_run: a run killed midway leaves the user due at the next tick.
    async with conn.transaction():
        if not await schedule_held(conn, scope, Covered(covered)):
            report.stopped = FORGOTTEN
            return report
        await _advance(conn, scope, covered, now, next_tick(now, config.consolidation.schedule_time))
    return report


async def _advance(
    conn: psycopg.AsyncConnection[Any],
    scope: dict[str, Any],
    covered: date | None,
    now: datetime,
    next_run: datetime | None,
) -> None:
    await ConsolidationQueries.advance_schedule(
        conn,
        {
            **scope,
            "job": NIGHTLY,
            "schedule": "daily",
            "interval_days": 1,
            "covered_until": covered,
            "now": now,
            "next_run": next_run,
        },
    )


async def consolidate_period(
    conn: psycopg.AsyncConnection[Any],
    tenant_id: str,
    user_id: str,
    period: Period,
    now: datetime,
    *,
    run: ConsolidationRun,
) -> PeriodOutcome:
    """Write the note of one period from its material (one model call, or parts within the model's budget:
    parts.py), unless it exists and `force` is off. The note is claimed first: a second run of the same note
    waits, then finds it written (no second call)."""
    check_identity(tenant_id, user_id)
    now = check_aware(now)
    scope = {"tenant_id": tenant_id, "user_id": user_id}
    return await _claimed_period(conn, scope, period, now, _Job(run.model, run.settings, run.force, run.cap, None))


@dataclass(frozen=True)
class _Job:
    """How one period is consolidated: the model, the settings, and the run's guards."""

    model: BaseChatModel
    config: ConsolidationConfig
    force: bool
    cap: SummaryJobCap | None
    covered: Covered | None  # the run's schedule as it left it (None: a manual run)


async def _claimed_period(
    conn: psycopg.AsyncConnection[Any], scope: dict[str, Any], period: Period, now: datetime, job: _Job
) -> PeriodOutcome:
    with memory_span(
        "memory_agent.consolidation",
        "update_memory",
        tenant_id=scope["tenant_id"],
        user_id=scope["user_id"],
        attributes={
            "memory_agent.period": period.name,
            "memory_agent.period.start": period.start.isoformat(),
            "memory_agent.period.end": period.end.isoformat(),
            "memory_agent.consolidation.forced": job.force,
            "gen_ai.request.model": model_name(job.model),
        },
    ) as span:
        outcome = await _consolidate_claimed(conn, scope, period, now, job)
        record(span, **{"memory_agent.consolidation.status": outcome.status, "memory_agent.note.id": outcome.note_id})
        return outcome


async def _consolidate_claimed(
    conn: psycopg.AsyncConnection[Any], scope: dict[str, Any], period: Period, now: datetime, job: _Job
) -> PeriodOutcome:
    key = {**scope, "period": period.name, "period_start": period.start}
    if not job.force and await ConsolidationQueries.note(conn, key):
        return PeriodOutcome(period, "exists")
    async with claimed_note(conn, key):
        if not job.force and await ConsolidationQueries.note(conn, key):
            return PeriodOutcome(period, "exists")
        return await _consolidate(conn, scope, key, period, now, job)


async def _consolidate(
    conn: psycopg.AsyncConnection[Any],
    scope: dict[str, Any],
    key: dict[str, Any],
    period: Period,
    now: datetime,
    job: _Job,
) -> PeriodOutcome:
    """The claimed period's note: material, guards, model call, and the write a forget can void."""
    model, config, force, cap, covered = job.model, job.config, job.force, job.cap, job.covered
    lines, content, consolidated, lineage = await _material(conn, scope, period, config)
    if not lines:
        return PeriodOutcome(period, "empty")
    header = f"Period: {period.name} {period.start.isoformat()}..{period.end.isoformat()}\nNotes, oldest first:\n"

    async def ask(material: str) -> tuple[Any, LLMCall] | str:
        request = (model, CONSOLIDATE_PROMPT, material, ConsolidationOutput)
        return await call_within_budget(conn, scope, "consolidation", now, config, request, cap)

    answer = await consolidate_in_parts(ask, header, lines, config.consolidation.consolidation_max_input_tokens)
    if isinstance(answer, str):
        return PeriodOutcome(period, answer)
    output, calls = answer
    call = LLMCall(
        "consolidation", calls[-1].model, sum(c.input_tokens for c in calls), sum(c.output_tokens for c in calls)
    )
    insights = sorted((Insight(i.text, i.importance) for i in output.insights), key=lambda i: -i.importance)
    if period.name != "daily":
        # Rollups keep what matters; the compacted dailies keep everything.
        insights = [i for i in insights if i.importance >= config.consolidation.rollup_min_importance]
    key_insights = [i.text for i in insights if i.importance >= config.consolidation.rollup_min_importance][
        : config.consolidation.key_insights_count
    ]
    async with conn.transaction():
        held = await sources_held(
            conn, scope, item_ids=lineage.item_ids, memory_ids=lineage.memory_ids, note_ids=lineage.note_ids
        ) and await schedule_held(conn, scope, covered)
        if not held:
            return PeriodOutcome(period, FORGOTTEN)
        row = await ConsolidationQueries.insert_note(
            conn,
            {
                **key,
                **lineage.params(),
                "period_end": period.end,
                "content": content if period.name == "daily" else output.summary,
                "consolidated": output.summary,
                "insights": Jsonb([{"text": i.text, "importance": i.importance} for i in insights]),
                "key_insights": key_insights,
                "notes_consolidated": consolidated,
                "model": call.model,
                "input_tokens": call.input_tokens,
                "output_tokens": call.output_tokens,
                "now": now,
                "force": force,
            },
        )
    if row is None:  # written meanwhile by another run: that one stands
        return PeriodOutcome(period, "exists")
    return PeriodOutcome(period, "complete", row["note_id"], consolidated)


async def _material(
    conn: psycopg.AsyncConnection[Any], scope: dict[str, Any], period: Period, config: ConsolidationConfig
) -> tuple[list[str], str, int, Lineage]:
    """The period's input as '- ' lines for the model, the raw text a daily note keeps until compacted, how
    many notes it consolidates (a daily's inputs, a weekly's dailies, a monthly's weeklies), and its lineage."""
    lineage = Lineage()
    if period.name == "daily":
        start, end = day_bounds(period.start)
        rows = await ConsolidationQueries.daily_inputs(conn, scope, start, end)
        for row in rows:
            lineage.add(item_id=row["item_id"], memory_id=row["memory_id"], conversation_ids=row["conversation_ids"])
        lines = [f"- {' '.join(row['text'].split())}" for row in rows]
        return lines, "\n".join(lines), len(lines), lineage
    source = "daily" if period.name == "weekly" else "weekly"
    notes = await ConsolidationQueries.notes_ending_between(conn, scope, source, period.start, period.end)
    lines = []
    for note in notes:
        lineage.add(
            note_id=note["note_id"], item_ids=note["source_item_ids"], conversation_ids=note["source_conversation_ids"]
        )
        for insight in note["insights"]:
            if insight["importance"] >= config.consolidation.rollup_min_importance:
                lines.append(f"- ({insight['importance']:.2f}) {insight['text']}")
    return lines, "", len(notes), lineage
