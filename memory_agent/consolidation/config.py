"""The settings consolidation reads, checked once: MemorySettings' consolidation fields as one value."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from memory_agent.consolidation.periods import parse_schedule_time
from memory_agent.errors import InvalidInputError
from memory_agent.guard_settings import ModelPrice
from memory_agent.settings import MemorySettings


@dataclass(frozen=True)
class ConsolidationConfig:
    nightly_enabled: bool = True
    schedule_time: str = "05:00"
    retain_days: int = 30
    key_insights: int = 5
    min_importance: float = 0.5
    batch_summaries_enabled: bool = False
    schedule: Literal["daily", "weekly", "next_run"] = "daily"
    interval_days: int = 1
    min_age_days: int = 7
    max_memories_per_batch: int = 50
    keep_original_days: int = 365
    max_input_tokens: int = 100_000  # the largest prompt of one consolidation call (parts.py)
    # The tenant guards (consolidation/guards.py) and the price table of the ledger.
    tenant_cooldown_s: float = 120.0
    max_summary_jobs_per_run: int = 20
    max_concurrent_jobs_per_tenant: int = 3
    tenant_slot_retry_s: float = 30.0
    monthly_cost_ceiling: float | None = None
    prices: Mapping[str, ModelPrice] = field(default_factory=dict)

    def __post_init__(self) -> None:
        parse_schedule_time(self.schedule_time)
        for name, value, least in (
            ("tenant_cooldown_s", self.tenant_cooldown_s, 0),
            ("max_summary_jobs_per_run", self.max_summary_jobs_per_run, 1),
            ("max_concurrent_jobs_per_tenant", self.max_concurrent_jobs_per_tenant, 1),
            ("monthly_cost_ceiling", 0 if self.monthly_cost_ceiling is None else self.monthly_cost_ceiling, 0),
        ):
            if not isinstance(value, int | float) or value < least:
                raise InvalidInputError(f"MEMORY_AGENT_{name.upper()} must be a number >= {least}, got {value!r}")
        if not self.tenant_slot_retry_s > 0:
            raise InvalidInputError(f"MEMORY_AGENT_TENANT_SLOT_RETRY_S must be > 0, got {self.tenant_slot_retry_s!r}")

    @classmethod
    def from_settings(cls, settings: MemorySettings) -> ConsolidationConfig:
        return cls(
            nightly_enabled=settings.consolidation_enabled,
            schedule_time=settings.schedule_time,
            retain_days=settings.retain_days,
            key_insights=settings.key_insights_count,
            min_importance=settings.rollup_min_importance,
            batch_summaries_enabled=settings.batch_summaries_enabled,
            schedule=settings.batch_summaries_schedule,
            interval_days=settings.interval_days,
            min_age_days=settings.min_age_days,
            max_memories_per_batch=settings.max_memories_per_batch,
            keep_original_days=settings.keep_original_days,
            max_input_tokens=settings.consolidation_max_input_tokens,
            tenant_cooldown_s=settings.tenant_cooldown_s,
            max_summary_jobs_per_run=settings.max_summary_jobs_per_run,
            max_concurrent_jobs_per_tenant=settings.max_concurrent_jobs_per_tenant,
            tenant_slot_retry_s=settings.tenant_slot_retry_s,
            monthly_cost_ceiling=settings.monthly_cost_ceiling,
            prices=settings.llm_prices,
        )

    @property
    def batch_interval_days(self) -> int:
        """Days between batch-summary runs: daily 1, weekly 7, next_run interval_days."""
        return {"daily": 1, "weekly": 7}.get(self.schedule, self.interval_days)
