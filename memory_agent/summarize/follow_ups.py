"""What follows a completed version in the long-term tier, after its commit: the touched clusters' summaries
refreshed, the user's items and summaries embedded, and the periodic safety net that does both for what an
inline attempt missed (refresh_pending). None of it holds back the version; a failure is a WARNING and the
safety net's next run retries. A tenant over its monthly cost ceiling gets no cluster summary call.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable
from datetime import datetime
from typing import Any

from langchain_core.embeddings import Embeddings

from memory_agent import ledger, long_term
from memory_agent.db.backend import MemoryBackend
from memory_agent.long_term.cluster_text import ClusterSummarizer
from memory_agent.long_term.embeddings import index_items, index_pending
from memory_agent.long_term.lineage import ledger_user
from memory_agent.settings import MemorySettings

logger = logging.getLogger("memory_agent")


class LongTermFollowUps:
    """SummaryRunner's long-term follow-ups; it sets these attributes."""

    settings: MemorySettings
    backend: MemoryBackend
    embedder: Embeddings | None
    clock: Callable[[], datetime]
    cluster_summarizer: ClusterSummarizer

    async def _index(self, tenant_id: str, user_id: str, memory_id: int) -> None:
        """After the version's commit and its clusters' refresh: embed the user's items and summaries that have
        no vector yet (the ones just written, and any an earlier run missed). A failure is a WARNING; the items
        stay findable by text and refresh_pending embeds them later."""
        if self.embedder is None:
            return
        try:
            async with self.backend.connection() as conn:
                await index_items(conn, tenant_id=tenant_id, user_id=user_id, embedder=self.embedder)
        except Exception as exc:
            logger.warning("Memory %s: items not embedded (the periodic task will): %s", memory_id, exc)

    async def _refresh_clusters(self, clusters: list[long_term.Cluster], now: datetime) -> None:
        """After the version's commit: each touched cluster in its own transaction. A failure is logged and left
        to the periodic safety net (refresh_pending); a tenant over its cost ceiling gets no summary call."""
        if not clusters:
            return
        try:
            async with self.backend.connection() as conn:
                if await self._over_budget(conn, clusters[0].tenant_id, now):
                    return
                for cluster in clusters:
                    async with long_term.tenant_transaction(conn, cluster.tenant_id):
                        await long_term.refresh_cluster(
                            conn,
                            cluster,
                            self.cluster_summarizer,
                            now=now,
                            min_items=self.settings.summary_min_cluster_items,
                        )
        except Exception as exc:
            logger.warning("Cluster summaries not refreshed (the periodic task will): %s", exc)

    async def _over_budget(self, conn: Any, tenant_id: str, now: datetime) -> bool:
        budget = await ledger.tenant_budget(conn, tenant_id, self.settings.monthly_cost_ceiling, now)
        if budget.over:
            logger.warning(
                "%s: no cluster summary is written for this tenant (recall reads raw items)", budget.describe()
            )
        return budget.over

    async def refresh_pending(self, limit: int = 100) -> int:
        """The periodic safety net: refresh up to `limit` clusters whose summary is missing, stale or due for
        deletion (their inline refresh failed or never ran), at most max_summary_jobs_per_run per (tenant, user,
        project) and none of a tenant over its cost ceiling; each cluster's calls go to the ledger. Returns how
        many it handled. Then, with an embedder, the catch-up of vectors (index_pending)."""
        if not self.settings.long_term:
            return 0
        handled = await self._refresh_pending_clusters(limit)
        if self.embedder is not None:
            try:
                async with self.backend.connection() as conn:
                    await index_pending(conn, self.embedder)
            except Exception as exc:
                logger.warning("Pending items not embedded (the next run retries): %s", exc)
        return handled

    async def _refresh_pending_clusters(self, limit: int) -> int:
        settings, now = self.settings, self.clock()
        per_scope: Counter[tuple[str, str, str]] = Counter()
        over: dict[str, bool] = {}
        handled = 0
        async with self.backend.connection() as conn:
            pending = await long_term.pending_clusters(conn, min_items=settings.summary_min_cluster_items, limit=limit)
            for cluster in pending:
                scope = (cluster.tenant_id, cluster.user_id, cluster.project)
                if per_scope[scope] >= settings.max_summary_jobs_per_run:
                    continue  # the next run takes it
                if cluster.tenant_id not in over:
                    over[cluster.tenant_id] = await self._over_budget(conn, cluster.tenant_id, now)
                if over[cluster.tenant_id]:
                    continue
                per_scope[scope] += 1
                with ledger.collecting() as log:
                    await long_term.refresh_cluster(
                        conn, cluster, self.cluster_summarizer, now=now, min_items=settings.summary_min_cluster_items
                    )
                async with conn.transaction():
                    user = await ledger_user(conn, cluster.params())
                    await ledger.record_log(conn, cluster.tenant_id, user, log, now=now, prices=settings.llm_prices)
                handled += 1
        return handled
