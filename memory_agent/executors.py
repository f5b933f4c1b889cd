"""Executors run a `processing` memory row to completion outside the user's round.

inline: a task on the service's memory loop (the default), plus a periodic stale-row sweep task.
procrastinate: a job in PostgreSQL run by `memory-agent worker` processes (see jobs.py).
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from memory_agent.service import MemoryService

logger = logging.getLogger("memory_agent.executors")


class Executor(Protocol):
    async def start(self) -> None: ...
    async def dispatch(self, memory_id: int, *, user_id: str) -> None: ...
    async def stop(self) -> None: ...


class InlineExecutor:
    """Summarizes in this process, as a background task that the round never waits for."""

    def __init__(self, service: "MemoryService") -> None:
        self.service = service
        self._sweeper: asyncio.Task[None] | None = None

    async def start(self) -> None:
        interval = self.service.settings.sweep_interval_s
        if interval > 0:
            self._sweeper = asyncio.get_running_loop().create_task(
                self._sweep_forever(interval), context=contextvars.Context()
            )

    async def _sweep_forever(self, interval: float) -> None:
        while True:
            await asyncio.sleep(interval)
            try:
                await self.service.sweep()
            except Exception as exc:  # the database may be briefly away; try again next time
                logger.warning("Stale-row sweep failed: %s", exc)

    async def dispatch(self, memory_id: int, *, user_id: str) -> None:
        self.service.spawn(memory_id, user_id=user_id)

    async def stop(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
            await asyncio.gather(self._sweeper, return_exceptions=True)
            self._sweeper = None


def make_executor(service: "MemoryService") -> Executor:
    kind = service.settings.executor
    if kind == "inline":
        return InlineExecutor(service)
    if kind == "procrastinate":
        from memory_agent.jobs import ProcrastinateExecutor

        return ProcrastinateExecutor(service)
    raise ValueError(f"unknown executor {kind!r}; use 'inline' or 'procrastinate'")
