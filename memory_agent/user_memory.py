"""The per-user half of MemoryService's public API: a user's long-term items, and forgetting with lineage.

MemoryService inherits it; it reaches the service's loop, backend, clock and cluster summarizer through the
members the service defines. Every call names its user (and tenant, default 'default'), runs in one transaction
on the service's memory loop with row-level security scoped to that tenant, and erases durably: what a forget
returns is committed.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from langchain_core.embeddings import Embeddings

from memory_agent import long_term
from memory_agent.conversation.identity import validate_identity, validate_user_id
from memory_agent.db.backend import MemoryBackend
from memory_agent.db.keys import DEFAULT_TENANT_ID
from memory_agent.db.tenancy import tenant_scope
from memory_agent.errors import InvalidInputError
from memory_agent.long_term.block import RecallHit
from memory_agent.long_term.cluster_text import ClusterSummarizer
from memory_agent.long_term.recall import ALL_PATHS, RecallResult, RecallSettings, recall
from memory_agent.long_term.store_recall import SEARCH_PATHS
from memory_agent.settings import MemorySettings

if TYPE_CHECKING:
    from memory_agent.integrations.retriever import MemoryRetriever
    from memory_agent.runtime import MemoryLoop


class UserMemory:
    """list_items, forget_item, forget_user (and the forgetting behind delete_conversation), recall and its
    retriever."""

    settings: MemorySettings
    clock: Callable[[], datetime]

    @property
    def loop(self) -> MemoryLoop:
        raise NotImplementedError

    @property
    def backend(self) -> MemoryBackend:
        raise NotImplementedError

    @property
    def cluster_summarizer(self) -> ClusterSummarizer:
        raise NotImplementedError

    @property
    def embedder(self) -> Embeddings | None:
        raise NotImplementedError

    @property
    def _cluster_summaries(self) -> long_term.ClusterSummaries:
        """How forgetting makes the cluster summaries built from what it erased again."""
        return long_term.ClusterSummaries(self.cluster_summarizer, min_items=self.settings.summary.min_cluster_items)

    def _user(self, user_id: Any, tenant_id: Any) -> tuple[str, str]:
        validate_user_id(user_id)
        if tenant_id is not None:
            validate_identity(tenant_id, "tenant_id")
        return (tenant_id or DEFAULT_TENANT_ID), user_id

    async def list_items(
        self, user_id: str, *, tenant_id: str | None = None, as_of: datetime | None = None
    ) -> list[long_term.LongTermItem]:
        """The user's long-term items current now (cluster summaries included), or those held at `as_of`
        (items only: summaries are a view of the present); most important first."""
        tenant, user = self._user(user_id, tenant_id)

        async def read() -> list[long_term.LongTermItem]:
            async with self.backend.connection() as conn, long_term.tenant_transaction(conn, tenant):
                return await long_term.list_items(conn, tenant, user, where=long_term.ItemFilter(as_of=as_of))

        with tenant_scope(tenant):
            return await self.loop.arun(read())

    async def forget_item(self, user_id: str, item_id: int, *, tenant_id: str | None = None) -> long_term.ForgetReport:
        """Erase one item version of the user (a cluster summary: with the members it stands for) and regenerate
        the summaries built from it; an unknown id erases nothing."""
        tenant, user = self._user(user_id, tenant_id)
        if not isinstance(item_id, int) or isinstance(item_id, bool):
            raise InvalidInputError(f"item_id must be an integer, got {item_id!r}")

        async def forget() -> long_term.ForgetReport:
            async with self.backend.connection() as conn, long_term.tenant_transaction(conn, tenant):
                return await long_term.forget_item(
                    conn,
                    tenant,
                    user,
                    item_id,
                    summaries=self._cluster_summaries,
                    now=self.clock(),
                )

        with tenant_scope(tenant):
            return await self.loop.arun(forget(), shield=True)

    async def forget_user(self, user_id: str, *, tenant_id: str | None = None) -> long_term.ForgetReport:
        """Erase every long-term row of the user in the tenant and every conversation of theirs."""
        tenant, user = self._user(user_id, tenant_id)

        async def forget() -> long_term.ForgetReport:
            async with self.backend.connection() as conn, long_term.tenant_transaction(conn, tenant):
                return await long_term.forget_user(conn, tenant, user)

        with tenant_scope(tenant):
            return await self.loop.arun(forget(), shield=True)

    async def _forget_conversation(self, tenant_id: str, user_id: str, conversation_id: str) -> bool:
        """On the memory loop: the conversation and everything derived from it, in one transaction."""
        async with self.backend.connection() as conn, long_term.tenant_transaction(conn, tenant_id):
            report = await long_term.forget_conversation(
                conn,
                tenant_id,
                user_id,
                conversation_id,
                summaries=self._cluster_summaries,
                now=self.clock(),
            )
        return bool(report.conversations_deleted)

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
        best first, within the MEMORY_AGENT_RECALL_* guardrails: each hit's `kind` (turn | item | summary),
        `text`, `score` and provenance (`conversation_id` + `sequences`, `item_ids`, `sources`; a key insight of
        a weekly or monthly consolidation note is a `summary` with `note_id`, `period`, `period_start`; a batch
        summary a `summary` with `batch_summary_id` and the summarized ids as `source_item_ids`; `provenance()`
        gives all of it as JSON data). `as_of` reads the items valid then. When nothing matches, recall gives the
        latest turns of the user's most recently active conversation (paths ['recent']), as at round start;
        `recent_fallback=False` gives nothing instead (a search). Never calls a chat model; with an embedder, the
        query is embedded only when full text and trigrams find fewer than two hits (the vector fallback)."""
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
        tenant, user = self._user(user_id, tenant_id)
        settings = self.recall_settings
        embedder = self.embedder

        async def run() -> RecallResult:
            # In the tenant's transaction: a role bound by row-level security reads the tenant's rows only.
            async with self.backend.connection() as conn, long_term.tenant_transaction(conn, tenant):
                return await recall(
                    conn,
                    tenant_id=tenant,
                    user_id=user,
                    query=query,
                    limit=limit,
                    as_of=as_of,
                    settings=settings,
                    embedder=embedder,
                    paths=ALL_PATHS if recent_fallback else SEARCH_PATHS,
                )

        # Recall names its tenant in its own transaction too (recall_settings): row-level security would
        # otherwise hide every item and note of the user from a role it binds, and recall would find turns only.
        with tenant_scope(tenant):
            return await self.loop.arun(run())

    def as_retriever(
        self, *, user_id: str, tenant_id: str | None = None, k: int = 10, as_of: datetime | None = None
    ) -> MemoryRetriever:
        """A LangChain retriever over recall for `user_id`: Documents in recall's order, each hit's provenance
        in its metadata (integrations/retriever.py); nothing when nothing matches (no recent-turns fallback)."""
        from memory_agent.integrations.retriever import MemoryRetriever

        self._user(user_id, tenant_id)
        if not isinstance(k, int) or isinstance(k, bool) or k < 1:
            raise InvalidInputError(
                f"k (the number of memories a retriever returns) must be an integer >= 1, got {k!r}"
            )
        return MemoryRetriever(memory=self, user_id=user_id, tenant_id=tenant_id, k=k, as_of=as_of)
