"""Stand-ins for tests and benchmarks: a memory that remembers nothing, and many conversations written at once.

NoopMemory implements the RoundMemory protocol with no database and no summaries: `with_memory(graph,
NoopMemory())` runs a graph through the integration alone, which is what the benchmarks subtract to measure the
wrapper's own cost, and what a test of an app's graph can use when memory is beside the point. Each round's
model context is the messages given, unchanged.
generate_conversations fills an empty, migrated schema with thousands of conversations shaped like rounds run
through `with_memory` (sql/queries/testing.sql), for the health and observability tests and benchmarks.
May import: integrations/ (the protocol), schemas, resources, errors. Nothing imports it but tests and benchmarks.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Coroutine, Sequence
from typing import Any, TypeVar

import psycopg
from langchain_core.messages import BaseMessage
from langchain_core.runnables import RunnableConfig

from memory_agent import resources
from memory_agent.conversation.memory import ConversationMemory
from memory_agent.db.connector import fetch_one_sync
from memory_agent.integrations.base import RoundMemory
from memory_agent.schemas import RoundInfo, TriggerResult
from memory_agent.schemas.keys import ConversationKey

T = TypeVar("T")


class _NoopRounds:
    """The round start and end ConversationMemory runs (conversation/round_start.py, round_end.py), with nothing
    stored and nothing recalled: each round's model context is the messages given, unchanged."""

    async def prepare(
        self, key: ConversationKey, messages: Sequence[BaseMessage], lease: str | None
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


def generate_conversations(url: str, conversations: int, rounds: int, schema: str = "memory_agent") -> dict[str, Any]:
    """Fill the migrated, empty `schema` at `url` with `conversations` of `rounds` rounds each (what each one holds:
    sql/queries/testing.sql); returns row counts and the seconds each step took."""
    blocks = resources.parse_queries((resources.queries_dir() / "testing.sql").read_text(encoding="utf-8"))
    timings: dict[str, float] = {}
    params = {"conversations": conversations, "rounds": rounds}
    with psycopg.connect(url, autocommit=True) as conn:
        fetch_one_sync(conn, psycopg.sql.SQL("SET search_path TO {}, public").format(psycopg.sql.Identifier(schema)))
        fetch_one_sync(conn, "generate_fast_writes")
        # Skipping the per-row foreign-key triggers halves the load. Only a superuser may; elsewhere the load just
        # takes longer.
        with contextlib.suppress(psycopg.Error):
            fetch_one_sync(conn, "generate_without_triggers")
        for name in blocks:
            if name.startswith("scale_"):
                started = time.perf_counter()
                fetch_one_sync(conn, name, params)
                timings[name] = time.perf_counter() - started
        started = time.perf_counter()
        fetch_one_sync(conn, "generated_statistics")
        timings["vacuum_analyze"] = time.perf_counter() - started
        counts = fetch_one_sync(conn, "generated_counts")
    assert counts is not None
    return {**counts, "generate_s": {name: round(seconds, 2) for name, seconds in timings.items()}}
