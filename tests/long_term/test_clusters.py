"""Cluster summaries: made at 3 members, refreshed in place, no-op when unchanged, removed below 3, checked."""

from __future__ import annotations

import asyncio

import pytest

from memory_agent.long_term import (
    Cluster,
    ClusterSummaries,
    ItemFilter,
    ItemOrigin,
    ItemScope,
    forget_item,
    list_items,
    offline_cluster_summarizer,
    pending_clusters,
    refresh_cluster,
    refresh_clusters,
    refresh_pending_clusters,
    remember,
    summary_rejection,
    touched_clusters,
)
from memory_agent.long_term.cluster_text import offline_cluster_summary_text
from memory_agent.schemas.keys import UserKey
from tests.conftest import execute, query
from tests.long_term.conftest import at, items

ALLERGIES = Cluster("acme", "alice", "", "", "fact", "allergies")


class CountingSummarizer:
    def __init__(self, answer=None) -> None:
        self.calls: list[list[str]] = []
        self.answer = answer

    async def __call__(self, members: list[str]) -> str:
        self.calls.append(members)
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer if self.answer is not None else await offline_cluster_summarizer(members)


async def allergy(conn, what: str, day: float, importance: float = 0.5):
    outcomes = await remember(
        conn,
        scope=ItemScope(tenant_id="acme", user_id="alice"),
        source=ItemOrigin(conversation_id="c1", memory_id=1),
        now=at(day),
        items=items(
            facts=[("allergies", f"The user is allergic to {what}", {"single_valued": False, "importance": importance})]
        ),
    )
    return touched_clusters(outcomes)


async def summaries(conn):
    return [i for i in await list_items(conn, UserKey("acme", "alice")) if i.is_summary]


async def test_a_cluster_gets_its_summary_at_three_members_and_keeps_it_in_place(conn):
    summarize = CountingSummarizer()
    for n, what in enumerate(("peanuts", "shellfish")):
        (outcome,) = await refresh_clusters(conn, await allergy(conn, what, n), ClusterSummaries(summarize), now=at(n))
        assert outcome.outcome == "too_small"
    assert summarize.calls == [] and await summaries(conn) == []

    clusters = await allergy(conn, "penicillin", 2, importance=0.9)
    assert clusters == [ALLERGIES]
    (made,) = await refresh_clusters(conn, clusters, ClusterSummaries(summarize), now=at(2))
    (summary,) = await summaries(conn)
    assert made.outcome == "created" and made.summary_item_id == summary.item_id
    assert summary.content == "The user is allergic to peanuts, shellfish and penicillin"
    assert summary.importance == pytest.approx(0.9) and len(summary.source_item_ids) == 3

    # Same members: no model call. A restated member's importance still reaches the summary.
    await allergy(conn, "peanuts", 3, importance=0.95)
    assert (await refresh_cluster(conn, ALLERGIES, ClusterSummaries(summarize), now=at(3))).outcome == "unchanged"
    assert len(summarize.calls) == 1
    (summary,) = await summaries(conn)
    assert summary.importance == pytest.approx(0.95)

    (refreshed,) = await refresh_clusters(conn, await allergy(conn, "latex", 4), ClusterSummaries(summarize), now=at(4))
    (after,) = await summaries(conn)
    assert refreshed.outcome == "refreshed" and after.item_id == summary.item_id
    assert after.content == "The user is allergic to peanuts, shellfish, penicillin and latex"
    assert len(after.source_item_ids) == 4 and after.updated_at == at(4)


async def test_deleted_members_drop_out_and_below_three_the_summary_goes(conn):
    for n, what in enumerate(("peanuts", "shellfish", "penicillin", "latex")):
        await allergy(conn, what, n)
    await refresh_cluster(conn, ALLERGIES, ClusterSummaries(offline_cluster_summarizer), now=at(5))
    members = sorted(
        (i.item_id, i.content) for i in await list_items(conn, UserKey("acme", "alice")) if not i.is_summary
    )

    report = await forget_item(
        conn, UserKey("acme", "alice"), members[1][0], summaries=ClusterSummaries(offline_cluster_summarizer), now=at(6)
    )
    (summary,) = await summaries(conn)
    assert report.items_deleted == (members[1][0],) and report.summaries_refreshed == (summary.item_id,)
    assert summary.content == "The user is allergic to peanuts, penicillin and latex"

    report = await forget_item(
        conn, UserKey("acme", "alice"), members[0][0], summaries=ClusterSummaries(offline_cluster_summarizer), now=at(7)
    )
    assert report.summaries_deleted == (summary.item_id,) and await summaries(conn) == []
    assert [i.content for i in await list_items(conn, UserKey("acme", "alice"))] == [m[1] for m in members[2:]]


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        ("   ", "empty"),
        ("The user is allergic to peanuts, shellfish and penicillin. " * 3, "longer than its members"),
        ("The user has some allergies", "leaves out 3 of 3"),
        ("The user is allergic to peanuts and shellfish", "leaves out 1 of 3"),
        (RuntimeError("model down"), "model down"),
    ],
)
async def test_an_unusable_summary_leaves_the_cluster_as_it_was(conn, answer, reason):
    for n, what in enumerate(("peanuts", "shellfish", "penicillin")):
        await allergy(conn, what, n)
    outcome = await refresh_cluster(conn, ALLERGIES, ClusterSummaries(CountingSummarizer(answer)), now=at(3))
    assert outcome.outcome in ("rejected", "failed") and reason in outcome.reason
    assert await summaries(conn) == []
    assert await pending_clusters(conn, tenant_id="acme", user_id="alice") == [ALLERGIES]
    # An accepted summary, then a bad refresh: the old text stays.
    await refresh_cluster(conn, ALLERGIES, ClusterSummaries(offline_cluster_summarizer), now=at(4))
    await allergy(conn, "latex", 5)
    outcome = await refresh_cluster(conn, ALLERGIES, ClusterSummaries(CountingSummarizer(answer)), now=at(5))
    assert outcome.outcome in ("rejected", "failed")
    (summary,) = await summaries(conn)
    assert summary.content == "The user is allergic to peanuts, shellfish and penicillin"
    assert await pending_clusters(conn) == [ALLERGIES]


