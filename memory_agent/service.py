"""MemoryService: the design's orchestrator. It opens and closes everything and delegates the rest.

Its own work is the lifecycle: the memory loop (runtime.py), the database (db/), the summarizer
(summarize/), the executor (jobs/), and wiring them to the round logic (conversation/). Every other
method validates its arguments and delegates; integrations/ reach it through the RoundMemory protocol.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage

from memory_agent.conversation.messages import round_identity, validate_conversation_id, validate_identity
from memory_agent.conversation.recalled import check_recall_settings, recall_settings
from memory_agent.conversation.rounds import Rounds
from memory_agent.conversation.trigger import SummaryTrigger
from memory_agent.conversation.window import calculate_summary_range
from memory_agent.db.backend import MemoryBackend
from memory_agent.db.connect import open_backend
from memory_agent.db.keys import DEFAULT_TENANT_ID, ConversationKey
from memory_agent.errors import InvalidInputError
from memory_agent.jobs.base import Executor, SummaryJobs
from memory_agent.jobs.executor import make_executor
from memory_agent.long_term.block import RecallHit
from memory_agent.long_term.recall import recall
from memory_agent.runtime import MemoryLoop
from memory_agent.schemas import ConversationContext, MemoryRecord, RoundInfo, RoundSaved, TriggerResult
from memory_agent.settings import MemorySettings
from memory_agent.summarize.agent import MemoryAgent
from memory_agent.summarize.models import default_summary_model
from memory_agent.summarize.runner import SummaryRunner

logger = logging.getLogger("memory_agent")


@dataclass(frozen=True)
class _Opened:
    """What exists while the service is open."""

    backend: MemoryBackend
    agent: MemoryAgent
    runner: SummaryRunner
    trigger: SummaryTrigger
    rounds: Rounds
    executor: Executor


class MemoryService:
    """Conversation memory over PostgreSQL. Use as `async with` (or `with`) to open and close it."""

    def __init__(
        self,
        settings: MemorySettings | None = None,
        *,
        model: BaseChatModel | None = None,
        database_url: str | None = None,
    ) -> None:
        self.settings = settings or MemorySettings()
        self._model = model
        self._database_url = database_url or self.settings.database_url
        self.database_url: str | None = None  # resolved at open (the embedded server's URI when unset)
        self._loop: MemoryLoop | None = None
        self._opened: _Opened | None = None

    @classmethod
    def from_settings(
        cls, settings: MemorySettings | None = None, *, model: BaseChatModel | None = None
    ) -> MemoryService:
        """A service for `settings` (default: from the environment) and summarizer `model`.

        `model` is any LangChain chat model; by default ChatOpenAI(settings.memory_model) when
        OPENAI_API_KEY or OPENAI_BASE_URL is set, the offline summarizer otherwise.
        """
        return cls(settings, model=model)

    # ------------------------------------------------------------------ lifecycle

    @property
    def _parts(self) -> _Opened:
        if self._opened is None:
            raise RuntimeError("MemoryService is not open; use `async with MemoryService.from_settings(...)`")
        return self._opened

    @property
    def loop(self) -> MemoryLoop:
        if self._loop is None:
            raise RuntimeError("MemoryService is not open; use `async with MemoryService.from_settings(...)`")
        return self._loop

    @property
    def backend(self) -> MemoryBackend:
        return self._parts.backend

    @property
    def agent(self) -> MemoryAgent:
        return self._parts.agent

    @property
    def executor(self) -> Executor:
        """The executor running background summaries (inline or procrastinate)."""
        return self._parts.executor

    def _resolve_database_url(self) -> str:
        if self._database_url:
            return self._database_url
        from memory_agent.db.embedded import start_embedded_postgres

        return start_embedded_postgres(self.settings.data_dir)

    async def _open_on_loop(self, url: str, loop: MemoryLoop) -> None:
        settings = self.settings
        self.database_url = url
        if settings.memory_rolling_window_size % 2:
            logger.warning(
                "MEMORY_AGENT_MEMORY_ROLLING_WINDOW_SIZE=%s is odd: a window starts at a round, so with "
                "user/assistant pairs it covers %s messages",
                settings.memory_rolling_window_size,
                settings.memory_rolling_window_size - 1,
            )
        backend = await open_backend(url, settings)
        try:
            agent = MemoryAgent(
                self._model or default_summary_model(settings),
                max_words=settings.memory_max_words,
                max_tokens=settings.memory_max_tokens_cap,
            )
            runner = SummaryRunner(settings, backend, agent)
            trigger = SummaryTrigger(settings, backend, dispatch=self._dispatch, enqueue=self._enqueue)
            executor = make_executor(settings, SummaryJobs(runner.run_summary, trigger.sweep), backend)
            rounds = Rounds(settings, backend, loop, trigger)
            await check_recall_settings(backend, recall_settings(settings))
            self._opened = _Opened(backend, agent, runner, trigger, rounds, executor)
            await executor.start()
        except BaseException:
            self._opened = None
            await backend.pool.close()
            raise

    async def _dispatch(self, memory_id: int, user_id: str) -> None:
        await self.executor.dispatch(memory_id, user_id)

    async def _enqueue(self, conn: Any, memory_id: int, user_id: str) -> None:
        await self.executor.enqueue(conn, memory_id, user_id)

    def open(self) -> MemoryService:
        """Start the memory loop, the database (embedded unless a URL is set), the pool and migrations."""
        if self._opened is not None:
            return self
        url = self._resolve_database_url()
        self._loop = MemoryLoop()
        try:
            self._loop.run(self._open_on_loop(url, self._loop))
        except BaseException:
            self._loop.stop()
            self._loop = None
            raise
        return self

    async def aopen(self) -> MemoryService:
        await asyncio.to_thread(self.open)
        return self

    async def _close_on_loop(self, timeout: float) -> None:
        if self._opened is None:
            return
        await self._opened.executor.drain(timeout)
        await self._opened.executor.stop()
        await self._opened.backend.pool.close()

    def close(self, timeout: float | None = None) -> None:
        """Drain in-flight summaries for up to `timeout` (default drain_timeout_s), then close."""
        if self._loop is None:
            return
        try:
            self._loop.run(self._close_on_loop(self.settings.drain_timeout_s if timeout is None else timeout))
        finally:
            self._loop.stop()
            self._loop = None
            self._opened = None

    async def aclose(self, timeout: float | None = None) -> None:
        await asyncio.to_thread(self.close, timeout)

    async def __aenter__(self) -> MemoryService:
        return await self.aopen()

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def __enter__(self) -> MemoryService:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def round_identity(self, config: Any) -> tuple[str, str | None, str | None]:
        """(thread id, user id, tenant id) of a run's config: `thread_id`, and the keys MEMORY_AGENT_USER_ID_KEY
        and MEMORY_AGENT_TENANT_ID_KEY name (default `user_id`, `tenant_id`); None where absent."""
        configurable = (config or {}).get("configurable") or {}
        return round_identity(configurable, self.settings.user_id_key, self.settings.tenant_id_key)

    def call_sync(self, coro: Any) -> Any:
        """Run one of this service's coroutines from synchronous code (used by the sync graph nodes)."""
        return self.loop.run(coro)

    # ------------------------------------------------------------------ round start

    async def _key(self, conversation_id: str, user_id: str | None, tenant_id: str | None) -> ConversationKey:
        """A round's key as given (no user → the conversation's own scope), checked like any round input."""
        validate_conversation_id(conversation_id)
        if user_id is not None:
            validate_identity(user_id, "user_id")
        if tenant_id is not None:
            validate_identity(tenant_id, "tenant_id")
        return ConversationKey.of(conversation_id, user_id, tenant_id)

    async def _owned(self, conversation_id: str, user_id: str | None, tenant_id: str | None) -> ConversationKey:
        """For reads and deletes by thread id: the given user, else the conversation's owner as recorded."""
        if user_id is not None or tenant_id is not None:
            return await self._key(conversation_id, user_id, tenant_id)
        validate_conversation_id(conversation_id)
        owner = await self.loop.arun(self.backend.conversation_owner(conversation_id))
        return ConversationKey(conversation_id, owner[1], owner[0]) if owner else ConversationKey.of(conversation_id)

    async def get_context_for_workflow(
        self,
        conversation_id: str,
        current_messages: Sequence[BaseMessage] | None = None,
        *,
        user_id: str | None = None,
        tenant_id: str | None = None,
    ) -> ConversationContext:
        """Latest completed memory + gap messages (stored after it); all stored messages when none.

        The design computed the gap by position in `current_messages`; here the gap is what the database
        holds after the memory, and `current_messages` (the graph's messages, earlier rounds included or not)
        gives the round's input: `context.current_messages` are those not stored yet, detected by message id
        as `prepare_round` does. Read only: no lease is taken, nothing is stored, no budget is applied.
        """
        key = await self._owned(conversation_id, user_id, tenant_id)
        return await self._parts.rounds.context(key, current_messages or [])

    async def prepare_round(
        self,
        conversation_id: str,
        messages: Sequence[BaseMessage],
        *,
        lease: str | None = None,
        user_id: str | None = None,
        tenant_id: str | None = None,
    ) -> tuple[list[BaseMessage], RoundInfo]:
        """Round start for any integration: take the conversation's lease, load memory + gap, and build the
        model's context (memory injected, token budget applied).

        `messages` is what the graph state holds: with a checkpointer the earlier rounds too. The round's input
        is every message of it not stored yet (by id), so a message is stored once whatever the state carries;
        it needs a user message. A resumed round passes the `lease` it holds. The round belongs to `user_id` in
        `tenant_id` (none: the conversation's own scope, tenant 'default'); a thread id belongs to one user and
        tenant: naming another raises ConversationOwnerError before anything is read or written.
        """
        key = await self._key(conversation_id, user_id, tenant_id)
        return await self._parts.rounds.prepare(key, messages, lease)

    async def release_round(self, info: RoundInfo) -> None:
        """Give the conversation's lease back (a round that failed, was cancelled or interrupted)."""
        await self._parts.rounds.release(info)

    # ------------------------------------------------------------------ round end

    def calculate_summary_range(
        self, last_saved_seq: int, round_starts: Sequence[int] | None = None
    ) -> tuple[int, int]:
        return calculate_summary_range(last_saved_seq, self.settings.memory_rolling_window_size, round_starts)

    async def finish_round(
        self,
        conversation_id: str,
        messages: Sequence[BaseMessage],
        info: RoundInfo | None = None,
        *,
        user_id: str | None = None,
        tenant_id: str | None = None,
    ) -> tuple[RoundSaved | None, TriggerResult]:
        """Persist a whole round, apply the trigger rule and record the round's metrics, in one transaction.

        Messages stored already (same id, same content) are not stored again; when none is new, nothing is
        written and the result is (None, outcome "nothing_new"). The summary (if one is due) starts after
        commit; this call never waits for it. The round's user is the one it started with (`info`), else
        `user_id` / `tenant_id` as for prepare_round.
        """
        if info is not None and info.conversation_id != conversation_id:
            raise InvalidInputError(
                f"finish_round for {conversation_id!r} was given the round of {info.conversation_id!r}"
            )
        key = info.key if info is not None else await self._key(conversation_id, user_id, tenant_id)
        return await self._parts.rounds.finish(key, messages, info)

    async def record_failed_round(self, info: RoundInfo, stage: str, error: BaseException) -> None:
        """Best effort: a metrics row for a round that failed at `stage` (nothing of it was stored)."""
        await self._parts.rounds.record_failed(info, stage, error)

    async def should_trigger_summary(
        self, conversation_id: str, last_saved_seq: int, *, user_id: str | None = None, tenant_id: str | None = None
    ) -> bool:
        """The design's rule, as the round end applies it: enough messages, new ones since the latest memory,
        and no summary in progress (a `processing` row quiet past processing_timeout_s is stale: it is
        reclaimed, so it does not count)."""
        key = await self._owned(conversation_id, user_id, tenant_id)
        return await self.loop.arun(self._parts.trigger.is_due(key, last_saved_seq))

    async def trigger_summarization_if_needed(
        self, conversation_id: str, last_saved_seq: int, *, user_id: str | None = None, tenant_id: str | None = None
    ) -> TriggerResult:
        """Apply the trigger rule after a round whose last stored message is `last_saved_seq`."""
        key = await self._owned(conversation_id, user_id, tenant_id)
        return await self.loop.arun(self._parts.trigger.trigger(key, last_saved_seq))

    async def sweep(self) -> list[int]:
        """Reclaim stale `processing` rows everywhere and re-run the trigger rule for their conversations."""
        return await self.loop.arun(self._parts.trigger.sweep())

    # ------------------------------------------------------------------ background summarization

    async def run_summary(self, memory_id: int, *, user_id: str) -> str:
        """Summarize one `processing` row (user_id, memory_id) to `completed` or `failed`. Never raises; returns
        the final status."""
        return await self.loop.arun(self._parts.runner.run_summary(memory_id, user_id))

    async def drain(self, timeout: float | None = None) -> bool:
        """Wait until this process has no summary in flight; True when everything finished in time."""
        return await self.loop.arun(self.executor.drain(timeout))

    # ------------------------------------------------------------------ reading

    async def get_memory_history(
        self, conversation_id: str, *, user_id: str | None = None, tenant_id: str | None = None
    ) -> list[MemoryRecord]:
        """Every memory version of a conversation, oldest first (its owner's unless a user is named)."""
        key = await self._owned(conversation_id, user_id, tenant_id)
        return await self.loop.arun(self.backend.list_memory(key.conversation_id, user_id=key.user_id))

    async def delete_conversation(
        self, conversation_id: str, *, user_id: str | None = None, tenant_id: str | None = None
    ) -> bool:
        """Delete a conversation, its messages and its memory versions; False when it did not exist."""
        key = await self._owned(conversation_id, user_id, tenant_id)
        return await self.loop.arun(self.backend.delete_conversation(key.conversation_id, user_id=key.user_id))

    async def recall(
        self,
        user_id: str,
        query: str,
        *,
        tenant_id: str | None = None,
        limit: int = 10,
        as_of: datetime | None = None,
    ) -> list[RecallHit]:
        """What recall at round start would find for `user_id` across their conversations and long-term items,
        best first, within the MEMORY_AGENT_RECALL_* guardrails: each hit's `kind` (turn | item | summary),
        `text`, `score` and provenance (`conversation_id` + `sequences`, `item_ids`, `sources`). `as_of` reads
        the items valid then. Never calls a model."""
        validate_identity(user_id, "user_id")
        if tenant_id is not None:
            validate_identity(tenant_id, "tenant_id")
        settings = recall_settings(self.settings)

        async def run() -> list[RecallHit]:
            async with self.backend.connection() as conn:
                found = await recall(
                    conn,
                    tenant_id=tenant_id or DEFAULT_TENANT_ID,
                    user_id=user_id,
                    query=query,
                    limit=limit,
                    as_of=as_of,
                    settings=settings,
                )
            return found.results

        return await self.loop.arun(run())

    async def get_memory(self, memory_id: int, *, user_id: str) -> MemoryRecord | None:
        """One memory version by its key (user_id, memory_id)."""
        return await self.loop.arun(self.backend.get_memory(memory_id, user_id=user_id))
