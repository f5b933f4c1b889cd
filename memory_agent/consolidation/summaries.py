"""The manual trigger (POST /memory/summarize, `memory-agent consolidate --user`) and the design's JSON shapes of its
answer and of a listed summary, shared by the HTTP API and the CLI so both speak the same JSON.

A manual run consolidates the latest complete period of a user. A weekly or monthly rollup reads notes, so
the run first writes the notes it reads that are missing (the week's dailies; the month's weeklies and their
dailies) — without a worker running the nightly schedule a rollup would otherwise find nothing. Those inputs are
written like the nightly run writes them (once per period start, never forced); `force` replaces the target
note only. Every write is consolidate_period's INSERT ... ON CONFLICT: two runs racing write one note.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import date, datetime, timedelta
from typing import Any, Literal

import psycopg
from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from memory_agent.consolidation.guards import OVER_BUDGET
from memory_agent.consolidation.nightly import PeriodOutcome, consolidate_period
from memory_agent.consolidation.periods import SUNDAY, Period, PeriodName, latest_period
from memory_agent.consolidation.queries import ConsolidationQueries
from memory_agent.consolidation.run import ConsolidationRun
from memory_agent.long_term.scope import Row, check_identity

SummarizeStatus = Literal["complete", "exists", "nothing_to_consolidate", "over_budget", "forgotten"]
# consolidate_period's outcome → the answer's status ("complete" is the design's word for a written note).
_STATUS: dict[str, SummarizeStatus] = {
    "complete": "complete",
    "exists": "exists",
    "empty": "nothing_to_consolidate",
    OVER_BUDGET: "over_budget",
    "forgotten": "forgotten",
}


class _CamelCaseShape(BaseModel):
    # The design's JSON is camelCase; Python reads snake_case.
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, serialize_by_alias=True)


class PeriodSummary(_CamelCaseShape):
    """One consolidation note as the design lists it (GET /memory/summaries, `memory-agent summaries`)."""

    summary_id: int
    user_id: str
    period: PeriodName
    start_date: date
    end_date: date = Field(description="The last day covered, inclusive.")
    key_insights: list[str] = Field(description="The note's top insights, most important first.")
    notes_consolidated: int = Field(
        description="Inputs consolidated: a daily's items and memories, a weekly's dailies, a monthly's weeklies."
    )

    @classmethod
    def from_row(cls, row: Row) -> PeriodSummary:
        """A row of the list_notes query."""
        return cls(
            summary_id=row["note_id"],
            user_id=row["user_id"],
            period=row["period"],
            start_date=row["period_start"],
            end_date=row["period_end"],
            key_insights=list(row["key_insights"]),
            notes_consolidated=row["notes_consolidated"],
        )


class SummarizeResult(_CamelCaseShape):
    """What a manual run did: the design's summaryId, period, notesConsolidated and status, and the period's days."""

    summary_id: int | None = Field(description="The note of the period (null: nothing to consolidate).")
    period: PeriodName
    start_date: date
    end_date: date
    notes_consolidated: int
    status: SummarizeStatus = Field(
        description="complete: written now; exists: already written this cycle, nothing done (force: true writes "
        "it again); nothing_to_consolidate: the period holds no material, nothing written; over_budget: the "
        "tenant's monthly cost ceiling is reached (or reserved by calls in flight), no model call, nothing written; "
        "forgotten: a forget of the user erased some of the material while the model answered, nothing written."
    )


def rollup_inputs(period: Period) -> list[Period]:
    """The notes `period` reads, in the order the nightly run writes them (each week's dailies, then the week)."""
    if period.name == "daily":
        return []
    if period.name == "weekly":
        return [Period("daily", period.start + timedelta(days=n), period.start + timedelta(days=n)) for n in range(7)]
    inputs: list[Period] = []
    # A monthly rolls up the weeks that ended (on a Saturday) within the month.
    end = period.start + timedelta(days=(SUNDAY - 1 - period.start.weekday()) % 7)
    while end <= period.end:
        week = Period("weekly", end - timedelta(days=6), end)
        inputs += [*rollup_inputs(week), week]
        end += timedelta(days=7)
    return inputs


async def summarize_latest(
    conn: psycopg.AsyncConnection[Any],
    tenant_id: str,
    user_id: str,
    period_name: str,
    now: datetime,
    *,
    run: ConsolidationRun,
) -> SummarizeResult:
    """Consolidate the user's latest complete `period_name` at `now` (its missing inputs first)."""
    check_identity(tenant_id, user_id)
    target = latest_period(period_name, now)
    outcome: PeriodOutcome | None = None
    for source in rollup_inputs(target):
        written = await consolidate_period(conn, tenant_id, user_id, source, now, run=replace(run, force=False))
        if written.status == OVER_BUDGET:  # the rollup would read an input the ceiling left unwritten
            outcome = written
            break
    if outcome is None:
        outcome = await consolidate_period(conn, tenant_id, user_id, target, now, run=run)
    if outcome.status == OVER_BUDGET:
        return SummarizeResult(
            summary_id=None,
            period=target.name,
            start_date=target.start,
            end_date=target.end,
            notes_consolidated=0,
            status="over_budget",
        )
    note_id, consolidated = outcome.note_id, outcome.notes_consolidated
    if outcome.status == "exists":
        # Not written by this run (done before, or by a run racing this one): answer with the note that stands.
        key = {"tenant_id": tenant_id, "user_id": user_id, "period": target.name, "period_start": target.start}
        row = await ConsolidationQueries.note(conn, key)
        if row is not None:
            note_id, consolidated = row["note_id"], row["notes_consolidated"]
    return SummarizeResult(
        summary_id=note_id,
        period=target.name,
        start_date=target.start,
        end_date=target.end,
        notes_consolidated=consolidated,
        status=_STATUS[outcome.status],
    )
