"""MemoryService: opens and closes everything (a Lifecycle, _lifecycle.py) and hands out the tiers' facades.

Each operation has one name, on one object: the conversation tier's on `memory.conversations`
(conversation/memory.py: round start and end, the trigger rule, memory versions), the long-term tier's on
`memory.long_term` (long_term/memory.py: items, forgetting, recall), imports and exports on `memory.transfers`
(_transfers.py). The service itself keeps what spans the tiers (delete_conversation, as_retriever), the summaries
this process runs (run_summary, drain) and what integrations/ reach it by (the RoundMemory protocol:
`conversations`, round_identity, call_sync).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any, Self

from langchain_core.embeddings import Embeddings
from langchain_core.language_models import BaseChatModel

from memory_agent.conversation.identity import round_identity
from memory_agent.conversation.memory import ConversationMemory
from memory_agent.errors import InvalidInputError
from memory_agent.jobs.base import Executor
from memory_agent.long_term.cluster_text import ClusterSummarizer
from memory_agent.long_term.memory import LongTermMemory, user_scope
from memory_agent.runtime import MemoryLoop
from memory_agent.service._lifecycle import Lifecycle
from memory_agent.service._transfers import Transfers
from memory_agent.service.backend import MemoryBackend
from memory_agent.settings import MemorySettings
from memory_agent.summarize.agent import MemoryAgent

if TYPE_CHECKING:
    from memory_agent.integrations.retriever import MemoryRetriever

# Where each operation the service once repeated lives now: its name on its tier's facade.
MOVED = {
    **{name: f"conversations.{name}" for name in ("get_context_for_workflow", "prepare_round", "release_round")},
    **{name: f"conversations.{name}" for name in ("finish_round", "record_failed_round", "should_trigger_summary")},
    **{name: f"conversations.{name}" for name in ("trigger_summarization_if_needed", "sweep", "get_memory")},
    "get_memory_history": "conversations.get_memory_history",
    **{name: f"long_term.{name}" for name in ("list_items", "remember", "forget_item", "forget_user")},
    **{name: f"long_term.{name}" for name in ("remember_sync", "recall_sync")},
    "recall": "long_term.recall (its .results are the hits)",
    "recall_result": "long_term.recall",
    "recall_settings": "settings.recall",
    **{name: f"transfers.{name}" for name in ("import_messages", "import_thread", "export_user", "import_user")},
}


class MemoryService:
    """Conversation memory over PostgreSQL. Use as `async with` (or `with`) to open and close it.

    `clock` gives the long-term tier its times (an item's valid_from / valid_to); default: UTC now. `embeddings`
    (any LangChain Embeddings) turns recall's vector path on; default: MEMORY_AGENT_EMBEDDINGS."""

    def __init__(
        self,
        settings: MemorySettings | None = None,
        *,
        model: BaseChatModel | str | None = None,
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
        model: BaseChatModel | str | None = None,
        embeddings: Embeddings | None = None,
    ) -> MemoryService:
        """A service for `settings` (default: from the environment) and summarizer `model`.

        `model` is any LangChain chat model, or a model named as MEMORY_AGENT_MEMORY_MODEL names one
        (`provider:model`, a bare name for OpenAI, `offline`); by default the one that setting names (opening
        raises ConfigurationError when it cannot be made: docs/how-to/models.md). `embeddings` is any
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
        return self._lifecycle.parts.runner.follow_ups.cluster_summarizer

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

    if not TYPE_CHECKING:  # at run time only: the type checker still refuses a name the service does not have

        def __getattr__(self, name: str) -> Any:
            if name in MOVED:
                raise AttributeError(f"MemoryService has no {name!r}: use memory.{MOVED[name]}", name=name, obj=self)
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}", name=name, obj=self)

    def round_identity(self, config: Any) -> tuple[str, str | None, str | None]:
        """(thread id, user id, tenant id) of a run's config: `thread_id`, and the keys MEMORY_AGENT_USER_ID_KEY
        and MEMORY_AGENT_TENANT_ID_KEY name (default `user_id`, `tenant_id`); None where absent."""
        configurable = (config or {}).get("configurable") or {}
        return round_identity(configurable, self.settings.rounds.user_id_key, self.settings.rounds.tenant_id_key)

    def call_sync(self, coro: Any) -> Any:
        """Run one of this service's coroutines from synchronous code (used by the sync graph nodes)."""
        return self.loop.run(coro)

    # ------------------------------------------------------------------ summaries run by this process

    async def run_summary(self, memory_id: int, *, user_id: str) -> str:
        """Summarize one `processing` row (user_id, memory_id) to `completed` or `failed`. Never raises; returns
        the final status."""
        return await self.loop.arun(self._lifecycle.parts.runner.run_summary(memory_id, user_id))

    async def drain(self, timeout: float | None = None) -> bool:
        """Wait until this process has no summary in flight; True when everything finished in time."""
        return await self.loop.arun(self.executor.drain(timeout))

    async def delete_conversation(
        self, conversation_id: str, *, user_id: str | None = None, tenant_id: str | None = None
    ) -> bool:
        """Delete a conversation and everything derived from it, in one transaction: its messages, memory versions
        and metrics, the long-term items only it sourced (lineage of the others), the cluster summaries built
        from an erased item (regenerated without it, or removed below summary_min_cluster_items), the
        consolidation notes and batch summaries made from it (made again by their next run without it), and its
        summary jobs' rows. Without `user_id`, the thread's owner's (looked up within `tenant_id` when given:
        another tenant's thread is not found). False when it did not exist."""
        key = await self.conversations.owned(conversation_id, user_id, tenant_id)
        return await self.long_term.forget_conversation(key)

    @property
    def transfers(self) -> Transfers:
        """Imports of threads with their own times, and a user's memory as one document (_transfers.py)."""
        return Transfers(self._lifecycle.parts, self.loop, self.clock, self.settings.memory.rolling_window_size)

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
