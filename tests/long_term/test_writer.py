"""remember(): no duplicates, supersession with history, as_of, todos, and races decided by the database."""

from __future__ import annotations

import asyncio
import itertools
from datetime import datetime

import pytest

from memory_agent.errors import InvalidInputError
from memory_agent.long_term import ItemFilter, ItemOrigin, ItemScope, item_history, list_items, remember
from memory_agent.schemas.keys import UserKey
from tests.conftest import query
from tests.long_term.conftest import T0, at, items

ALICE = {"tenant_id": "acme", "user_id": "alice"}


async def say(conn, structured, *, now: datetime, conversation_id="c1", memory_id=1, **scope):
    return await remember(
        conn,
        scope=ItemScope(**{**ALICE, **scope}),
        source=ItemOrigin(conversation_id=conversation_id, memory_id=memory_id),
        items=structured,
        now=now,
    )


async def test_the_same_statement_100_times_is_one_row(conn, database_url):
    for n in range(100):
        outcomes = await say(
            conn,
            items(
                facts=[
                    (
                        "allergies",
                        "The user is allergic to peanuts." if n % 2 else "the user is ALLERGIC to peanuts",
                        {"single_valued": False, "importance": 0.5 + n / 1000, "source_sequences": [n]},
                    )
                ]
            ),
            now=at(n),
            conversation_id=f"c{n % 7}",
            memory_id=n,
        )
        assert [o.outcome for o in outcomes] == (["inserted"] if n == 0 else ["unchanged"])
    rows = query(database_url, "SELECT count(*), max(importance)::float8 FROM items")
    assert rows == [(1, pytest.approx(0.599, abs=1e-3))]
    (item,) = await list_items(conn, UserKey("acme", "alice"))
    assert len(item.sources) == 100 and {s.conversation_id for s in item.sources} == {f"c{i}" for i in range(7)}


async def test_a_new_value_closes_the_previous_version_and_as_of_reads_the_past(conn):
    for day, city in ((0, "Lyon"), (10, "Berlin"), (20, "Paris")):
        await say(conn, items(facts=[("home_city", f"The user lives in {city}")]), now=at(day))
    history = await item_history(conn, ItemScope("acme", "alice"), "fact", "home_city")
    assert [(h.content, h.valid_from, h.valid_to) for h in history] == [
        ("The user lives in Lyon", at(0), at(10)),
        ("The user lives in Berlin", at(10), at(20)),
        ("The user lives in Paris", at(20), None),
    ]
    for day, city in ((-1, None), (0, "Lyon"), (9.9, "Lyon"), (10, "Berlin"), (25, "Paris")):
        held = await list_items(conn, UserKey("acme", "alice"), where=ItemFilter(as_of=at(day), key="home_city"))
        assert [i.content for i in held] == ([f"The user lives in {city}"] if city else [])
    (current,) = await list_items(conn, UserKey("acme", "alice"))
    assert current.content == "The user lives in Paris" and current.is_current
    # Restating the current value changes nothing; restating an old one is a new version.
    assert [
        o.outcome for o in await say(conn, items(facts=[("home_city", "the user lives in paris.")]), now=at(30))
    ] == ["unchanged"]
    (back,) = await say(conn, items(facts=[("home_city", "The user lives in Lyon")]), now=at(40))
    assert back.outcome == "superseded" and back.closed_item_ids == (history[2].item_id,)
    assert len(await item_history(conn, ItemScope("acme", "alice"), "fact", "home_city")) == 4


async def test_only_the_same_key_is_ever_closed(conn):
    await say(
        conn,
        items(
            facts=[
                ("home_city", "The user lives in Lyon"),
                ("allergies", "The user is allergic to peanuts", {"single_valued": False}),
                ("allergies", "The user is allergic to shellfish", {"single_valued": False}),
            ],
            preferences=[("ui_theme", "The user prefers the dark theme")],
        ),
        now=at(0),
    )
    outcomes = await say(conn, items(facts=[("home_city", "The user lives in Berlin")]), now=at(1))
    assert [(o.outcome, o.cluster.key) for o in outcomes] == [("superseded", "home_city")]
    current = {(i.key, i.content) for i in await list_items(conn, UserKey("acme", "alice"))}
    assert current == {
        ("home_city", "The user lives in Berlin"),
        ("allergies", "The user is allergic to peanuts"),
        ("allergies", "The user is allergic to shellfish"),
        ("ui_theme", "The user prefers the dark theme"),
    }
    # A preference and a fact with the same key are different items; so are projects and environments.
    await say(conn, items(preferences=[("home_city", "The user would rather live in Rome")]), now=at(2))
    await say(conn, items(facts=[("home_city", "The user lives in Oslo")]), now=at(2), project="p2")
    await say(conn, items(facts=[("home_city", "The user lives in Kyiv")]), now=at(2), environment="staging")
    assert len(await list_items(conn, UserKey("acme", "alice"), where=ItemFilter(key="home_city"))) == 4
    assert [
        i.content
        for i in await list_items(
            conn,
            UserKey("acme", "alice"),
            where=ItemFilter(item_type="fact", key="home_city", project="", environment=""),
        )
    ] == ["The user lives in Berlin"]


