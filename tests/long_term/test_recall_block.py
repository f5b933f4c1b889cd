"""The recalled block shows each turn once: hits of one exchange share their neighbours, and a hit whose turns a
better hit already shows takes no room in the block."""

from __future__ import annotations

from collections import Counter
from typing import Any

from memory_agent.evaluation import store_conversation
from memory_agent.long_term.recall import RecallSettings, recall
from tests.long_term.recall_fixtures import at, conn  # noqa: F401 (conn is a fixture)

TENANT, USER = "t1", "ana"


async def test_turns_shared_by_two_hits_are_shown_once(conn: Any) -> None:
    # Every turn of this exchange matches; the middle one matches both words, so it ranks first and shows the
    # turns before and after it.
    await store_conversation(
        conn,
        "kayak",
        [
            ("user", "We rented a kayak on Saturday.", at(0)),
            ("assistant", "A kayak on the fjord near Bergen, I hope.", at(0)),
            ("user", "Yes, Bergen in the rain.", at(0)),
            ("assistant", "Rain is the rule there.", at(0)),
            ("user", "Bergen again next summer, with the kayak.", at(0)),
        ],
        tenant_id=TENANT,
        user_id=USER,
    )
    one_each_side = RecallSettings(neighbours_before=1, neighbours_after=1)
    result = await recall(
        conn, tenant_id=TENANT, user_id=USER, query="kayak Bergen fjord", conversation_id="new", settings=one_each_side
    )
    turns = [hit for hit in result.results if hit.kind == "turn"]
    assert (turns[0].sequences, [s for s, _, _ in turns[0].context]) == ([1], [0, 2])
    # Turn 0 and turn 2 are shown with turn 1 already: no hit of their own. Turn 4 is new, its neighbour 3 too.
    assert [hit.sequences[0] for hit in turns] == [1, 4]
    assert [s for s, _, _ in turns[1].context] == [3]
    assert turns[1].sources == [("kayak", 3), ("kayak", 4)]
    shown = Counter(line.split("#")[1].split()[0] for line in result.block.splitlines() if "#" in line)
    assert set(shown.values()) == {1}, result.block


async def test_where_turns_are_long_a_hit_is_shown_with_its_nearest_neighbours_not_left_out(conn: Any) -> None:
    # Long turns, as an assistant's answers often are: a hit with all six of its neighbours (each cut at 400
    # characters) is ~900 tokens, and a block of 2,000 held two such hits; the others were left out whole. Now the
    # third is shown with its nearest neighbours (the fourth, even alone, no longer fits).
    filler = " ".join(f"and then we talked about item {n} of the list at some length" for n in range(20))
    conversations = [f"trip{c}" for c in range(4)]
    for c, conversation in enumerate(conversations):
        turns = [("user" if i % 2 == 0 else "assistant", f"Turn {i}, {filler}", at(0)) for i in range(13)]
        turns[6] = ("user", f"The Lisbon tram number {c} was late. {filler}", at(0))
        await store_conversation(conn, conversation, turns, tenant_id=TENANT, user_id=USER)
    result = await recall(conn, tenant_id=TENANT, user_id=USER, query="Lisbon tram late", conversation_id="new")
    hits = [hit for hit in result.results if hit.kind == "turn"]
    assert result.estimated_tokens <= RecallSettings().max_tokens
    assert len(hits) == 3 and result.truncated, [hit.sequences for hit in hits]
    assert len(hits[0].context) == 6  # the first hit with all its neighbours
    narrowed = hits[-1]
    shown = [s for s, _, _ in narrowed.context]
    assert len(shown) < 6 and all(abs(s - 6) <= abs(t - 6) for s in shown for t in set(range(4, 11)) - {6, *shown})
    # Its provenance names what the model reads: its own turn and the neighbours shown, no more.
    assert narrowed.sources == sorted((narrowed.conversation_id, s) for s in [6, *shown])
