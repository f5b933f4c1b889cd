"""A memory that remembers nothing, for tests and benchmarks.

NoopMemory implements the RoundMemory protocol with no database and no summaries: `with_memory(graph,
NoopMemory())` runs a graph through the integration alone, which is what the benchmarks subtract to measure the
wrapper's own cost, and what a test of an app's graph can use when memory is beside the point. Each round's
model context is the messages given, unchanged.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Coroutine, Sequence
from typing import Any, TypeVar

from langchain_core.messages import BaseMessage
from langchain_core.runnables import RunnableConfig

from memory_agent.integrations.base import RoundMemory
from memory_agent.schemas import RoundInfo

T = TypeVar("T")


class NoopMemory(RoundMemory):
    """A RoundMemory with no database and no summaries: nothing is stored, nothing is recalled."""

    async def prepare_round(
        self,
        conversation_id: str,
        messages: Sequence[BaseMessage],
        *,
        lease: str | None = None,
        user_id: str | None = None,
        tenant_id: str | None = None,
    ) -> tuple[list[BaseMessage], RoundInfo]:
        incoming = list(messages)
        return incoming, RoundInfo(
            conversation_id=conversation_id,
            user_id=user_id,
            tenant_id=tenant_id,
            input_messages=incoming,
            started=time.perf_counter(),
        )

    async def finish_round(
        self, conversation_id: str, messages: Sequence[BaseMessage], info: RoundInfo | None = None
    ) -> None:
        return None

    async def record_failed_round(self, info: RoundInfo, stage: str, error: BaseException) -> None:
        return None

    async def release_round(self, info: RoundInfo) -> None:
        return None

    def round_identity(self, config: RunnableConfig | None) -> tuple[str, str | None, str | None]:
        configurable = (config or {}).get("configurable") or {}
        return configurable["thread_id"], None, None

    def call_sync(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run the coroutine to its end on a loop of its own (from synchronous code with no loop running)."""
        return asyncio.run(coro)
