"""The executor MEMORY_AGENT_EXECUTOR names, and WorkerOptions: what the executors read of the settings."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from memory_agent.db.connector import Connector
from memory_agent.jobs.base import Executor, SummaryJobs
from memory_agent.settings import JobSettings


@dataclass(frozen=True)
class WorkerOptions:
    """What the executors read of the settings, as one value built where the settings are read (the service's
    wiring), as procrastinate's workers take theirs: the jobs group (the executor, the sweep's interval and cron),
    whether procrastinate's schema is migrated at start (MEMORY_AGENT_AUTO_MIGRATE), and what makes the
    consolidation tasks' runner on the pool (None: consolidation and batch summaries are off)."""

    jobs: JobSettings
    auto_migrate: bool = True
    consolidation: Callable[[Any], Any] | None = None


def make_executor(options: WorkerOptions, jobs: SummaryJobs, backend: Connector) -> Executor:
    """inline, or procrastinate (imported only then: an inline app never loads procrastinate)."""
    if options.jobs.executor == "inline":
        from memory_agent.jobs.inline import InlineExecutor

        return InlineExecutor(jobs, options.jobs.sweep_interval_s)
    if options.jobs.executor == "procrastinate":
        from memory_agent.jobs.procrastinate_executor import ProcrastinateExecutor

        return ProcrastinateExecutor(jobs, options, backend)
    raise ValueError(f"unknown executor {options.jobs.executor!r}; use 'inline' or 'procrastinate'")
