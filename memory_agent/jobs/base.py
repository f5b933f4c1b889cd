"""What executors are and what they run.

An Executor takes a new `processing` row (`dispatch`) and gets it summarized outside the user's round.
What summarizing and sweeping mean comes in as SummaryJobs, two coroutine functions: the executors know
nothing else of the service, so jobs/ imports neither the service nor the conversation rules.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any, Protocol

from memory_agent.schemas.started import StartedSummary
from memory_agent.settings import JobSettings


class RunSummary(Protocol):
    def __call__(
        self, memory_id: int, user_id: str, started: StartedSummary | None = None, *, strict: bool = False
    ) -> Coroutine[Any, Any, str]: ...


@dataclass(frozen=True)
class SummaryJobs:
    """The work an executor runs, both on the memory loop."""

    # One `processing` row, by its whole key (memory_id, user_id), to its final status. `started`: the row as its
    # claim picked it up (in-process executors), else the job picks it up (start_memory). Never raises, unless
    # `strict` (a job queue): then a summary that did not complete raises JobFailedError (retryable or not).
    run_summary: RunSummary
    sweep: Callable[[], Awaitable[list[int]]]  # reclaim stale rows, re-run the trigger rule; the reclaimed ids
    # The long-term safety net: refresh the cluster summaries whose inline refresh failed; how many it handled
    # (JobFailedError when a refresh or the embedding catch-up failed, after doing the rest).
    refresh_clusters: Callable[[], Awaitable[int]] | None = None
    # With an embedder: embed a user's turns (and items) that have no vector yet, by (tenant_id, user_id); never
    # raises (a failure is a WARNING and the periodic catch-up retries). None: vectors are off.
    embed_turns: Callable[[str, str], Awaitable[None]] | None = None


class Executor(Protocol):
    # True: `dispatch` runs the summary in this process right after commit, so the claim picks the row up (the
    # summary then starts without a statement of its own) and nothing is recorded in the transaction. False: the
    # job is recorded in the claiming transaction (`enqueue`) and a worker picks the row up.
    runs_in_process: bool

    async def start(self) -> None: ...

    async def enqueue(self, conn: Any, memory_id: int, user_id: str, tenant_id: str) -> None:
        """Inside the transaction that claimed `memory_id` (on its connection `conn`): a queue kept in
        PostgreSQL records the job here, so the row and its job commit together. The job names its tenant: a role
        bound by row-level security sees and erases its tenant's jobs only (grant_bound_role,
        docs/concepts/privacy.md)."""
        ...

    async def dispatch(self, memory_id: int, user_id: str, started: StartedSummary | None = None) -> None:
        """Get memory (user_id, memory_id) summarized; called on the memory loop after the round's commit.
        `started`: the row as its claim picked it up (runs_in_process executors only)."""
        ...

    async def embed(self, user_id: str, tenant_id: str) -> None:
        """After a round that stored messages and started no summary (a summary embeds them itself): get the
        user's new turns their vectors (`SummaryJobs.embed_turns`), outside the round; requests for a user whose
        embedding is pending are coalesced. Called after the round's commit: never raises."""
        ...

    async def drain(self, timeout: float | None) -> bool:
        """Wait until this process has no summary or embedding in flight; True when everything finished in
        time."""
        ...

    async def stop(self) -> None:
        """Stop; a summary still running in this process is cancelled (its row is reclaimed later)."""
        ...


@dataclass(frozen=True)
class WorkerOptions:
    """What the executors read of the settings, as one value built where the settings are read (the service's
    wiring), as procrastinate's workers take theirs: the jobs group (the executor, the sweep's interval and cron),
    whether procrastinate's schema is migrated at start (MEMORY_AGENT_AUTO_MIGRATE), and what makes the
    consolidation tasks' runner on the pool (None: consolidation and batch summaries are off)."""

    jobs: JobSettings
    auto_migrate: bool = True
    consolidation: Callable[[Any], Any] | None = None
