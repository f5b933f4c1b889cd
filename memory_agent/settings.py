"""MemorySettings: every knob of memory_agent, read from MEMORY_AGENT_* environment variables."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import platformdirs
from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


def default_data_dir() -> Path:
    return Path(platformdirs.user_cache_dir("memory_agent")) / "pgdata"


class MemorySettings(BaseSettings):
    """Settings; each field can be set as MEMORY_AGENT_<FIELD NAME> in the environment."""

    model_config = SettingsConfigDict(env_prefix="MEMORY_AGENT_", extra="ignore")

    # --- database ---
    database_url: str | None = Field(
        default=None,
        description="PostgreSQL URL. Unset: an embedded PostgreSQL is started under data_dir.",
    )
    db_schema: str = Field(
        default="memory_agent",
        pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,62}$",
        description="PostgreSQL schema holding every memory_agent table.",
    )
    data_dir: Path = Field(
        default_factory=default_data_dir,
        description="Data directory of the embedded PostgreSQL (reused across runs).",
    )
    pool_min_size: int = Field(default=1, ge=0, description="Connections the pool keeps open.")
    pool_max_size: int = Field(default=10, ge=1, description="Most connections the pool opens.")
    connect_timeout_s: float = Field(default=5.0, gt=0, description="Seconds to wait for a pooled connection.")

    # --- the sliding window (the design's names and defaults) ---
    memory_rolling_window_size: int = Field(default=14, ge=2, description="Messages a memory covers.")
    memory_summarize_after_seq: int = Field(
        default=5, ge=0, description="Summarize once the last saved sequence number reaches this."
    )
    memory_min_new_messages: int = Field(
        default=1,
        ge=1,
        description="New messages since the latest memory needed before another summary is started.",
    )
    memory_model: str = Field(default="gpt-4.1-mini", description="Chat model used by the summarizer.")
    memory_max_words: int = Field(default=250, ge=20, description="Length limit given to the summarizer.")
    memory_max_tokens: int | None = Field(
        default=None,
        ge=1,
        description="Hard cap on a stored memory, in tokens (count_tokens_approximately): a longer summary "
        "fails (the previous memory stays served) instead of being injected into every later round. "
        "None: 4 x memory_max_words.",
    )
    max_gap_messages: int | None = Field(
        default=None,
        ge=1,
        description="Most stored messages given to the model after the memory (the gap, or every message on "
        "the raw fallback), whole rounds dropped from the front: keeps rounds bounded while summaries fail or "
        "lag. None: 2 x memory_rolling_window_size.",
    )

    # --- context assembly ---
    injection_mode: Literal["prefix", "system"] = Field(
        default="prefix",
        description="prefix: '[Previous context: …]' before the first user message; system: a SystemMessage.",
    )
    max_context_tokens: int | None = Field(
        default=None,
        ge=1,
        description="Token budget of the model's context (memory + gap + input, count_tokens_approximately). "
        "Above it the gap is trimmed from its oldest round, never splitting a round nor dropping the "
        "current input. None: no budget.",
    )
    max_message_tokens: int | None = Field(
        default=None,
        ge=1,
        description="Longest single message given to the model, in tokens; a longer one is cut and ends with "
        "'… [truncated by memory_agent: N tokens over the cap]'. Stored messages stay whole. None: no cap.",
    )

    # --- background summarization ---
    executor: Literal["inline", "procrastinate"] = Field(
        default="inline",
        description="inline: a background task in this process; procrastinate: a job for `memory-agent worker`.",
    )
    summary_timeout_s: float = Field(default=120.0, gt=0, description="Limit for one summarizer model call.")
    summary_max_attempts: int = Field(default=3, ge=1, description="Model calls per summary before it fails.")
    summary_retry_backoff_s: float = Field(default=1.0, ge=0, description="First retry delay; doubles each retry.")
    processing_timeout_s: float = Field(
        default=300.0, gt=0, description="A `processing` row quiet for longer than this is reclaimed."
    )
    sweep_interval_s: float = Field(
        default=60.0, ge=0, description="inline executor: seconds between stale-row sweeps (0 turns the sweep off)."
    )
    sweep_cron: str = Field(
        default="* * * * * */30",
        description="procrastinate executor: cron (6th field = seconds) of the periodic stale-row sweep.",
    )
    drain_timeout_s: float = Field(default=30.0, ge=0, description="Grace period for in-flight summaries at close.")

    @property
    def memory_max_tokens_cap(self) -> int:
        return self.memory_max_tokens if self.memory_max_tokens is not None else 4 * self.memory_max_words

    @property
    def gap_message_cap(self) -> int:
        return self.max_gap_messages if self.max_gap_messages is not None else 2 * self.memory_rolling_window_size

    @model_validator(mode="after")
    def _check_pool(self) -> "MemorySettings":
        if self.pool_min_size > self.pool_max_size:
            raise ValueError(
                f"pool_min_size ({self.pool_min_size}) must not exceed pool_max_size ({self.pool_max_size})"
            )
        return self
