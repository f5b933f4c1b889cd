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

from memory_agent import long_term
from memory_agent.db.connector import Connector
from memory_agent.errors import JobFailedError
from memory_agent.llm import LLMCall, collecting
from memory_agent.long_term import ledger
from memory_agent.long_term.cluster_text import ClusterSummarizer
from memory_agent.long_term.embeddings import index_items, index_pending
from memory_agent.long_term.lineage import ledger_user
from memory_agent.summarize.options import SummaryOptions

logger = logging.getLogger("memory_agent")

# A cluster summary call's tokens (prompt, answer) as reserved before it is made: a few short items in, a sentence
# out. The call's actual tokens replace the estimate in the ledger.
CLUSTER_CALL_TOKENS = (1000, 200)


class LongTermFollowUps:
    """SummaryRunner's long-term follow-ups (its part `follow_ups`), on the connector's connections; the cluster
    summaries written by `cluster_summarizer`, the vectors by `embedder` (None: none)."""

    def __init__(
        self,
        options: SummaryOptions,
        connector: Connector,
        cluster_summarizer: ClusterSummarizer,
        embedder: Embeddings | None,
        clock: Callable[[], datetime],
    ) -> None:
        self.options = options
        self.connector = connector
        self.cluster_summarizer = cluster_summarizer
        self.embedder = embedder
        self.clock = clock

    async def index(self, tenant_id: str, user_id: str, memory_id: int | None = None) -> None:
        """After the version's commit and its clusters' refresh, or its failure, or after a round that started no
        summary (`memory_id` None; the executor's `embed`): embed the user's items, summaries and turns that have no vector
        yet (the ones just written, and any an earlier run missed). A failure is a WARNING; they stay findable by
        text and refresh_pending embeds them later."""
        if self.embedder is None:
            return
        try:
            async with self.connector.session() as conn:
                await index_items(conn, tenant_id=tenant_id, user_id=user_id, embedder=self.embedder)
        except Exception as exc:
            what = f"Memory {memory_id}: items" if memory_id is not None else f"User {user_id!r}: new turns"
            logger.warning("%s not embedded (the periodic task will): %s", what, exc)

    async def refresh_clusters(self, clusters: list[long_term.Cluster], now: datetime) -> None:
        """After the version's commit: each touched cluster in its own transaction. A failure is logged and left
        to the periodic safety net (refresh_pending); a tenant at its cost ceiling gets no summary call."""
        if not clusters:
            return
        try:
            async with self.connector.session() as conn:
                for cluster in clusters:
                    if await self._refresh_within_budget(conn, cluster, now) is None:
                        return
        except Exception as exc:
            logger.warning("Cluster summaries not refreshed (the periodic task will): %s", exc)

    async def _refresh_within_budget(
        self, conn: Any, cluster: long_term.Cluster, now: datetime
    ) -> long_term.ClusterOutcome | None:
        """Refresh one cluster, its model call's estimated cost reserved against the tenant's monthly ceiling
        first (ledger.reserve: the database admits concurrent callers one at a time) and settled with the calls
        it made; what it did, or None, with a WARNING and no call, when the ceiling (spent plus calls in flight)
        is reached."""
        model = getattr(self.cluster_summarizer, "model_name", None) or self.options.model_name
        estimate = ledger.price(LLMCall("cluster_summary", model, *CLUSTER_CALL_TOKENS), self.options.guards.llm_prices)
        reservation = await ledger.reserve(
            conn, cluster.tenant_id, self.options.guards.monthly_cost_ceiling, estimate[0], now
        )
        if reservation is None:
            logger.warning(
                "tenant %r reached its monthly cost ceiling %s (spent and reserved by calls in flight): no cluster "
                "summary is written for this tenant (recall reads raw items)",
                cluster.tenant_id,
                self.options.guards.monthly_cost_ceiling,
            )
            return None
        with collecting() as log:
            try:
                async with long_term.tenant_transaction(conn, cluster.tenant_id):
                    outcome = await long_term.refresh_cluster(
                        conn,
                        cluster,
                        long_term.ClusterSummaries(
                            self.cluster_summarizer,
                            min_items=self.options.summary.min_cluster_items,
                            max_members=self.options.summary.max_cluster_members,
                        ),
                        now=now,
                    )
            except BaseException:
                await ledger.release(conn, reservation)
                raise
        prices = self.options.guards.llm_prices
        async with long_term.tenant_transaction(conn, cluster.tenant_id):
            user = await ledger_user(conn, cluster.params())  # answered after forget_user: under no user
            await ledger.record_log(conn, cluster.tenant_id, user, log, now=now, prices=prices, reservation=reservation)
        return outcome

    async def refresh_pending(self, limit: int = 100) -> int:
        """The periodic safety net: refresh up to `limit` clusters whose summary is missing, stale or due for
        deletion (their inline refresh failed or never ran), at most max_summary_jobs_per_run per (tenant, user,
        project) and none of a tenant over its cost ceiling; each cluster's calls go to the ledger. Returns how
        many it handled. Then, with an embedder, the catch-up of vectors (index_pending). A cluster whose summary
        failed or was rejected, or a catch-up that failed, does not stop the rest; JobFailedError at the end says
        what was left for the next run (not retryable: the next run is the retry)."""
        if not self.options.long_term.long_term:
            return 0
        handled, unusable = await self._refresh_pending_clusters(limit)
        problems = [f"{len(unusable)} cluster summaries not written ({'; '.join(unusable[:3])})"] if unusable else []
        if self.embedder is not None:
            try:
                async with self.connector.session() as conn:
                    await index_pending(conn, self.embedder)
            except Exception as exc:
                logger.warning("Pending items not embedded (the next run retries): %s", exc)
                problems.append(f"pending items not embedded: {type(exc).__name__}: {exc}")
        if problems:
            raise JobFailedError(
                "the long-term safety net left work for its next run: " + "; ".join(problems), retryable=False
            )
        return handled

    async def _refresh_pending_clusters(self, limit: int) -> tuple[int, list[str]]:
        """How many clusters were handled, and why each unusable summary was not written."""
        options, now = self.options, self.clock()
        per_scope: Counter[tuple[str, str, str]] = Counter()
        over: set[str] = set()
        handled, unusable = 0, []
        async with self.connector.session() as conn:
            pending = await long_term.pending_clusters(conn, min_items=options.summary.min_cluster_items, limit=limit)
            for cluster in pending:
                scope = (cluster.tenant_id, cluster.user_id, cluster.project)
                if cluster.tenant_id in over or per_scope[scope] >= options.guards.max_summary_jobs_per_run:
                    continue  # the next run takes it
                outcome = await self._refresh_within_budget(conn, cluster, now)
                if outcome is None:
                    over.add(cluster.tenant_id)
                    continue
                if outcome.unusable:
                    unusable.append(f"{cluster.key}: {outcome.outcome}: {outcome.reason}")
                per_scope[scope] += 1
                handled += 1
        return handled, unusable
