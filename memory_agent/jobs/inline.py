"""InlineExecutor (the default): a summary is a task on the service's memory loop, detached from the
round that started it, and so is the embedding of a round's turns (one per user at a time); plus a periodic task:
the stale-row sweep, then the cluster summaries' safety net."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from memory_agent import tracing
from memory_agent.jobs.base import SummaryJobs
from memory_agent.runtime import PeriodicTask
from memory_agent.schemas.started import StartedSummary

logger = logging.getLogger("memory_agent.executors")


class InlineExecutor:
    """Summarizes in this process, as a background task that the round never waits for."""

    runs_in_process = True

    def __init__(self, jobs: SummaryJobs, sweep_interval_s: float) -> None:
        self.jobs = jobs
        self.sweep_interval_s = sweep_interval_s
        steps: list[tuple[str, Callable[[], Awaitable[Any]]]] = [("Stale-row sweep", jobs.sweep)]
        if jobs.refresh_clusters is not None:
            steps.append(("Cluster summary refresh", jobs.refresh_clusters))
        self._sweeper = PeriodicTask(sweep_interval_s, steps, logger)
        self._tasks: set[asyncio.Task[Any]] = set()
        # (tenant_id, user_id) → whether a round asked again while that user's embedding ran.
        self._embedding: dict[tuple[str, str], bool] = {}

    async def start(self) -> None:
        self._sweeper.start()

    async def enqueue(self, conn: Any, memory_id: int, user_id: str, tenant_id: str) -> None:
        """Nothing to record: the task starts after commit (a crash in between is reclaimed by the sweep)."""

    async def dispatch(self, memory_id: int, user_id: str, started: StartedSummary | None = None) -> None:
        # A fresh context: the summarizer must not inherit the round's callbacks (streams, tracing); only the
        # round's span goes with it, for the summary's span to link to.
        task = asyncio.get_running_loop().create_task(
            self.jobs.run_summary(memory_id, user_id, started), context=tracing.context_linked_to_round()
        )
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def embed(self, user_id: str, tenant_id: str) -> None:
        if self.jobs.embed_turns is None:
            return
        key = (tenant_id, user_id)
        if key in self._embedding:  # one in flight reads what has no vector when it is done: once more then
            self._embedding[key] = True
            return
        self._embedding[key] = False
        task = asyncio.get_running_loop().create_task(
            self._embed_until_done(key, self.jobs.embed_turns), context=tracing.context_linked_to_round()
        )
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _embed_until_done(self, key: tuple[str, str], embed_turns: Callable[[str, str], Awaitable[None]]) -> None:
        try:
            while True:
                await embed_turns(*key)
                if not self._embedding.get(key):
                    return
                self._embedding[key] = False
        finally:
            self._embedding.pop(key, None)

    async def drain(self, timeout: float | None) -> bool:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self._tasks:
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                return False
            _, pending = await asyncio.wait(set(self._tasks), timeout=remaining)
            if pending and deadline is not None and time.monotonic() >= deadline:
                return False
        return True

    async def stop(self) -> None:
        await self._sweeper.stop()
        for task in list(self._tasks):
            # Past the grace period: the row stays `processing` and is reclaimed after processing_timeout_s.
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
