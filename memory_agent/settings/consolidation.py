"""The settings of scheduled consolidation (nightly notes and rollups, batch summaries: docs/concepts/consolidation.md),
read by consolidation/."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from memory_agent.settings.base import CASE_INSENSITIVE, SettingsGroup


class ConsolidationSettings(SettingsGroup):
    """`settings.consolidation`: nightly compaction and rollups; batch summaries with retention."""

    consolidation_enabled: bool = Field(
        default=False,
        description="procrastinate executor: run the nightly consolidation (daily notes, weekly and monthly "
        "rollups, compaction) in `memory-agent worker` processes.",
    )
    schedule_time: str = Field(
        default="05:00",
        pattern=r"^([01][0-9]|2[0-3]):[0-5][0-9]$",
        description="HH:MM (UTC) of the nightly consolidation tick.",
    )
    retain_days: int = Field(
        default=30, ge=1, le=3650, description="Daily notes older than this are replaced by their compacted form."
    )
    consolidation_model: str | None = Field(
        default=None,
        description="Chat model that consolidates notes and batches, named as memory_model is (`provider:model`, a "
        "bare OpenAI name, `offline`). None: memory_model.",
    )
    key_insights_count: int = Field(default=5, ge=1, le=50, description="Top insights kept as a note's key_insights.")
    rollup_min_importance: float = Field(
        default=0.5,
        ge=0.0,
        le=1.0,
        description="Insights scored below this are left out of weekly and monthly rollups (kept in dailies).",
    )
    consolidation_max_input_tokens: int = Field(
        default=100_000,
        ge=1_000,
        le=10_000_000,
        description="Largest consolidation prompt, in tokens (count_tokens_approximately): a period with more "
        "material is consolidated in parts of at most this size, then the parts' insights together.",
    )
    batch_summaries_enabled: bool = Field(
        default=False, description="Summarize old long-term items in batches and forget originals after their TTL."
    )
    batch_summaries_schedule: Annotated[Literal["daily", "weekly", "next_run"], CASE_INSENSITIVE] = Field(
        default="daily",
        description="When batch summaries run per user: daily, weekly, or next_run (every interval_days).",
    )
    interval_days: int = Field(default=1, ge=1, le=365, description="next_run schedule: days between two runs.")
    min_age_days: int = Field(default=7, ge=0, le=3650, description="Only items older than this are summarized.")
    max_memories_per_batch: int = Field(default=50, ge=2, le=1000, description="Most items one batch summarizes.")
    keep_original_days: int = Field(
        default=365,
        ge=1,
        le=36500,
        description="Summarized originals older than this are forgotten (the summaries stay forever).",
    )

    @property
    def batch_interval_days(self) -> int:
        """Days between batch-summary runs: daily 1, weekly 7, next_run interval_days."""
        return {"daily": 1, "weekly": 7}.get(self.batch_summaries_schedule, self.interval_days)
