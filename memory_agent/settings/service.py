"""The settings of the running service: its background work (read by jobs/ and the lifecycle) and its HTTP API
(read by api/)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from memory_agent.settings.base import CASE_INSENSITIVE, MAX_SECONDS, SettingsGroup

# The design's 5 minutes; sql/definitions' processing_timeout() falls back to the same for a session (psql) that
# does not set it.
DEFAULT_PROCESSING_TIMEOUT_S = 300.0


class JobSettings(SettingsGroup):
    """`settings.jobs`: where summaries run, how stale work is reclaimed, and the service's event loop."""

    executor: Annotated[Literal["inline", "procrastinate"], CASE_INSENSITIVE] = Field(
        default="inline",
        description="inline: a background task in this process; procrastinate: a job for `memory-agent worker`.",
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
    finished_job_retention_h: int = Field(
        default=24,
        ge=0,
        le=100_000,
        description="procrastinate executor: finished jobs (succeeded, failed, cancelled, aborted) of memory_agent's "
        "queue are removed this many hours after they ended, by an hourly periodic job: the job table "
        "stays bounded (a round defers jobs), and a job that was running when its user was forgotten stops naming "
        "them.",
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


class ApiSettings(SettingsGroup):
    """`settings.api`: the HTTP API's bounds on what it reads."""

    api_max_body_bytes: int = Field(
        default=1_048_576,
        ge=1_024,
        le=1_073_741_824,
        description="HTTP API: largest request body, in bytes; a larger one is answered 413 without being read "
        "(and a body from a request without a live key is never read: 401 first).",
    )


class TracingSettings(SettingsGroup):
    """`settings.tracing`: what OpenTelemetry spans say of whom (memory_agent/tracing.py)."""

    trace_identity: Literal["hashed", "plain", "omitted"] = Field(
        default="hashed",
        description="Spans: how the user, tenant and conversation ids appear on them: hashed (SHA-256, 16 hex "
        "digits; spans of one user still correlate), plain, or omitted. Process-wide, like the tracer provider.",
    )