async def test_todos_close_when_done_and_decisions_accumulate(conn):
    await say(
        conn,
        items(
            todos=[("todo_call_mom", "Remind the user to call mom"), ("todo_pay_rent", "Remind the user to pay rent")],
            decisions=[("decisions", "Decided: use Postgres"), ("decisions", "Decided: ship on Fridays")],
        ),
        now=at(0),
    )
    await say(conn, items(decisions=[("decisions", "Decided: write tests first")]), now=at(1))
    (done,) = await say(conn, items(todos=[("todo_call_mom", "Done: called mom on Sunday")]), now=at(2))
    assert done.outcome == "closed" and len(done.closed_item_ids) == 1
    (again,) = await say(conn, items(todos=[("todo_call_mom", "done: call mom")]), now=at(3))
    assert again.outcome == "nothing_to_close"
    current = sorted((i.key, i.content) for i in await list_items(conn, UserKey("acme", "alice")))
    assert current == [
        ("decisions", "Decided: ship on Fridays"),
        ("decisions", "Decided: use Postgres"),
        ("decisions", "Decided: write tests first"),
        ("todo_pay_rent", "Remind the user to pay rent"),
    ]
    (was,) = await list_items(conn, UserKey("acme", "alice"), where=ItemFilter(as_of=at(1), key="todo_call_mom"))
    assert was.content == "Remind the user to call mom" and was.valid_to == at(2)
    # The todo can come back later: a new open version after the closed one.
    (reopened,) = await say(conn, items(todos=[("todo_call_mom", "Remind the user to call mom")]), now=at(4))
    assert reopened.outcome == "inserted"


async def test_a_late_clock_never_overlaps_history(conn):
    await say(conn, items(facts=[("home_city", "The user lives in Lyon")]), now=at(10))
    (late,) = await say(conn, items(facts=[("home_city", "The user lives in Berlin")]), now=at(5))
    assert late.outcome == "superseded"
    history = await item_history(conn, ItemScope("acme", "alice"), "fact", "home_city")
    assert history[0].valid_to == history[1].valid_from > at(10) and history[1].valid_to is None


async def test_bad_input_names_the_problem_and_writes_nothing(conn, database_url):
    good = items(facts=[("home_city", "The user lives in Lyon")])
    with pytest.raises(InvalidInputError, match="timezone-aware"):
        await say(conn, good, now=datetime(2026, 1, 1))
    with pytest.raises(InvalidInputError, match="user_id must be a non-empty string"):
        await remember(
            conn,
            scope=ItemScope(tenant_id="acme", user_id=" "),
            source=ItemOrigin(conversation_id=None, memory_id=None),
            items=good,
            now=T0,
        )
    with pytest.raises(InvalidInputError, match="tenant_id"):
        await remember(
            conn,
            scope=ItemScope(tenant_id=None, user_id="a"),
            source=ItemOrigin(conversation_id=None, memory_id=None),
            items=good,
            now=T0,
        )
    assert query(database_url, "SELECT count(*) FROM items") == [(0,)]


async def test_writes_belong_to_the_callers_transaction(conn, database_url):
    class Abort(Exception):
        pass

    with pytest.raises(Abort):
        async with conn.transaction():
            await say(conn, items(facts=[("home_city", "The user lives in Lyon")]), now=T0)
            raise Abort
    assert query(database_url, "SELECT count(*) FROM items") == [(0,)]
    assert query(database_url, "SELECT count(*) FROM item_sources") == [(0,)]


WRITERS = 24


