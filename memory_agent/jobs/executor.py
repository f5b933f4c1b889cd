"""The executor MEMORY_AGENT_EXECUTOR names (WorkerOptions, what the executors read of the settings, is in base.py
with the rest of what executors share; imported from here too)."""

from __future__ import annotations

from memory_agent.db.connector import Connector
from memory_agent.jobs.base import Executor, SummaryJobs, WorkerOptions


def make_executor(options: WorkerOptions, jobs: SummaryJobs, backend: Connector) -> Executor:
    """inline, or procrastinate (imported only then: an inline app never loads procrastinate)."""
    if options.jobs.executor == "inline":
        from memory_agent.jobs.inline import InlineExecutor

        return InlineExecutor(jobs, options.jobs.sweep_interval_s)
    if options.jobs.executor == "procrastinate":
        from memory_agent.jobs.procrastinate_executor import ProcrastinateExecutor

        return ProcrastinateExecutor(jobs, options, backend)
    raise ValueError(f"unknown executor {options.jobs.executor!r}; use 'inline' or 'procrastinate'")
