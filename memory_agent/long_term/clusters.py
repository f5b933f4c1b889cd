"""Cluster summaries: one row standing for the current items of a (tenant, user, project, environment, type, key)
once they are `min_items` (summary_min_cluster_items, 3) or more.

A summary is an `items` row (is_summary, value_slot 'summary', source_item_ids = its members, ascending): the
WITHOUT OVERLAPS key allows one per cluster, so two refreshers racing to create it are decided by the database.
refresh_cluster() is the whole life cycle:
- fewer than min_items current members → the summary row is deleted (recall reads the raw items again);
- the same members as the summary's → no model call; only importance/confidence follow the members;
- otherwise the summarizer writes a new text over the members, checked by cluster_text.summary_rejection:
  accepted → the row is created or refreshed in place (same item_id; its vector, the old text's, is dropped
  for the next indexing), unless a forget of the user is in progress or erased a member while the model
  answered (lineage.sources_held: then nothing is written, outcome failed); rejected or failed → nothing changes.
Importance is the members' highest (a cluster matters as much as its most important member, the allergy among
preferences); confidence their lowest (a summary is no surer than its least sure member). Members are the
current versions only: a closed version is history (item_history), not something held.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

import psycopg
from psycopg import errors

from memory_agent.errors import InvalidInputError
from memory_agent.long_term.cluster_text import ClusterSummarizer, summary_rejection
from memory_agent.long_term.embeddings import drop_item_vector
from memory_agent.long_term.lineage import sources_held
from memory_agent.long_term.queries import QUERIES as Q
from memory_agent.long_term.scope import Cluster, check_now
from memory_agent.long_term.writer import MAX_ATTEMPTS, LongTermWriteError, RememberOutcome
from memory_agent.schemas.items import normalize_content

logger = logging.getLogger("memory_agent.long_term")

SUMMARY_MIN_CLUSTER_ITEMS = 3
# Members given to one summary call: a cluster of thousands of items (one answer can state them) would make a prompt
# no model takes. The summary still stands for every member (source_item_ids); its text is made from these.
SUMMARY_MAX_CLUSTER_MEMBERS = 50
# The reason of a `failed` outcome that is no failure of the summary: a forget of the user handles the cluster.
BEING_FORGOTTEN = "members being forgotten"
ClusterOutcomeName = Literal["created", "refreshed", "unchanged", "deleted", "too_small", "rejected", "failed"]


@dataclass(frozen=True)
class ClusterSummaries:
    """How cluster summaries are made: the summarizer, the fewest current items a summary stands for, and the
    most members one summary call is given."""

    summarize: ClusterSummarizer
    min_items: int = SUMMARY_MIN_CLUSTER_ITEMS
    max_members: int = SUMMARY_MAX_CLUSTER_MEMBERS


@dataclass(frozen=True)
class ClusterOutcome:
    """What refresh_cluster() did; `reason` says why a summary was rejected or failed."""

    outcome: ClusterOutcomeName
    cluster: Cluster
    summary_item_id: int | None = None
    reason: str | None = None

    @property
    def unusable(self) -> bool:
        """The summarizer failed or its text was rejected: the cluster stays pending (not a forget in progress)."""
        return self.outcome == "rejected" or (self.outcome == "failed" and self.reason != BEING_FORGOTTEN)


def touched_clusters(outcomes: Iterable[RememberOutcome]) -> list[Cluster]:
    """The clusters whose members changed in a remember() call, once each, in order."""
    return list(dict.fromkeys(outcome.cluster for outcome in outcomes if outcome.changes_cluster))


def _check_min(min_items: int) -> None:
    if not isinstance(min_items, int) or min_items < 2:
        raise InvalidInputError(
            f"summary_min_cluster_items must be an integer >= 2 (MEMORY_AGENT_SUMMARY_MIN_CLUSTER_ITEMS), got {min_items!r}"
        )


async def refresh_cluster(
    conn: psycopg.AsyncConnection[Any],
    cluster: Cluster,
    summaries: ClusterSummaries,
    *,
    now: datetime,
    drop_when_unusable: bool = False,
) -> ClusterOutcome:
    """Bring the cluster's summary in line with its current members (see the module docstring), in a savepoint
    of the caller's transaction. `drop_when_unusable`: a rejected or failed summary also deletes the old one
    (forgetting must not leave text built from an erased member). The text is made from at most `max_members`
    members, the most important (newest first among equals)."""
    summarize, min_items, max_members = summaries.summarize, summaries.min_items, summaries.max_members
    check_now(now)
    _check_min(min_items)
    if not isinstance(max_members, int) or max_members < 1:
        raise InvalidInputError(
            f"summary_max_cluster_members must be an integer >= 1 (MEMORY_AGENT_SUMMARY_MAX_CLUSTER_MEMBERS), "
            f"got {max_members!r}"
        )
    for _ in range(MAX_ATTEMPTS):
        try:
            async with conn.transaction():
                return await _refresh(conn, cluster, summarize, now, min_items, drop_when_unusable, max_members)
        except (errors.ExclusionViolation, errors.DeadlockDetected):
            continue  # a concurrent refresher created the summary first: refresh that one
    raise LongTermWriteError(f"cluster summary {cluster} stayed contended after {MAX_ATTEMPTS} attempts")


async def refresh_clusters(
    conn: psycopg.AsyncConnection[Any],
    clusters: Iterable[Cluster],
    summaries: ClusterSummaries,
    *,
    now: datetime,
) -> list[ClusterOutcome]:
    return [await refresh_cluster(conn, c, summaries, now=now) for c in clusters]


async def _refresh(
    conn: psycopg.AsyncConnection[Any],
    cluster: Cluster,
    summarize: ClusterSummarizer,
    now: datetime,
    min_items: int,
    drop_when_unusable: bool,
    max_members: int,
) -> ClusterOutcome:
    params = cluster.params()
    # Refreshers of one cluster take turns, the model call included: the second one then finds the summary
    # made and, the members unchanged, calls no model. The lock is the one writers of the summary's slot take.
    await Q.lock_item_slot(conn, {**params, "value_slot": "summary"})
    summary = await Q.lock_cluster_summary(conn, params)
    members = await Q.cluster_members(conn, params)
    if len(members) < min_items:
        if summary is None:
            return ClusterOutcome("too_small", cluster)
        await Q.delete_items(conn, params, [summary["item_id"]])
        return ClusterOutcome("deleted", cluster, summary["item_id"])
    member_ids = [m["item_id"] for m in members]
    weight = {
        "importance": max(m["importance"] for m in members),
        "confidence": min(m["confidence"] for m in members),
    }
    if summary is not None and list(summary["source_item_ids"]) == member_ids:
        await Q.set_cluster_weight(conn, {**params, **weight, "item_id": summary["item_id"]})
        return ClusterOutcome("unchanged", cluster, summary["item_id"])
    texts = [m["content"] for m in _shown_members(members, max_members)]
    try:
        text = " ".join((await summarize(texts)).replace("\x00", "").split())
    except Exception as exc:  # a model failure leaves the cluster as it was; the periodic task retries it
        logger.warning("cluster summary of %s failed: %r", cluster, exc)
        return await _unusable(conn, cluster, summary, "failed", repr(exc), drop_when_unusable)
    reason = summary_rejection(text, texts)
    if reason is not None:
        logger.warning("cluster summary of %s rejected: %s", cluster, reason)
        return await _unusable(conn, cluster, summary, "rejected", reason, drop_when_unusable)
    if not await sources_held(conn, params, item_ids=member_ids, wait=False):
        # A forget of the user is in progress or erased members meanwhile: it handles the summary; write nothing.
        return ClusterOutcome("failed", cluster, summary["item_id"] if summary else None, BEING_FORGOTTEN)
    values = {
        **params,
        **weight,
        "content": text,
        "content_norm": normalize_content(text),
        "source_item_ids": member_ids,
        "now": now,
    }
    if summary is None:
        row = await Q.insert_cluster_summary(conn, values)
        assert row is not None
        return ClusterOutcome("created", cluster, row["item_id"])
    await Q.update_cluster_summary(conn, {**values, "item_id": summary["item_id"]})
    await drop_item_vector(conn, tenant_id=cluster.tenant_id, user_id=cluster.user_id, item_id=summary["item_id"])
    return ClusterOutcome("refreshed", cluster, summary["item_id"])


def _shown_members(members: list[dict[str, Any]], limit: int) -> list[dict[str, Any]]:
    """The members a summary call is given: all of them, or the `limit` most important (newest first among
    equals), oldest first as the members are."""
    if len(members) <= limit:
        return members
    chosen = sorted(members, key=lambda m: (-m["importance"], -m["item_id"]))[:limit]
    return sorted(chosen, key=lambda m: m["item_id"])


async def _unusable(
    conn: psycopg.AsyncConnection[Any],
    cluster: Cluster,
    summary: dict[str, Any] | None,
    outcome: ClusterOutcomeName,
    reason: str,
    drop: bool,
) -> ClusterOutcome:
    if drop and summary is not None:
        await Q.delete_items(conn, cluster.params(), [summary["item_id"]])
    return ClusterOutcome(outcome, cluster, summary["item_id"] if summary else None, reason)


async def pending_clusters(
    conn: psycopg.AsyncConnection[Any],
    *,
    tenant_id: str | None = None,
    user_id: str | None = None,
    min_items: int = SUMMARY_MIN_CLUSTER_ITEMS,
    limit: int = 100,
) -> list[Cluster]:
    """Clusters whose summary is missing, stale (other members) or due for deletion: what the periodic safety
    net hands to refresh_cluster(). tenant_id/user_id None: every tenant / user this connection may read."""
    _check_min(min_items)
    rows = await Q.pending_clusters(
        conn,
        {"tenant_id": tenant_id, "user_id": user_id, "min_items": min_items, "limit": limit},
    )
    return [Cluster(**row) for row in rows]


async def refresh_pending_clusters(
    conn: psycopg.AsyncConnection[Any],
    summaries: ClusterSummaries,
    *,
    now: datetime,
    tenant_id: str | None = None,
    user_id: str | None = None,
    limit: int = 100,
) -> list[ClusterOutcome]:
    """The periodic safety net's body: refresh up to `limit` pending clusters. On an autocommit connection each
    cluster commits on its own, so one failing cluster does not undo the others."""
    pending = await pending_clusters(
        conn, tenant_id=tenant_id, user_id=user_id, min_items=summaries.min_items, limit=limit
    )
    return [await refresh_cluster(conn, cluster, summaries, now=now) for cluster in pending]