async def test_concurrent_writers_of_one_fact_leave_one_current_row(connect, database_url):
    conns = [await connect() for _ in range(WRITERS)]
    fact = items(facts=[("allergies", "The user is allergic to peanuts", {"single_valued": False})])
    outcomes = await asyncio.gather(
        *(say(c, fact, now=at(0), conversation_id=f"c{n}", memory_id=n) for n, c in enumerate(conns))
    )
    assert sorted(o.outcome for (o,) in outcomes) == ["inserted"] + ["unchanged"] * (WRITERS - 1)
    assert query(database_url, "SELECT count(*) FROM items") == [(1,)]
    assert query(database_url, "SELECT count(DISTINCT conversation_id) FROM item_sources") == [(WRITERS,)]


async def test_concurrent_writers_of_different_values_leave_one_current_version(connect, database_url):
    conns = [await connect() for _ in range(WRITERS)]
    outcomes = await asyncio.gather(
        *(
            say(c, items(facts=[("home_city", f"The user lives in City{n}")]), now=at(0), memory_id=n)
            for n, c in enumerate(conns)
        )
    )
    assert sorted(o.outcome for (o,) in outcomes) == ["inserted"] + ["superseded"] * (WRITERS - 1)
    rows = query(
        database_url,
        "SELECT content, lower(valid_during), upper(valid_during) FROM items ORDER BY lower(valid_during)",
    )
    assert len(rows) == WRITERS and [r[2] is None for r in rows].count(True) == 1
    # One history, each version ending where the next begins: no overlap, no hole.
    assert all(earlier[2] == later[1] for earlier, later in itertools.pairwise(rows))
    assert {r[0] for r in rows} == {f"The user lives in City{n}" for n in range(WRITERS)}


async def test_the_constraint_decides_when_a_writer_bypasses_the_slot_lock(connect, database_url):
    """A row opened by another path (no slot lock) while remember() runs: the insert blocks on it, fails with
    23P01 when it commits, and the retry supersedes it instead of adding a second current row."""
    other, mine = await connect(), await connect()
    async with other.transaction():
        await other.execute(
            "INSERT INTO items (user_id, tenant_id, item_type, key, value_slot, content, content_norm, valid_during)"
            " VALUES ('alice', 'acme', 'fact', 'home_city', '', 'The user lives in Rome', 'the user lives in rome',"
            " tstzrange(%s, NULL))",
            [at(0)],
        )
        writer = asyncio.create_task(say(mine, items(facts=[("home_city", "The user lives in Oslo")]), now=at(1)))
        await asyncio.sleep(0.3)
        assert not writer.done()  # blocked on the uncommitted row in the exclusion index
    (outcome,) = await writer
    assert outcome.outcome == "superseded"
    assert query(database_url, "SELECT content, upper(valid_during) IS NULL FROM items ORDER BY item_id") == [
        ("The user lives in Rome", False),
        ("The user lives in Oslo", True),
    ]
    with pytest.raises(Exception, match="items_one_version_at_a_time"):
        await other.execute(
            "INSERT INTO items (user_id, tenant_id, item_type, key, value_slot, content, content_norm, valid_during)"
            " VALUES ('alice', 'acme', 'fact', 'home_city', '', 'x', 'x', tstzrange(%s, NULL))",
            [at(5)],
        )


async def test_a_todo_said_done_in_the_users_words_closes(conn):
    from memory_agent.llm.extract import Statement, extract_items

    opened = extract_items(
        [Statement(0, "user", "Remind me to call the dentist."), Statement(2, "user", "Remind me to buy milk.")]
    )
    await say(conn, opened, now=at(0))
    done = extract_items([Statement(4, "user", "Mark call the dentist as done, thanks.")])
    assert [(i.key, i.content) for _, i in done.typed()] == [("todo_call_the_dentist", "Done: call the dentist")]
    assert [o.outcome for o in await say(conn, done, now=at(1))] == ["closed"]
    # Opened and done within one summary: recorded, and closed.
    both = extract_items(
        [Statement(6, "user", "Remind me to water the plants."), Statement(8, "user", "done: water the plants")]
    )
    assert sorted(o.outcome for o in await say(conn, both, now=at(2))) == ["closed", "inserted"]
    assert [i.content for i in await list_items(conn, UserKey("acme", "alice"))] == ["Remind the user to buy milk"]
    assert len(await item_history(conn, ItemScope("acme", "alice"), "todo", "todo_water_the_plants")) == 1
