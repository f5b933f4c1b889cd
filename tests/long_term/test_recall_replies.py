"""A recalled question is shown as its answer: the turn that matched a query is often the question the user was
asked about it, and what was said is the reply after it."""

from __future__ import annotations

from typing import Any

from memory_agent.evaluation import store_conversation
from memory_agent.long_term.recall import RecallSettings, recall
from memory_agent.long_term.recall.replies import asks
from tests.long_term.recall_fixtures import at, conn  # noqa: F401 (conn is a fixture)

TENANT, USER = "t1", "ana"

CONCERT = [
    ("user", "Work was long today, I'm tired.", at(0)),
    ("assistant", "Rest a little then. Anything nice lately?", at(0)),
    ("user", "Not much, just the usual week.", at(0)),
    ("assistant", "Oh nice! Did you go to the Lumen Orchestra concert on Friday?", at(0)),
    ("user", "Yes, it was amazing: they played Sibelius and the hall was full.", at(0)),
    ("assistant", "Sounds like a wonderful evening.", at(0)),
    ("user", "It was. Bye for now!", at(0)),
]


async def test_the_reply_to_a_matching_question_is_the_hit(conn: Any) -> None:
    await store_conversation(conn, "week", CONCERT, tenant_id=TENANT, user_id=USER)
    result = await recall(
        conn, tenant_id=TENANT, user_id=USER, query="Did Ana go to the Lumen Orchestra concert?", conversation_id="new"
    )
    first = result.ranked[0]
    # Only the question holds "Lumen Orchestra concert"; the answer is the turn after it.
    assert (first.kind, first.conversation_id, first.sequences) == ("turn", "week", [4])
    assert first.text.startswith("Yes, it was amazing")
    assert first.role == "user" and "fts" in first.paths  # the paths that found the question
    # Shown with its own neighbours, the question among them; provenance says so.
    assert [s for s, _, _ in first.context] == [2, 3, 5, 6]
    assert first.sources == [("week", s) for s in (2, 3, 4, 5, 6)]
    assert "#4 user" in result.block and "(before: #3 assistant) Oh nice! Did you go" in result.block
    # The question is not shown a second time as a hit of its own.
    assert [hit.sequences for hit in result.ranked if hit.kind == "turn"].count([3]) == 0


async def test_a_turn_that_tells_and_asks_back_stays_the_hit(conn: Any) -> None:
    told = "We adopted a puppy called Pixie from the shelter on Elm Street last week, she is so cute! Isn't she?"
    await store_conversation(
        conn,
        "pets",
        [("user", told, at(0)), ("assistant", "She is adorable! Congratulations.", at(0))],
        tenant_id=TENANT,
        user_id=USER,
    )
    result = await recall(conn, tenant_id=TENANT, user_id=USER, query="Where is Pixie from?", conversation_id="new")
    assert (result.ranked[0].sequences, result.ranked[0].text) == ([0], told)


async def test_a_question_without_a_reply_of_the_other_side_stays(conn: Any) -> None:
    await store_conversation(
        conn,
        "own",
        [
            ("user", "Should I repaint the Volvo green?", at(0)),
            ("user", "Or keep it grey, I wonder.", at(0)),
            ("assistant", "Green suits it.", at(0)),
            ("user", "Which garage fixes a Volvo gearbox?", at(0)),
        ],
        tenant_id=TENANT,
        user_id=USER,
    )
    # Two turns after each (the default's four would show turn 3 beside turn 0, leaving it out of the ranking).
    settings = RecallSettings(neighbours_after=2)
    result = await recall(conn, tenant_id=TENANT, user_id=USER, query="Volvo", conversation_id="new", settings=settings)
    # Turn 0's next turn is the user's own (no reply); turn 3 is the last of its conversation.
    assert sorted(hit.sequences[0] for hit in result.ranked) == [0, 3]


def test_what_counts_as_a_question() -> None:
    assert asks("Wow, that's great, Caroline! What kind of counseling do you want to pursue?")
    assert asks("Did you go?? 😊")
    assert asks("你周末去哪儿了？")
    assert not asks("I went to the concert.")
    assert not asks("Did you go? I did, and it was the best evening of the year for the whole family and friends.")
    # Said before the question: more than a greeting, so the turn tells something.
    assert not asks("We adopted a puppy called Pixie from the shelter on Elm Street last week, so cute! Isn't she?")
