"""LongTermMemory (`memory.long_term`): a user's long-term items, forgetting with lineage, and recall.

Every call names its user (and tenant, default 'default'), runs in one transaction on the memory loop with
row-level security scoped to that tenant, and erases durably: what a forget returns is committed. Made by the
service when it opens, from the parts it opened (the memory loop, the backend, the cluster summarizer, the
embedder, recall's settings).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Coroutine
from datetime import datetime
from typing import Any, Concatenate, ParamSpec, TypeVar

from langchain_core.embeddings import Embeddings

from memory_agent.db.connector import Connector
from memory_agent.db.tenancy import tenant_scope
from memory_agent.errors import InvalidInputError
from memory_agent.long_term import ClusterSummaries
from memory_agent.long_term.cluster_text import ClusterSummarizer
from memory_agent.long_term.forget import (
    ForgetReport,
    forget_conversation,
    forget_item,
    forget_user,
    release_threads,
)
from memory_agent.long_term.reads import ItemFilter, LongTermItem, list_items
from memory_agent.long_term.recall import RecallResult, RecallSettings, user_recall
from memory_agent.long_term.scope import ItemScope, check_now
from memory_agent.long_term.stated import remember_stated, stated_items
from memory_agent.long_term.tenancy import tenant_transaction
from memory_agent.long_term.writer import RememberOutcome
from memory_agent.runtime import MemoryLoop
from memory_agent.schemas.keys import ConversationKey, UserKey, zone_named


def user_scope(user_id: Any, tenant_id: Any) -> tuple[str, str]:
    """(tenant, user) of a call that names a user: both validated, no tenant → 'default'."""
    key = UserKey.of(user_id, tenant_id)
    return key.tenant_id, key.user_id


P = ParamSpec("P")
R = TypeVar("R")


def blocking(
    method: Callable[Concatenate[LongTermMemory, P], Coroutine[Any, Any, R]], doc: str
) -> Callable[Concatenate[LongTermMemory, P], R]:
    """`method`, an async operation of LongTermMemory, as a method that blocks until the memory loop ran it."""

    @functools.wraps(method)
    def run(self: LongTermMemory, /, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.loop.run(method(self, *args, **kwargs))

    run.__name__ = f"{method.__name__}_sync"
    run.__qualname__ = f"LongTermMemory.{run.__name__}"
    run.__doc__ = doc
    return run


class LongTermMemory:
    """list_items, remember, forget_item, forget_user, forget_conversation (behind
    MemoryService.delete_conversation), recall; their _sync twins (list_items, remember, recall, forget_item,
    forget_user) from synchronous code."""

    def __init__(
        self,
        loop: MemoryLoop,
        backend: Connector,
        *,
        clock: Callable[[], datetime],
        cluster_summarizer: ClusterSummarizer,
        embedder: Embeddings | None,
        recall_settings: RecallSettings,
        min_cluster_items: int,
    ) -> None:
        self.loop = loop
        self.backend = backend
        self.clock = clock
        self.cluster_summarizer = cluster_summarizer
        self.embedder = embedder
        self.recall_settings = recall_settings
        self.min_cluster_items = min_cluster_items

    async def list_items(
        self, user_id: str, *, tenant_id: str | None = None, as_of: datetime | None = None
    ) -> list[LongTermItem]:
        """The user's long-term items current now (cluster summaries included), or those held at `as_of`
        (items only: summaries are a view of the present); most important first."""
        key = UserKey.of(user_id, tenant_id)

        async def read() -> list[LongTermItem]:
            async with self.backend.session() as conn, tenant_transaction(conn, key):
                return await list_items(conn, key, where=ItemFilter(as_of=as_of))

        with tenant_scope(key.tenant_id):
            return await self.loop.arun(read())

    async def remember(
        self,
        user_id: str,
        content: str,
        *,
        tenant_id: str | None = None,
        key: str | None = None,
        item_type: str = "fact",
        importance: float = 0.5,
    ) -> RememberOutcome:
        """Keep `content` as a long-term item of the user, through the same writer and validity rules as the items
        a summary extracts: `.item_id` is its current row, `.outcome` inserted | unchanged | superseded. With a
        `key` ("home_city") a new value of that key replaces the current one (valid_to set, history kept); without
        one each distinct content is an item of its own (key 'note'). Its vector and cluster summary follow with
        the periodic catch-up (the worker's refresh task), as for extracted items."""
        who = UserKey.of(user_id, tenant_id)
        items = stated_items(content, item_type=item_type, key=key, importance=importance)

        async def write() -> RememberOutcome:
            async with self.backend.session() as conn, tenant_transaction(conn, who):
                return await remember_stated(conn, ItemScope(who.tenant_id, who.user_id), items, now=self.clock())

        with tenant_scope(who.tenant_id):
            return await self.loop.arun(write(), shield=True)

    async def forget_item(self, user_id: str, item_id: int, *, tenant_id: str | None = None) -> ForgetReport:
        """Erase one item version of the user (a cluster summary: with the members it stands for) and regenerate
        the summaries built from it; an unknown id erases nothing."""
        key = UserKey.of(user_id, tenant_id)
        if not isinstance(item_id, int) or isinstance(item_id, bool):
            raise InvalidInputError(f"item_id must be an integer, got {item_id!r}")

        async def forget() -> ForgetReport:
            async with self.backend.session() as conn, tenant_transaction(conn, key):
                return await forget_item(
                    conn,
                    key,
                    item_id,
                    summaries=ClusterSummaries(self.cluster_summarizer, min_items=self.min_cluster_items),
                    now=self.clock(),
                )

        with tenant_scope(key.tenant_id):
            return await self.loop.arun(forget(), shield=True)

    async def forget_user(self, user_id: str, *, tenant_id: str | None = None) -> ForgetReport:
        """Erase every long-term row of the user in the tenant and every conversation of theirs."""
        key = UserKey.of(user_id, tenant_id)  # checked once: below, the key is taken as it is

        async def forget() -> ForgetReport:
            async with self.backend.session() as conn, tenant_transaction(conn, key):
                report = await forget_user(conn, key)
            await release_threads(self.backend.session, key)
            return report

        with tenant_scope(key.tenant_id):
            return await self.loop.arun(forget(), shield=True)

    async def forget_conversation(self, key: ConversationKey) -> bool:
        """The conversation and everything derived from it, in one transaction; False when it did not exist."""

        async def forget() -> bool:
            async with self.backend.session() as conn, tenant_transaction(conn, key.user):
                report = await forget_conversation(
                    conn,
                    key.user,
                    key.conversation_id,
                    summaries=ClusterSummaries(self.cluster_summarizer, min_items=self.min_cluster_items),
                    now=self.clock(),
                )
            await release_threads(self.backend.session, key.user, key.conversation_id)
            return bool(report.conversations_deleted)

        with tenant_scope(key.tenant_id):
            return await self.loop.arun(forget(), shield=True)

    async def recall(
        self,
        user_id: str,
        query: str,
        *,
        tenant_id: str | None = None,
        limit: int = 10,
        as_of: datetime | None = None,
        recent_fallback: bool = True,
    ) -> RecallResult:
        """What recall at round start would find for `user_id` across their conversations and long-term items,
        with everything it measured (the rendered block, the paths that ran, its tokens, whether a guardrail cut
        it). `.results` are the hits, best first, within the MEMORY_AGENT_RECALL_* guardrails: each hit's `kind` (turn | item | summary),
        `text`, `score` and provenance (`conversation_id` + `sequences`, `item_ids`, `sources`; a key insight of
        a weekly or monthly consolidation note is a `summary` with `note_id`, `period`, `period_start`; a batch
        summary a `summary` with `batch_summary_id` and the summarized ids as `source_item_ids`; `provenance()`
        gives all of it as JSON data). `as_of` reads the items valid then. When nothing matches, recall gives the
        latest turns of the user's most recently active conversation (paths ['recent']), as at round start;
        `recent_fallback=False` gives nothing instead (a search). Never calls a chat model; with an embedder, the
        query is embedded beside full text and its nearest vectors fused with its hits (hybrid; with MEMORY_AGENT_RECALL_VECTORS_ALWAYS
        false, only when full text and trigrams find too little: the vector fallback). "Yesterday" or "last week"
        in the query, and the turns' dates in the block, are read in the user's time zone: `as_of`'s own (give
        `as_of=datetime.now(ZoneInfo("Asia/Tokyo"))` for now in Tokyo), else MEMORY_AGENT_RECALL_TIME_ZONE, else
        the service clock's."""
        tenant, user = user_scope(user_id, tenant_id)
        if as_of is not None:
            check_now(as_of, "as_of")  # a naive time would be read in the server's time zone
        settings, embedder = self.recall_settings, self.embedder
        now = as_of or self.clock()  # "yesterday" in a recall as of a past time: the day before it
        if as_of is None and settings.time_zone is not None:
            now = now.astimezone(zone_named(settings.time_zone, "MEMORY_AGENT_RECALL_TIME_ZONE"))

        run = user_recall(
            self.backend,
            tenant_id=tenant,
            user_id=user,
            query=query,
            limit=limit,
            as_of=as_of,
            settings=settings,
            embedder=embedder,
            recent_fallback=recent_fallback,
            now=now,
        )
        # Recall names its tenant in its own transaction too (user.py): row-level security would otherwise hide
        # every item and note of the user from a role it binds, and recall would find turns only.
        with tenant_scope(tenant):
            return await self.loop.arun(run)

    # From synchronous code (the service opened with `with`): the async operation's own signature, run on the
    # memory loop. One signature for both forms: written twice, the sync twin lagged behind the async one's options.
    remember_sync = blocking(
        remember, "remember() from synchronous code (the service opened with `with`), as mem0's `add`."
    )
    recall_sync = blocking(
        recall, "recall() from synchronous code (the service opened with `with`); `.results` are the hits, best first."
    )
    # Called without await, the async forgets return a coroutine and erase nothing: a script needs these.
    list_items_sync = blocking(list_items, "list_items() from synchronous code (the service opened with `with`).")
    forget_item_sync = blocking(
        forget_item, "forget_item() from synchronous code (the service opened with `with`); committed when it returns."
    )
    forget_user_sync = blocking(
        forget_user, "forget_user() from synchronous code (the service opened with `with`); committed when it returns."
    )
