"""Full text's terms as recall reads a question: a speaker's name adds to a turn's score but does not match it
alone, the named speaker's own turns come first where several people speak, a very short turn does not outrank one with content, a prefix does not collide with another word, and
the other forms of an irregular word are searched too."""

from __future__ import annotations

from typing import Any

from memory_agent.evaluation import store_conversation
from memory_agent.long_term.recall import recall
from memory_agent.long_term.recall.query_text import with_irregular_forms
from memory_agent.settings import RecallSettings
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


def pottery_chat(second_speaker: str | None) -> list[tuple[Any, ...]]:
    """Caroline (the user) tells of her pottery; the other speaker answers with her name and the same words, in a
    shorter turn that full text alone ranks higher."""
    told = "I took a pottery class this week and we glazed a big blue bowl together, my first one."
    answer = "Caroline, your pottery bowl sounds lovely!"
    turns: list[tuple[Any, ...]] = []
    for n in range(12):
        turns.append(("user", f"Caroline here again, note {n}.", at(0), "Caroline"))
        turns.append(("assistant", f"Noted, item {n}.", at(0), *([second_speaker] if second_speaker else [])))
    turns[10] = ("user", told, at(0), "Caroline")
    turns[11] = ("assistant", answer, at(0), *([second_speaker] if second_speaker else []))
    return turns


async def test_the_named_speakers_own_turns_come_first_where_several_people_speak(conn: Any) -> None:
    told, answer = pottery_chat(None)[10][1], pottery_chat(None)[11][1]
    await store_conversation(conn, "two people", pottery_chat("Mel"), tenant_id=TENANT, user_id=USER)
    await store_conversation(conn, "an assistant", pottery_chat(None), tenant_id=TENANT, user_id="solo")
    query = "What did Caroline say about pottery?"

    async def first_two(user_id: str, boost: float) -> list[str]:
        settings = RecallSettings(speaker_boost=boost)
        result = await recall(
            conn, tenant_id=TENANT, user_id=user_id, query=query, conversation_id="new", settings=settings
        )
        return texts(result)[:2]

    # Two named speakers: Caroline's own turn first; without the boost, Mel's shorter turn that names her.
    assert await first_two(USER, 1.3) == [told, answer]
    assert await first_two(USER, 1.0) == [answer, told]
    # A user and an assistant without a name: one speaker, the order full text gives.
    assert await first_two("solo", 1.3) == await first_two("solo", 1.0) == [answer, told]


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
