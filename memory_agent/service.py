"""MemoryService: the design's orchestrator. It opens and closes everything and delegates the rest.

Its lifecycle (the memory loop, the database, the summarizer, the executor, wired to the round logic of
conversation/) is lifecycle.py's ServiceLifecycle; the reads are conversation_reads.py's and user_memory.py's.
Every method here validates its arguments and delegates; integrations/ reach it through the RoundMemory protocol.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.embeddings import Embeddings
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage

from memory_agent.conversation.identity import round_identity
from memory_agent.conversation.window import calculate_summary_range
from memory_agent.conversation_reads import ConversationReads
from memory_agent.db.tenancy import tenant_scope
from memory_agent.errors import InvalidInputError
from memory_agent.lifecycle import ServiceLifecycle
from memory_agent.schemas import ConversationContext, RoundInfo, RoundSaved, TriggerResult
from memory_agent.settings import MemorySettings
from memory_agent.user_memory import UserMemory


class MemoryService(ServiceLifecycle, ConversationReads, UserMemory):
    """Conversation memory over PostgreSQL. Use as `async with` (or `with`) to open and close it.

    `clock` gives the long-term tier its times (an item's valid_from / valid_to); default: UTC now. `embeddings`
    (any LangChain Embeddings) turns recall's vector path on; default: MEMORY_AGENT_EMBEDDINGS."""

    @classmethod
    def from_settings(
        cls,
        settings: MemorySettings | None = None,
        *,
        model: BaseChatModel | None = None,
        embeddings: Embeddings | None = None,
    ) -> MemoryService:
        """A service for `settings` (default: from the environment) and summarizer `model`.

        `model` is any LangChain chat model; by default ChatOpenAI(settings.memory.model) when
        OPENAI_API_KEY or OPENAI_BASE_URL is set, the offline summarizer otherwise. `embeddings` is any
        LangChain Embeddings for long-term items, cluster summaries and recall's vector fallback; by default
        the one MEMORY_AGENT_EMBEDDINGS names (none: vectors off).
        """
        return cls(settings, model=model, embeddings=embeddings)

    def round_identity(self, config: Any) -> tuple[str, str | None, str | None]:
        """(thread id, user id, tenant id) of a run's config: `thread_id`, and the keys MEMORY_AGENT_USER_ID_KEY
        and MEMORY_AGENT_TENANT_ID_KEY name (default `user_id`, `tenant_id`); None where absent."""
        configurable = (config or {}).get("configurable") or {}
        return round_identity(configurable, self.settings.rounds.user_id_key, self.settings.rounds.tenant_id_key)

    def call_sync(self, coro: Any) -> Any:
        """Run one of this service's coroutines from synchronous code (used by the sync graph nodes)."""
        return self.loop.run(coro)

    # ------------------------------------------------------------------ round start

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
        with tenant_scope(key.tenant_id):
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
        with tenant_scope(key.tenant_id):  # a role bound by row-level security names the tenant (db/tenancy.py)
            return await self._parts.rounds.prepare(key, messages, lease)

    async def release_round(self, info: RoundInfo) -> None:
        """Give the conversation's lease back (a round that failed, was cancelled or interrupted)."""
        with tenant_scope(info.key.tenant_id):
            await self._parts.rounds.release(info)

    # ------------------------------------------------------------------ round end

    def calculate_summary_range(
        self, last_saved_seq: int, round_starts: Sequence[int] | None = None
    ) -> tuple[int, int]:
        return calculate_summary_range(last_saved_seq, self.settings.memory.rolling_window_size, round_starts)

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
        with tenant_scope(key.tenant_id):  # the summary it dispatches inherits the scope
            return await self._parts.rounds.finish(key, messages, info)

    async def record_failed_round(self, info: RoundInfo, stage: str, error: BaseException) -> None:
        """Best effort: a metrics row for a round that failed at `stage` (nothing of it was stored)."""
        with tenant_scope(info.key.tenant_id):
            await self._parts.rounds.record_failed(info, stage, error)

    async def should_trigger_summary(
        self, conversation_id: str, last_saved_seq: int, *, user_id: str | None = None, tenant_id: str | None = None
    ) -> bool:
        """The design's rule, as the round end applies it: enough messages, new ones since the latest memory,
        and no summary in progress (a `processing` row quiet past processing_timeout_s is stale: it is
        reclaimed, so it does not count)."""
        key = await self._owned(conversation_id, user_id, tenant_id)
        with tenant_scope(key.tenant_id):
            return await self.loop.arun(self._parts.trigger.is_due(key, last_saved_seq))

    async def trigger_summarization_if_needed(
        self, conversation_id: str, last_saved_seq: int, *, user_id: str | None = None, tenant_id: str | None = None
    ) -> TriggerResult:
        """Apply the trigger rule after a round whose last stored message is `last_saved_seq`."""
        key = await self._owned(conversation_id, user_id, tenant_id)
        with tenant_scope(key.tenant_id):
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
