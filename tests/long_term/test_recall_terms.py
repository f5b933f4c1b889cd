"""Full text's terms as recall reads a question: a speaker's name adds to a turn's score but does not match it
alone, a very short turn does not outrank one with content, a prefix does not collide with another word, and
the other forms of an irregular word are searched too."""

from __future__ import annotations

from typing import Any

from memory_agent.evaluation import store_conversation
from memory_agent.long_term.recall import recall
from memory_agent.long_term.recall.query_text import with_irregular_forms
from tests.long_term.recall_fixtures import at, conn  # noqa: F401 (conn is a fixture)

TENANT, USER = "t1", "mia"


def texts(result: Any) -> list[str]:
    return [hit.text for hit in result.ranked]


async def test_a_speakers_name_does_not_match_a_turn_alone(conn: Any) -> None:
    # Caroline speaks every other turn: her name is in half of the user's turns' full-text vectors.
    small_talk = ["Same here!", "Bye!", "Sure.", "Totally.", "Ha, yes.", "Okay then.", "Right.", "See you!"]
    turns = []
    for n in range(24):
        turns.append(("user", small_talk[n % len(small_talk)], at(0), "Caroline"))
        turns.append(("assistant", f"Noted, item {n}.", at(0), "Mel"))
    turns[30] = ("user", "My pottery class made a bowl this week, we glazed it blue.", at(0), "Caroline")
    turns[40] = ("user", "The pottery teacher praised the bowl.", at(0), "Caroline")
    await store_conversation(conn, "chat", turns, tenant_id=TENANT, user_id=USER)
    result = await recall(
        conn, tenant_id=TENANT, user_id=USER, query="What did Caroline say about pottery?", conversation_id="new"
    )
    # Only the turns that hold the question's own word are hits; the name ranks Caroline's pottery turns first.
    assert set(texts(result)) == {turns[30][1], turns[40][1]}
    # Asked for the name alone, it matches (no other term of the question does).
    alone = await recall(conn, tenant_id=TENANT, user_id=USER, query="Caroline", conversation_id="new")
    assert alone.fts_hits >= 2 and "Same here!" in texts(alone)


async def test_a_long_word_is_a_prefix_that_does_not_collide(conn: Any) -> None:
    await store_conversation(
        conn,
        "health",
        [
            ("user", "I understand the risks now.", at(0)),
            ("assistant", "Good.", at(0)),
            ("user", "My allergies are worse in spring.", at(0)),
            ("assistant", "Noted.", at(0)),
            ("user", "The doctor said I must undergo an operation.", at(0)),
        ],
        tenant_id=TENANT,
        user_id=USER,
    )
    undergo = await recall(conn, tenant_id=TENANT, user_id=USER, conversation_id="new", query="undergo")
    # Full text matches the one turn that holds the word ("under:*" matched "understand" too); what trigrams add,
    # as they do when full text finds fewer than two, is theirs.
    assert undergo.fts_hits == 1
    assert [hit.text for hit in undergo.ranked if "fts" in hit.paths] == [
        "The doctor said I must undergo an operation."
    ]
    # The prefix still brings a word's forms together: "allergic" finds "allergies".
    allergic = await recall(conn, tenant_id=TENANT, user_id=USER, conversation_id="new", query="Is she allergic?")
    assert texts(allergic)[0] == "My allergies are worse in spring."


async def test_the_other_forms_of_an_irregular_word_are_searched(conn: Any) -> None:
    await store_conversation(
        conn,
        "friends",
        [("user", "We met at the climbing gym in 2021.", at(0)), ("assistant", "Nice story.", at(0))],
        tenant_id=TENANT,
        user_id=USER,
    )
    result = await recall(conn, tenant_id=TENANT, user_id=USER, query="When did they meet?", conversation_id="new")
    assert result.fts_hits == 1 and texts(result) == ["We met at the climbing gym in 2021."]
    assert with_irregular_forms("When did they meet?") == "When did they meet? met"
    assert with_irregular_forms("Where do you live?") == "Where do you live?"
