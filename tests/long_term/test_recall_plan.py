"""How recall's statement runs: on one generic plan per connection with the stored 'english' vectors, with its
settings (trigram threshold, plan cache mode) in force for the statement and gone after it."""

from __future__ import annotations

from typing import Any

from memory_agent.long_term.recall import RecallSettings, recall
from tests.long_term.recall_fixtures import conn  # noqa: F401 (conn is a fixture)
from tests.long_term.test_recall import CURRENT, OLD, TENANT, USER, seed, turns_of

PREPARED = "SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE statement LIKE 'WITH user_turns%'"


async def settings_now(conn: Any) -> tuple[str, str]:
    cur = await conn.execute(
        "SELECT current_setting('pg_trgm.word_similarity_threshold') AS t, current_setting('plan_cache_mode') AS m"
    )
    row = await cur.fetchone()
    return row["t"], row["m"]


async def test_the_english_statement_runs_on_one_generic_plan_and_its_settings_end_with_it(conn: Any) -> None:
    await seed(conn)
    before = await settings_now(conn)
    for query in ("peanuts", "Ingmar", "里昂", "what did I tell you before about the violin?") * 2:
        await recall(conn, tenant_id=TENANT, user_id=USER, query=query, conversation_id=CURRENT)
    cur = await conn.execute(PREPARED)
    assert [(r["generic_plans"], r["custom_plans"]) for r in await cur.fetchall()] == [(8, 0)]
    assert await settings_now(conn) == before  # nothing stays set on the (pooled) connection

    # The threshold reaches the statement: word_similarity('Ingmar', '... Ingrid.') is 0.43.
    found = await recall(conn, tenant_id=TENANT, user_id=USER, query="Ingmar", conversation_id=CURRENT)
    assert found.trgm_hits >= 1 and (OLD, 4) in turns_of(found)
    strict = await recall(
        conn,
        tenant_id=TENANT,
        user_id=USER,
        query="Ingmar",
        conversation_id=CURRENT,
        settings=RecallSettings(trgm_threshold=0.5),
    )
    assert strict.trgm_hits == 0


async def test_a_computed_configuration_is_planned_for_each_call(conn: Any) -> None:
    await seed(conn)
    simple = RecallSettings(text_search_config="simple")
    for _ in range(6):
        result = await recall(conn, tenant_id=TENANT, user_id=USER, query="peanuts", settings=simple)
        assert result.fts_hits >= 2
    cur = await conn.execute(PREPARED)
    assert await cur.fetchall() == []  # never prepared: its configuration must be a constant for the planner


async def test_inside_the_callers_transaction_the_settings_last_until_it_ends(conn: Any) -> None:
    await seed(conn)
    async with conn.transaction():
        result = await recall(conn, tenant_id=TENANT, user_id=USER, query="Ingmar", conversation_id=CURRENT)
        assert result.trgm_hits >= 1
    assert (await settings_now(conn))[1] == "auto"


async def test_turns_are_searched_through_indexes_that_hold_named_users_only(conn: Any) -> None:
    # A conversation without a user (scope 'conversation:<thread id>') is never recalled: its messages are left
    # out of the text-search indexes, so a round end does not index them three times over.
    cur = await conn.execute(
        "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = current_schema() AND tablename = 'messages'"
        " AND indexdef LIKE '%USING gin%' ORDER BY 1"
    )
    searched = {r["indexname"]: r["indexdef"] for r in await cur.fetchall()}
    assert set(searched) == {
        "idx_messages_named_user_fts_english",
        "idx_messages_named_user_fts_simple",
        "idx_messages_named_user_trgm",
    }
    assert all(d.endswith("WHERE (NOT starts_with(user_id, 'conversation:'::text))") for d in searched.values())
    # The statement carries the indexes' condition: its generic plan reads through them. Without it the planner
    # cannot prove that they hold the user's turns, and reads every turn of theirs (20,000 here) for each path.
    await seed(conn)
    await conn.execute(
        "INSERT INTO conversations (tenant_id, user_id, conversation_id, next_sequence, round_count)"
        " VALUES (%(t)s, %(u)s, 'ana-long', 20000, 10000)",
        {"t": TENANT, "u": USER},
    )
    await conn.execute(
        "INSERT INTO messages (tenant_id, user_id, conversation_id, sequence_number, round_number, role, content,"
        " message) SELECT %(t)s, %(u)s, 'ana-long', n, n / 2 + 1, 'user', 'turn ' || n || ' about ' || md5(n::text),"
        " jsonb_build_object('type', 'human', 'data', jsonb_build_object('content', 'turn'))"
        " FROM generate_series(0, 19999) AS n",
        {"t": TENANT, "u": USER},
    )
    await conn.execute("VACUUM ANALYZE messages")  # the rows out of GIN's pending list, as autovacuum does
    await recall(conn, tenant_id=TENANT, user_id=USER, query="peanuts", conversation_id=CURRENT)
    cur = await conn.execute(PREPARED.replace("generic_plans, custom_plans", "statement"))
    statement = (await cur.fetchone())["statement"]
    cur = await conn.execute("EXPLAIN (GENERIC_PLAN, COSTS OFF) " + statement)
    plan = "\n".join(r["QUERY PLAN"] for r in await cur.fetchall())
    assert "Bitmap Index Scan on idx_messages_named_user_fts_english" in plan
    assert "Bitmap Index Scan on idx_messages_named_user_trgm" in plan
