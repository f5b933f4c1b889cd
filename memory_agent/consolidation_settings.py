"""The settings of scheduled consolidation (nightly notes and rollups, batch summaries: docs/concepts/consolidation.md),
as a base class of MemorySettings under the tenant guards' (guard_settings.py): each field is a MEMORY_AGENT_*
variable like every other setting."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from memory_agent.guard_settings import GuardSettings


class ConsolidationSettings(GuardSettings):
    # --- scheduled consolidation (nightly compaction and rollups; batch summaries with retention) ---
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
        default=None, description="Chat model that consolidates notes and batches. None: memory_model."
    )
    key_insights_count: int = Field(default=5, ge=1, le=50, description="Top insights kept as a note's key_insights.")
    rollup_min_importance: float = Field(
        default=0.5,
        ge=0.0,
        le=1.0,
        description="Insights scored below this are left out of weekly and monthly rollups (kept in dailies).",
    )
    batch_summaries_enabled: bool = Field(
        default=False, description="Summarize old long-term items in batches and forget originals after their TTL."
    )
    batch_summaries_schedule: Literal["daily", "weekly", "next_run"] = Field(
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
