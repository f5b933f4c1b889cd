"""The settings consolidation reads, checked once: MemorySettings' consolidation fields as one value."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from memory_agent.consolidation.periods import parse_schedule_time
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

    def __post_init__(self) -> None:
        parse_schedule_time(self.schedule_time)

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
        )

    @property
    def batch_interval_days(self) -> int:
        """Days between batch-summary runs: daily 1, weekly 7, next_run interval_days."""
        return {"daily": 1, "weekly": 7}.get(self.schedule, self.interval_days)
