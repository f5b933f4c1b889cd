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
from datetime import tzinfo
from typing import Any, TypeVar

from langchain_core.messages import BaseMessage
from langchain_core.runnables import RunnableConfig

from memory_agent.conversation.memory import ConversationMemory
from memory_agent.integrations.base import RoundMemory
from memory_agent.schemas import RoundInfo, TriggerResult
from memory_agent.schemas.keys import ConversationKey

T = TypeVar("T")


class _NoopRounds:
    """The round start and end ConversationMemory runs (conversation/round_start.py, round_end.py), with nothing
    stored and nothing recalled: each round's model context is the messages given, unchanged."""

    async def prepare(
        self,
        key: ConversationKey,
        messages: Sequence[BaseMessage],
        lease: str | None,
        time_zone: tzinfo | None = None,  # nothing is recalled: no date to read in it
    ) -> tuple[list[BaseMessage], RoundInfo]:
        incoming = list(messages)
        return incoming, RoundInfo(
            conversation_id=key.conversation_id,
            user_id=key.user_id,
            tenant_id=key.tenant_id,
            input_messages=incoming,
            started=time.perf_counter(),
        )

    async def finish(
        self, key: ConversationKey, messages: Sequence[BaseMessage], info: RoundInfo | None
    ) -> tuple[None, TriggerResult]:
        return None, TriggerResult(outcome="nothing_new")

    async def held_lease(self, key: ConversationKey, reference: str) -> str | None:
        return None  # no lease is ever taken

    async def release(self, info: RoundInfo) -> None:
        return None

    async def record_failed(self, info: RoundInfo, stage: str, error: BaseException) -> None:
        return None


class NoopMemory(RoundMemory):
    """A RoundMemory with no database and no summaries: nothing is stored, nothing is recalled. Its rounds run
    through the conversation tier's own methods (their signatures written once, there)."""

    def __init__(self) -> None:
        rounds: Any = _NoopRounds()
        nothing: Any = None  # no memory loop, no database, no trigger: the rounds above touch none
        self._conversations = ConversationMemory(nothing, nothing, rounds, rounds, nothing)

    @property
    def conversations(self) -> ConversationMemory:
        return self._conversations

    def round_identity(self, config: RunnableConfig | None) -> tuple[str, str | None, str | None]:
        configurable = (config or {}).get("configurable") or {}
        return configurable["thread_id"], None, None

    def call_sync(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run the coroutine to its end on a loop of its own (from synchronous code with no loop running)."""
        return asyncio.run(coro)
