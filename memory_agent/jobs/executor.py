"""The executor MEMORY_AGENT_EXECUTOR names."""

from __future__ import annotations

from memory_agent.db.connector import Connector
from memory_agent.jobs.base import Executor, SummaryJobs
from memory_agent.settings import MemorySettings


def make_executor(settings: MemorySettings, jobs: SummaryJobs, backend: Connector) -> Executor:
    """inline, or procrastinate (imported only then: an inline app never loads procrastinate)."""
    if settings.jobs.executor == "inline":
        from memory_agent.jobs.inline import InlineExecutor

        return InlineExecutor(jobs, settings.jobs.sweep_interval_s)
    if settings.jobs.executor == "procrastinate":
        from memory_agent.jobs.procrastinate_executor import ProcrastinateExecutor

        return ProcrastinateExecutor(jobs, settings, backend)
    raise ValueError(f"unknown executor {settings.jobs.executor!r}; use 'inline' or 'procrastinate'")
