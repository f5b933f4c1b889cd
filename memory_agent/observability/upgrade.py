"""The weekly upgrade report (the design's upgrade triggers, docs/concepts/consolidation.md), read from the view
upgrade_report_weekly (sql/definitions/views.sql): per ISO week and tenant, each of the design's metrics
beside its threshold and whether it is crossed. `memory-agent report` prints it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any

from memory_agent.db.backend import MemoryBackend
from memory_agent.errors import InvalidInputError
from memory_agent.observability.queries import ObservabilityQueries

Row = dict[str, Any]


@dataclass(frozen=True)
class Metric:
    """One row of the design's trigger table, and the view's columns for it."""

    key: str
    label: str
    meaning: str
    value_column: str
    threshold_column: str
    unit: str  # 'share' (0-1) or 'ms'

    @property
    def crossed_column(self) -> str:
        return f"{self.key}_crossed"


METRICS = (
    Metric("low_fts", "FTS hits < 3", "lexical retrieval insufficient", "low_fts_share", "low_fts_threshold", "share"),
    Metric("fallback", "fallback", "FTS no longer main", "fallback_share", "fallback_threshold", "share"),
    Metric(
        "summaries_only",
        "summaries-only",
        "summaries not structured enough",
        "summaries_only_share",
        "summaries_only_threshold",
        "share",
    ),
    Metric("truncation", "truncation", "context budget pressure", "truncation_rate", "truncation_threshold", "share"),
    Metric("p95_latency", "p95 latency", "need caching/splitting", "p95_latency_ms", "p95_latency_threshold_ms", "ms"),
    Metric(
        "summary_cost",
        "summary cost share",
        "need lower frequency/compression",
        "summary_cost_share",
        "summary_cost_threshold",
        "share",
    ),
)


def first_week(now: datetime, weeks: int) -> date:
    """The Monday (UTC) that starts the oldest of the `weeks` ISO weeks ending with now's."""
    if not isinstance(weeks, int) or weeks < 1:
        raise InvalidInputError(f"weeks must be an integer >= 1, got {weeks!r}")
    today = now.astimezone(UTC).date()
    return today - timedelta(days=today.weekday()) - timedelta(weeks=weeks - 1)


def shaped(row: Row) -> Row:
    """A view row as the report's JSON: each metric {value, threshold, crossed}."""
    metrics = {}
    for metric in METRICS:
        value = row[metric.value_column]
        metrics[metric.key] = {
            "label": metric.label,
            "value": None if value is None else float(value),
            "threshold": float(row[metric.threshold_column]),
            "crossed": row[metric.crossed_column],
            "meaning": metric.meaning,
        }
    return {
        "week": row["iso_week"],
        "weekStart": row["week_start"].isoformat(),
        "tenantId": row["tenant_id"],
        "rounds": row["rounds"],
        "queries": row["queries"],
        "metrics": metrics,
        "crossed": row["crossed"],
        "summaryCost": float(row["summary_cost"]) if row["summary_cost"] is not None else None,
        "appCost": float(row["app_cost"]) if row["app_cost"] is not None else None,
        "llmSpend": float(row["llm_spend"]) if row["llm_spend"] is not None else None,
        "summaryCalls": row["summary_calls"],
        "appCalls": row["app_calls"],
        "unpricedCalls": row["unpriced_calls"],
    }


async def upgrade_report(
    backend: MemoryBackend, *, weeks: int = 8, tenant_id: str | None = None, now: datetime | None = None
) -> list[Row]:
    """The view's rows of the last `weeks` ISO weeks up to now's (one tenant when named), newest first."""
    since = first_week(now or datetime.now(UTC), weeks)
    return await ObservabilityQueries(backend).upgrade_report(tenant_id, since)
