"""MemoryService: opens and closes everything (a Lifecycle, lifecycle.py) and delegates the rest.

Its public methods are the API: each is a delegation to the facade of its tier, made when the service opens —
`memory.conversations` (conversation/memory.py: round start and end, the trigger rule, memory versions) and
`memory.long_term` (long_term/memory.py: items, forgetting, recall). integrations/ reach the service through the
RoundMemory protocol.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Self

from langchain_core.embeddings import Embeddings
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage

from memory_agent.conversation.identity import round_identity
from memory_agent.conversation.memory import ConversationMemory
from memory_agent.conversation.window import calculate_summary_range
from memory_agent.db.backend import MemoryBackend
from memory_agent.errors import InvalidInputError
from memory_agent.jobs.base import Executor
from memory_agent.long_term import ForgetReport, LongTermItem
from memory_agent.long_term.cluster_text import ClusterSummarizer
from memory_agent.long_term.memory import LongTermMemory, user_scope
from memory_agent.long_term.recall import RecallHit, RecallResult, RecallSettings
from memory_agent.runtime import MemoryLoop
from memory_agent.schemas import ConversationContext, MemoryRecord, RoundInfo, RoundSaved, TriggerResult
from memory_agent.service.lifecycle import Lifecycle
from memory_agent.settings import MemorySettings
from memory_agent.summarize.agent import MemoryAgent

if TYPE_CHECKING:
    from memory_agent.integrations.retriever import MemoryRetriever


class MemoryService:
    """Conversation memory over PostgreSQL. Use as `async with` (or `with`) to open and close it.

    `clock` gives the long-term tier its times (an item's valid_from / valid_to); default: UTC now. `embeddings`
    (any LangChain Embeddings) turns recall's vector path on; default: MEMORY_AGENT_EMBEDDINGS."""

    def __init__(
        self,
        settings: MemorySettings | None = None,
        *,
        model: BaseChatModel | None = None,
        database_url: str | None = None,
        clock: Callable[[], datetime] | None = None,
        embeddings: Embeddings | None = None,
    ) -> None:
        self.settings = settings or MemorySettings()
        self._lifecycle = Lifecycle(
            self.settings, model=model, database_url=database_url, clock=clock, embeddings=embeddings
        )
        self.clock = self._lifecycle.clock

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

    # ------------------------------------------------------------------ lifecycle

    def open(self) -> Self:
        """Start the memory loop, the database (embedded unless a URL is set), the pool and migrations. Opened
        here, without an event loop to attach to, the memory loop has a thread of its own whatever
        MEMORY_AGENT_EVENT_LOOP says (`caller` applies to aopen)."""
        self._lifecycle.open()
        return self

    async def aopen(self) -> Self:
        """As open(); with MEMORY_AGENT_EVENT_LOOP=caller the pool and the summaries run on this event loop."""
        await self._lifecycle.aopen()
        return self

    def close(self, timeout: float | None = None) -> None:
        """Drain in-flight summaries for up to `timeout` (default drain_timeout_s), then close."""
        self._lifecycle.close(timeout)

    async def aclose(self, timeout: float | None = None) -> None:
        await self._lifecycle.aclose(timeout)

    async def __aenter__(self) -> Self:
        return await self.aopen()

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def __enter__(self) -> Self:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def database_url(self) -> str | None:
        """The database the open service uses (the embedded server's URI when no URL was set); None before open."""
        return self._lifecycle.database_url

    @property
    def loop(self) -> MemoryLoop:
        return self._lifecycle.loop

    @property
    def backend(self) -> MemoryBackend:
        return self._lifecycle.parts.backend

    @property
    def agent(self) -> MemoryAgent:
        return self._lifecycle.parts.agent

    @property
    def cluster_summarizer(self) -> ClusterSummarizer:
        """What writes cluster summaries: the summary model, or the offline one's deterministic counterpart."""
        return self._lifecycle.parts.runner.cluster_summarizer

    @property
    def embedder(self) -> Embeddings | None:
        """What embeds items, summaries and recall's query: the `embeddings` given, else MEMORY_AGENT_EMBEDDINGS's
        (None: vectors off)."""
        return self._lifecycle.parts.embedder

    @property
    def executor(self) -> Executor:
        """The executor running background summaries (inline or procrastinate)."""
        return self._lifecycle.parts.executor

    @property
    def conversations(self) -> ConversationMemory:
        """The conversation tier while open: round start and end, the trigger rule, memory versions."""
        return self._lifecycle.parts.conversations

    @property
    def long_term(self) -> LongTermMemory:
        """The long-term tier while open: a user's items, forgetting, recall."""
        return self._lifecycle.parts.long_term

    def round_identity(self, config: Any) -> tuple[str, str | None, str | None]:
        """(thread id, user id, tenant id) of a run's config: `thread_id`, and the keys MEMORY_AGENT_USER_ID_KEY
        and MEMORY_AGENT_TENANT_ID_KEY name (default `user_id`, `tenant_id`); None where absent."""
        configurable = (config or {}).get("configurable") or {}
        return round_identity(configurable, self.settings.rounds.user_id_key, self.settings.rounds.tenant_id_key)

    def call_sync(self, coro: Any) -> Any:
        """Run one of this service's coroutines from synchronous code (used by the sync graph nodes)."""
        return self.loop.run(coro)

    # ------------------------------------------------------------------ conversation memory

    async def get_context_for_workflow(
        self,
        conversation_id: str,
        current_messages: Sequence[BaseMessage] | None = None,
        *,
        user_id: str | None = None,
        tenant_id: str | None = None,
    ) -> ConversationContext:
        """Latest completed memory + gap messages (stored after it); all stored messages when none.

        Read only (no lease, nothing stored, no budget); `context.current_messages` are the given messages not
        stored yet, by id (memory.conversations.context says more)."""
        return await self.conversations.context(conversation_id, current_messages, user_id=user_id, tenant_id=tenant_id)

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

        `messages` is the graph state (with a checkpointer, the earlier rounds too): those not stored yet (by id)
        are the round's input. A thread id belongs to one user and tenant: naming another raises
        ConversationOwnerError before anything is read or written (memory.conversations.prepare says more)."""
        return await self.conversations.prepare(
            conversation_id, messages, lease=lease, user_id=user_id, tenant_id=tenant_id
        )

    async def release_round(self, info: RoundInfo) -> None:
        """Give the conversation's lease back (a round that failed, was cancelled or interrupted)."""
        await self.conversations.release(info)

    def calculate_summary_range(
        self, last_saved_seq: int, round_starts: Sequence[int] | None = None
    ) -> tuple[int, int]:
        """(start, end) sequences of the window a summary after `last_saved_seq` covers (window.py)."""
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

        Messages stored already are not stored again (none new: (None, outcome "nothing_new")); a due summary
        starts after commit, never awaited here (memory.conversations.finish says more)."""
        return await self.conversations.finish(conversation_id, messages, info, user_id=user_id, tenant_id=tenant_id)

    async def record_failed_round(self, info: RoundInfo, stage: str, error: BaseException) -> None:
        """Best effort: a metrics row for a round that failed at `stage` (nothing of it was stored)."""
        await self.conversations.record_failed(info, stage, error)

    async def should_trigger_summary(
        self, conversation_id: str, last_saved_seq: int, *, user_id: str | None = None, tenant_id: str | None = None
    ) -> bool:
        """The trigger rule, as the round end applies it: enough messages, new ones since the latest memory,
        and no summary in progress (a `processing` row quiet past processing_timeout_s is stale: it is
        reclaimed, so it does not count)."""
        return await self.conversations.summary_due(
            conversation_id, last_saved_seq, user_id=user_id, tenant_id=tenant_id
        )

    async def trigger_summarization_if_needed(
        self, conversation_id: str, last_saved_seq: int, *, user_id: str | None = None, tenant_id: str | None = None
    ) -> TriggerResult:
        """Apply the trigger rule after a round whose last stored message is `last_saved_seq`."""
        return await self.conversations.trigger_summary(
            conversation_id, last_saved_seq, user_id=user_id, tenant_id=tenant_id
        )

    async def sweep(self) -> list[int]:
        """Reclaim stale `processing` rows everywhere and re-run the trigger rule for their conversations."""
        return await self.conversations.sweep()

    async def run_summary(self, memory_id: int, *, user_id: str) -> str:
        """Summarize one `processing` row (user_id, memory_id) to `completed` or `failed`. Never raises; returns
        the final status."""
        return await self.loop.arun(self._lifecycle.parts.runner.run_summary(memory_id, user_id))

    async def drain(self, timeout: float | None = None) -> bool:
        """Wait until this process has no summary in flight; True when everything finished in time."""
        return await self.loop.arun(self.executor.drain(timeout))

    async def get_memory_history(
        self, conversation_id: str, *, user_id: str | None = None, tenant_id: str | None = None
    ) -> list[MemoryRecord]:
        """Every memory version of a conversation, oldest first (its owner's unless a user is named)."""
        return await self.conversations.history(conversation_id, user_id=user_id, tenant_id=tenant_id)

    async def get_memory(self, memory_id: int, *, user_id: str) -> MemoryRecord | None:
        """One memory version by its key (user_id, memory_id)."""
        return await self.conversations.get_memory(memory_id, user_id=user_id)

    async def delete_conversation(
        self, conversation_id: str, *, user_id: str | None = None, tenant_id: str | None = None
    ) -> bool:
        """Delete a conversation and everything derived from it, in one transaction: its messages, memory versions
        and metrics, the long-term items only it sourced (lineage of the others), the cluster summaries built
        from an erased item (regenerated without it, or removed below summary_min_cluster_items), the
        consolidation notes and batch summaries made from it (made again by their next run without it), and its
        summary jobs' rows. False when it did not exist."""
        key = await self.conversations.owned(conversation_id, user_id, tenant_id)
        return await self.long_term.forget_conversation(key)

    # ------------------------------------------------------------------ long-term memory

    async def list_items(
        self, user_id: str, *, tenant_id: str | None = None, as_of: datetime | None = None
    ) -> list[LongTermItem]:
        """The user's long-term items current now (cluster summaries included), or those held at `as_of`
        (items only: summaries are a view of the present); most important first."""
        return await self.long_term.list_items(user_id, tenant_id=tenant_id, as_of=as_of)

    async def forget_item(self, user_id: str, item_id: int, *, tenant_id: str | None = None) -> ForgetReport:
        """Erase one item version of the user (a cluster summary: with the members it stands for) and regenerate
        the summaries built from it; an unknown id erases nothing."""
        return await self.long_term.forget_item(user_id, item_id, tenant_id=tenant_id)

    async def forget_user(self, user_id: str, *, tenant_id: str | None = None) -> ForgetReport:
        """Erase every long-term row of the user in the tenant and every conversation of theirs."""
        return await self.long_term.forget_user(user_id, tenant_id=tenant_id)

    @property
    def recall_settings(self) -> RecallSettings:
        """Recall's knobs as the MEMORY_AGENT_RECALL_* settings give them (every read surface uses these)."""
        return self.settings.recall

    async def recall(
        self,
        user_id: str,
        query: str,
        *,
        tenant_id: str | None = None,
        limit: int = 10,
        as_of: datetime | None = None,
        recent_fallback: bool = True,
    ) -> list[RecallHit]:
        """What recall at round start would find for `user_id` across their conversations and long-term items,
        best first, within the MEMORY_AGENT_RECALL_* guardrails: hits of kind turn, item or summary, each with its
        provenance. Nothing found: the latest turns of the user's most recent conversation, unless
        `recent_fallback=False` (memory.long_term.recall says more). Never calls a chat model."""
        found = await self.recall_result(
            user_id, query, tenant_id=tenant_id, limit=limit, as_of=as_of, recent_fallback=recent_fallback
        )
        return found.results

    async def recall_result(
        self,
        user_id: str,
        query: str,
        *,
        tenant_id: str | None = None,
        limit: int = 10,
        as_of: datetime | None = None,
        recent_fallback: bool = True,
    ) -> RecallResult:
        """recall() with everything recall measured: the hits, the rendered block as a round would inject it,
        the paths that ran, the block's estimated tokens, whether a guardrail cut it."""
        return await self.long_term.recall(
            user_id, query, tenant_id=tenant_id, limit=limit, as_of=as_of, recent_fallback=recent_fallback
        )

    def as_retriever(
        self, *, user_id: str, tenant_id: str | None = None, k: int = 10, as_of: datetime | None = None
    ) -> MemoryRetriever:
        """A LangChain retriever over recall for `user_id`: Documents in recall's order, each hit's provenance
        in its metadata (integrations/retriever.py); nothing when nothing matches (no recent-turns fallback)."""
        from memory_agent.integrations.retriever import MemoryRetriever

        user_scope(user_id, tenant_id)
        if not isinstance(k, int) or isinstance(k, bool) or k < 1:
            raise InvalidInputError(
                f"k (the number of memories a retriever returns) must be an integer >= 1, got {k!r}"
            )
        return MemoryRetriever(memory=self, user_id=user_id, tenant_id=tenant_id, k=k, as_of=as_of)
