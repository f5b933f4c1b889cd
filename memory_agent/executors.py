"""Executors run a `processing` memory row to completion outside the user's round.

inline: a task on the service's memory loop (the default).
procrastinate: a job in PostgreSQL, run by `memory-agent worker` processes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from memory_agent.service import MemoryService


class Executor(Protocol):
    async def start(self) -> None: ...
    def dispatch(self, memory_id: int) -> None: ...
    async def stop(self) -> None: ...


class InlineExecutor:
    """Summarizes in this process, as a background task that the round never waits for."""

    def __init__(self, service: "MemoryService") -> None:
        self.service = service

    async def start(self) -> None:
        return None

    def dispatch(self, memory_id: int) -> None:
        self.service.spawn(memory_id)

    async def stop(self) -> None:
        return None


def make_executor(service: "MemoryService") -> Executor:
    kind = service.settings.executor
    if kind == "inline":
        return InlineExecutor(service)
    if kind == "procrastinate":
        from memory_agent.jobs import ProcrastinateExecutor

        return ProcrastinateExecutor(service)
    raise ValueError(f"unknown executor {kind!r}; use 'inline' or 'procrastinate'")
