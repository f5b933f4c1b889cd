"""Recall reads the key insights of weekly and monthly consolidation notes (kind 'summary', with the note as
provenance): only the user's own, in their tenant; dailies are not recalled; forget_user erases the notes.

Notes are written with the consolidation writer's own statement (`insert_note`).
"""

from __future__ import annotations

from datetime import date, timedelta
from typing import Any

from memory_agent import resources
from memory_agent.evaluation import store_conversation
from memory_agent.long_term.forget import forget_user
from memory_agent.long_term.lineage import Lineage
from memory_agent.long_term.recall import RecallSettings, recall
from memory_agent.schemas.keys import UserKey
from tests.long_term.recall_fixtures import at, conn  # noqa: F401 (conn is a fixture)
from tests.long_term.test_forget import tables_holding

TENANT, USER = "t1", "ana"
MARATHON = "Ana trains for the Lisbon marathon in October"
VEGAN = "Ana switched to a vegan diet"


async def write_note(
    conn: Any, *, period: str, start: date, insights: list[str], user_id: str = USER, tenant_id: str = TENANT
) -> int:
    end = start + timedelta(days={"daily": 0, "weekly": 6, "monthly": 27}[period])
    async with conn.cursor() as cur:
        await cur.execute(
            resources.queries()["insert_note"],
            {
                "user_id": user_id,
                "tenant_id": tenant_id,
                "period": period,
                "period_start": start,
                "period_end": end,
                "content": "\n".join(insights),
                "consolidated": "\n".join(insights),
                "insights": "[]",
                "key_insights": insights,
                "notes_consolidated": 7,
                "model": "offline",
                "input_tokens": 0,
                "output_tokens": 0,
                "now": at(30),
                "force": False,
                **Lineage().params(),
            },
        )
        row = await cur.fetchone()
    assert row is not None
    return int(row["note_id"] if isinstance(row, dict) else row[0])


def insights_of(result: Any) -> list[Any]:
    return [hit for hit in result.results if hit.note_id is not None]


async def test_a_weekly_key_insight_is_recalled_with_its_note(conn: Any) -> None:
    await store_conversation(
        conn, "ana-1", [("user", "What should I cook tonight?", at(0))], tenant_id=TENANT, user_id=USER
    )
    weekly = await write_note(conn, period="weekly", start=date(2025, 3, 3), insights=[MARATHON, VEGAN])
    await write_note(conn, period="daily", start=date(2025, 3, 4), insights=["Ana ran a marathon loop today"])

    result = await recall(conn, tenant_id=TENANT, user_id=USER, query="How is the marathon training going?")

    (hit,) = insights_of(result)
    assert hit.kind == "summary" and hit.text == MARATHON  # the matching insight, not the whole note
    assert (hit.note_id, hit.period, hit.period_start) == (weekly, "weekly", date(2025, 3, 3))
    assert hit.role == "weekly insight" and "fts" in hit.paths
    assert result.retrieval_path == "summaries_only"
    assert "[weekly summary of 2025-03-03] " + MARATHON in result.block
    # A closed question about something else does not bring the note.
    other = await recall(conn, tenant_id=TENANT, user_id=USER, query="What should I cook tonight?")
    assert insights_of(other) == []


async def test_a_monthly_insight_ranks_in_the_summaries_tier_and_cjk_insights_match_by_bigrams(conn: Any) -> None:
    monthly = await write_note(
        conn,
        period="monthly",
        start=date(2025, 3, 1),
        insights=["Ana adopted a border collie named Pixel", "安娜搬到了柏林"],
    )
    found = await recall(conn, tenant_id=TENANT, user_id=USER, query="collie")
    assert [(h.note_id, h.period, h.text) for h in insights_of(found)] == [
        (monthly, "monthly", "Ana adopted a border collie named Pixel")
    ]
    cjk = await recall(conn, tenant_id=TENANT, user_id=USER, query="她搬到柏林了吗？")
    assert [(h.note_id, h.text) for h in insights_of(cjk)] == [(monthly, "安娜搬到了柏林")]
    assert "trgm" in insights_of(cjk)[0].paths


async def test_other_users_and_tenants_never_see_the_insight(conn: Any) -> None:
    await write_note(conn, period="weekly", start=date(2025, 3, 3), insights=[MARATHON])
    await write_note(conn, period="weekly", start=date(2025, 3, 3), insights=["Bob plays chess"], user_id="bob")
    for tenant, user in ((TENANT, "bob"), ("t2", USER)):
        result = await recall(conn, tenant_id=tenant, user_id=user, query="Lisbon marathon")
        assert insights_of(result) == [], (tenant, user)
    # The same user with another text-search configuration (computed vectors, custom plans) still finds it.
    simple = await recall(
        conn,
        tenant_id=TENANT,
        user_id=USER,
        query="Lisbon marathon",
        settings=RecallSettings(text_search_config="simple"),
    )
    assert [h.text for h in insights_of(simple)] == [MARATHON]


async def test_as_of_before_the_note_was_written_does_not_recall_it(conn: Any) -> None:
    await write_note(conn, period="weekly", start=date(2025, 3, 3), insights=[MARATHON])
    before = await recall(conn, tenant_id=TENANT, user_id=USER, query="Lisbon marathon", as_of=at(29))
    after = await recall(conn, tenant_id=TENANT, user_id=USER, query="Lisbon marathon", as_of=at(31))
    assert insights_of(before) == [] and [h.text for h in insights_of(after)] == [MARATHON]


async def test_forget_user_erases_the_notes_and_recall_no_longer_finds_them(conn: Any, database_url: str) -> None:
    await write_note(conn, period="weekly", start=date(2025, 3, 3), insights=[MARATHON])
    await write_note(conn, period="daily", start=date(2025, 3, 4), insights=[MARATHON])
    await write_note(conn, period="weekly", start=date(2025, 3, 3), insights=["Bob plays chess"], user_id="bob")

    await forget_user(conn, UserKey(TENANT, USER))

    result = await recall(conn, tenant_id=TENANT, user_id=USER, query="Lisbon marathon")
    assert insights_of(result) == []
    async with conn.cursor() as cur:
        await cur.execute("SELECT user_id, count(*) AS notes FROM consolidation_notes GROUP BY user_id")
        rows = await cur.fetchall()
    assert [(r["user_id"], r["notes"]) for r in rows] == [("bob", 1)]
    assert tables_holding(database_url, "Lisbon") == []  # no text or JSON column of any table keeps it