async def test_pending_clusters_finds_what_the_inline_path_missed(conn, database_url):
    for n, what in enumerate(("peanuts", "shellfish", "penicillin")):
        await allergy(conn, what, n)
    await remember(
        conn,
        scope=ItemScope(tenant_id="acme", user_id="bob"),
        source=ItemOrigin(conversation_id=None, memory_id=None),
        now=at(0),
        items=items(decisions=[("decisions", f"Decided: option {n}") for n in range(3)]),
    )
    bob = Cluster("acme", "bob", "", "", "decision", "decisions")
    assert await pending_clusters(conn) == [ALLERGIES, bob]
    assert await pending_clusters(conn, tenant_id="acme", user_id="bob") == [bob]
    assert await pending_clusters(conn, tenant_id="other") == []
    made = await refresh_pending_clusters(conn, ClusterSummaries(offline_cluster_summarizer), now=at(1))
    assert [(o.cluster, o.outcome) for o in made] == [(ALLERGIES, "created"), (bob, "created")]
    assert await pending_clusters(conn) == []
    # A member closed behind the summary's back (no refresh ran): the cluster is pending again, then removed.
    execute(
        database_url,
        "UPDATE items SET valid_during = tstzrange(lower(valid_during), %s)"
        " WHERE user_id = 'bob' AND content = 'Decided: option 0'",
        [at(2)],
    )
    assert await pending_clusters(conn) == [bob]
    assert (
        await refresh_cluster(conn, bob, ClusterSummaries(offline_cluster_summarizer), now=at(2))
    ).outcome == "deleted"
    assert await pending_clusters(conn, min_items=4) == [ALLERGIES]  # a summary below a raised threshold


async def test_concurrent_refreshers_make_one_summary(connect, database_url):
    first = await connect()
    for n, what in enumerate(("peanuts", "shellfish", "penicillin")):
        await allergy(first, what, n)

    calls = []

    async def slow(members: list[str]) -> str:
        calls.append(members)
        await asyncio.sleep(0.2)  # a slow model: the other refreshers arrive while it runs
        return await offline_cluster_summarizer(members)

    conns = [await connect() for _ in range(6)]
    outcomes = await asyncio.gather(*(refresh_cluster(c, ALLERGIES, ClusterSummaries(slow), now=at(3)) for c in conns))
    assert sorted(o.outcome for o in outcomes) == ["created"] + ["unchanged"] * 5
    assert len(calls) == 1  # they waited for the first and found its summary: one model call
    assert query(database_url, "SELECT count(*) FROM items WHERE is_summary") == [(1,)]


def test_the_quality_check_and_the_offline_summarizer():
    members = ["The user is allergic to peanuts", "The user is allergic to shellfish"]
    assert offline_cluster_summary_text(members) == "The user is allergic to peanuts and shellfish"
    assert summary_rejection(offline_cluster_summary_text(members), members) is None
    unrelated = ["Decided: use Postgres", "Ship on Fridays", "Tests first"]
    joined = offline_cluster_summary_text(unrelated)
    assert joined == "Decided: use Postgres; Ship on Fridays; Tests first"
    assert summary_rejection(joined, unrelated) is None
    cjk = ["用户对花生过敏", "用户对贝类过敏", "用户对青霉素过敏"]
    assert summary_rejection("用户对花生、贝类和青霉素过敏", cjk) is None
    assert "leaves out 1 of 3" in summary_rejection("用户对花生和贝类过敏", cjk)


async def test_summaries_are_a_view_of_the_present(conn):
    for n, what in enumerate(("peanuts", "shellfish", "penicillin")):
        await allergy(conn, what, n)
    await refresh_cluster(conn, ALLERGIES, ClusterSummaries(offline_cluster_summarizer), now=at(3))
    assert len(await list_items(conn, UserKey("acme", "alice"))) == 4
    assert len(await list_items(conn, UserKey("acme", "alice"), where=ItemFilter(include_summaries=False))) == 3
    # As of a date the members were held, the summary (refreshed in place, so of no fixed date) is not read.
    assert all(
        not i.is_summary for i in await list_items(conn, UserKey("acme", "alice"), where=ItemFilter(as_of=at(10)))
    )
    assert len(await list_items(conn, UserKey("acme", "alice"), where=ItemFilter(as_of=at(10)))) == 3
