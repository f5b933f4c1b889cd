"""Recall on the real PostgreSQL: scope switch, trigram fallback, provenance, guardrails, as_of, isolation, vectors.

Turns and items are written with the evaluation's direct writers (evaluation.store_conversation,
store_item), keyed by (tenant, user) like the round path's.
"""

from __future__ import annotations

from typing import Any

import pytest

from memory_agent.errors import ConfigurationError, InvalidInputError
from memory_agent.evaluation import StoredItem, store_conversation, store_item
from memory_agent.long_term import ItemScope
from memory_agent.long_term.embedders import HashingEmbeddings
from memory_agent.long_term.embeddings import index_items
from memory_agent.long_term.recall import RecallSettings, recall, source_turns
from memory_agent.long_term.recall.query_text import cjk_bigrams, points_to_past
from tests.long_term.recall_fixtures import at, conn  # noqa: F401 (conn is a fixture)

TENANT, USER = "t1", "ana"
OLD, CURRENT = "ana-old", "ana-current"


async def seed(conn: Any) -> None:
    await store_conversation(
        conn,
        OLD,
        [
            ("user", "I'm allergic to peanuts, please remember it.", at(0)),
            ("assistant", "Noted, no peanuts in any recipe.", at(0)),
            ("user", "我以前住在里昂，现在搬家了。", at(0)),
            ("assistant", "好的，记住了。", at(0)),
            ("user", "My violin teacher is called Ingrid.", at(0)),
            ("assistant", "Ingrid, got it.", at(0)),
        ],
        tenant_id=TENANT,
        user_id=USER,
    )
    await store_conversation(
        conn,
        CURRENT,
        [
            ("user", "Any dessert ideas without peanuts?", at(10)),
            ("assistant", "A lemon tart has no peanuts at all.", at(10)),
            ("user", "Great, and a soup for tonight?", at(10)),
            ("assistant", "A leek and potato soup is easy.", at(10)),
        ],
        tenant_id=TENANT,
        user_id=USER,
    )


def turns_of(result: Any) -> set[tuple[str, int]]:
    return {(hit.conversation_id, hit.sequences[0]) for hit in result.results if hit.kind == "turn"}


def shown_turns(result: Any) -> set[tuple[str, int]]:
    """The turns the block shows: the hits' own and their neighbours (a turn is shown once)."""
    return {source for hit in result.results if hit.kind == "turn" for source in hit.sources}


async def test_this_conversation_first_when_it_has_enough_hits(conn: Any) -> None:
    await seed(conn)
    result = await recall(conn, tenant_id=TENANT, user_id=USER, query="peanuts dessert", conversation_id=CURRENT)
    assert result.fts_hits >= 2 and not result.user_wide
    assert turns_of(result) and {c for c, _ in turns_of(result)} == {CURRENT}
    assert result.retrieval_path == "fts"


async def test_user_wide_when_this_conversation_has_few_hits(conn: Any) -> None:
    await seed(conn)
    result = await recall(
        conn,
        tenant_id=TENANT,
        user_id=USER,
        query="Who teaches the violin?",
        conversation_id=CURRENT,
    )
    assert result.user_wide
    assert (OLD, 4) in turns_of(result)


@pytest.mark.parametrize("query", ["What did I say last time about peanuts?", "我之前说过 peanuts 的事吗？"])
async def test_user_wide_when_the_message_points_to_the_past(conn: Any, query: str) -> None:
    await seed(conn)
    result = await recall(conn, tenant_id=TENANT, user_id=USER, query=query, conversation_id=CURRENT)
    assert result.user_wide
    assert (OLD, 0) in shown_turns(result)  # the old conversation's statement, although this one mentions peanuts
    plain = await recall(
        conn,
        tenant_id=TENANT,
        user_id=USER,
        query="peanuts",
        conversation_id=CURRENT,
        paths=("fts",),
    )
    assert not plain.user_wide and (OLD, 0) not in shown_turns(plain)


def test_past_pointing_words() -> None:
    assert points_to_past("like I told you before")
    assert points_to_past("上次我们聊了什么") and points_to_past("我以前住在哪里")
    assert not points_to_past("what should I cook tonight")


async def test_trigram_fallback_finds_cjk_text(conn: Any) -> None:
    await seed(conn)
    result = await recall(conn, tenant_id=TENANT, user_id=USER, query="里昂", conversation_id=CURRENT)
    assert result.fts_hits == 0 and result.used_fallback
    assert result.retrieval_path == "trgm"
    assert (OLD, 2) in turns_of(result)
    assert cjk_bigrams("住在里昂") == ["住在", "在里", "里昂"]


async def test_trigram_fallback_finds_a_misspelled_short_query(conn: Any) -> None:
    await seed(conn)
    result = await recall(conn, tenant_id=TENANT, user_id=USER, query="Ingryd", conversation_id=CURRENT)
    assert result.fts_hits == 0 and result.trgm_hits >= 1
    assert (OLD, 4) in turns_of(result)


async def test_provenance_re_expands_to_the_source_turns(conn: Any) -> None:
    await seed(conn)

    async def allergies(content: str, **item: Any) -> int:
        stored = StoredItem(item_type="fact", key="allergies", content=content, **item)
        return await store_item(conn, scope=ItemScope(tenant_id=TENANT, user_id=USER), item=stored)

    fact = await allergies("The user is allergic to peanuts", valid_from=at(0), sources=[(OLD, 0)])
    other = await allergies("The user avoids peanut oil", valid_from=at(10), sources=[(CURRENT, 0)])
    summary = await allergies(
        "Allergies: peanuts, including peanut oil", valid_from=at(10), is_summary=True, source_item_ids=[fact, other]
    )
    result = await recall(conn, tenant_id=TENANT, user_id=USER, query="allergic peanuts", conversation_id=CURRENT)
    by_id = {hit.item_ids[0]: hit for hit in result.results if hit.kind != "turn"}
    assert by_id[fact].kind == "item" and by_id[fact].sources == [(OLD, 0)]
    assert by_id[summary].kind == "summary" and by_id[summary].source_item_ids == [fact, other]
    assert set(by_id[summary].sources) == {(OLD, 0), (CURRENT, 0)}
    turns = await source_turns(conn, by_id[fact], tenant_id=TENANT, user_id=USER)
    assert [t["content"] for t in turns] == ["I'm allergic to peanuts, please remember it."]
    summary_turns = await source_turns(conn, by_id[summary], tenant_id=TENANT, user_id=USER)
    assert [(t["conversation_id"], t["sequence_number"]) for t in summary_turns] == [(CURRENT, 0), (OLD, 0)]
    assert await source_turns(conn, by_id[fact], tenant_id=TENANT, user_id="bob") == []


async def test_guardrails_hold(conn: Any) -> None:
    long_turns = [
        ("user" if i % 2 == 0 else "assistant", f"Turn {i} about the garden: " + "tomatoes " * 80, at(1))
        for i in range(20)
    ]
    await store_conversation(conn, OLD, long_turns, tenant_id=TENANT, user_id=USER)
    settings = RecallSettings(max_tokens=300, max_turns=3, max_turn_chars=200)
    result = await recall(conn, tenant_id=TENANT, user_id=USER, query="garden tomatoes", settings=settings)
    turns = [hit for hit in result.results if hit.kind == "turn"]
    assert 1 <= len(turns) <= 3
    assert all(len(hit.text) <= 200 and hit.truncated for hit in turns)
    assert result.estimated_tokens <= 300 and result.truncated
    tight = await recall(
        conn,
        tenant_id=TENANT,
        user_id=USER,
        query="garden tomatoes",
        settings=RecallSettings(max_tokens=120, max_turns=6, max_turn_chars=200),
    )
    assert tight.estimated_tokens <= 120 and len(tight.results) < len(turns) + 1
    defaults = await recall(conn, tenant_id=TENANT, user_id=USER, query="garden tomatoes")
    assert len([h for h in defaults.results if h.kind == "turn"]) == RecallSettings().max_turns == 5
    assert defaults.estimated_tokens <= 2000


async def test_as_of_reads_items_valid_then(conn: Any) -> None:
    await store_item(
        conn,
        scope=ItemScope(tenant_id=TENANT, user_id=USER),
        item=StoredItem(
            item_type="fact", key="home_city", content="The user lives in Lyon", valid_from=at(0), single_valued=True
        ),
    )
    await store_item(
        conn,
        scope=ItemScope(tenant_id=TENANT, user_id=USER),
        item=StoredItem(
            item_type="fact", key="home_city", content="The user lives in Berlin", valid_from=at(30), single_valued=True
        ),
    )
    texts = lambda r: {hit.text for hit in r.results}  # noqa: E731
    now = await recall(conn, tenant_id=TENANT, user_id=USER, query="Where does the user live?")
    assert texts(now) == {"The user lives in Berlin"}
    then = await recall(conn, tenant_id=TENANT, user_id=USER, query="Where does the user live?", as_of=at(10))
    assert texts(then) == {"The user lives in Lyon"}
    before = await recall(conn, tenant_id=TENANT, user_id=USER, query="Where does the user live?", as_of=at(-1))
    assert texts(before) == set()


async def test_other_users_and_tenants_are_never_returned(conn: Any) -> None:
    await seed(conn)
    await store_conversation(
        conn, "bob-1", [("user", "I'm allergic to peanuts too, says Bob.", at(1))], tenant_id=TENANT, user_id="bob"
    )
    for tenant, user in (("t1", "bob"), ("t2", USER)):
        await store_item(
            conn,
            scope=ItemScope(tenant_id=tenant, user_id=user),
            item=StoredItem(
                item_type="fact",
                key="allergies",
                content=f"{tenant}/{user} is allergic to peanuts",
                valid_from=at(0),
                sources=[("bob-1", 0)],
            ),
        )
    embedder = HashingEmbeddings()
    # Bob's item and his turn; the other tenant's item (its user has no turns there); and ana's own turns.
    assert await index_items(conn, tenant_id="t1", user_id="bob", embedder=embedder) == 2
    assert await index_items(conn, tenant_id="t2", user_id=USER, embedder=embedder) == 1
    assert await index_items(conn, tenant_id=TENANT, user_id=USER, embedder=embedder) > 0
    for query in ("allergic peanuts", "peanut", "花生", "What did I say last time?"):
        result = await recall(
            conn,
            tenant_id=TENANT,
            user_id=USER,
            query=query,
            conversation_id=CURRENT,
            embedder=embedder,
            settings=RecallSettings(vectors_always=True, vector_min_similarity=0.0),
        )
        assert all("bob" not in hit.text.lower() and "t2/" not in hit.text for hit in result.results)
        assert all(hit.conversation_id in (None, OLD, CURRENT) for hit in result.results)


async def test_vectors_are_off_without_an_embedder(conn: Any) -> None:
    await store_item(
        conn,
        scope=ItemScope(tenant_id=TENANT, user_id=USER),
        item=StoredItem(
            item_type="preference", key="ui_theme", content="The user prefers the dark theme", valid_from=at(0)
        ),
    )
    embedder = HashingEmbeddings()
    assert await index_items(conn, tenant_id=TENANT, user_id=USER, embedder=embedder) == 1
    assert await index_items(conn, tenant_id=TENANT, user_id=USER, embedder=embedder) == 0
    # No word in common with the item: only vectors (word pieces: "them" of "thematic") can find it.
    query = "darkish thematic?"
    off = await recall(conn, tenant_id=TENANT, user_id=USER, query=query, paths=("fts", "vector"))
    assert off.vector_hits == 0 and off.results == []
    on = await recall(conn, tenant_id=TENANT, user_id=USER, query=query, paths=("fts", "vector"), embedder=embedder)
    assert on.vector_hits == 1 and on.retrieval_path == "vector"
    assert on.results[0].paths == ["vector"] and on.results[0].text == "The user prefers the dark theme"


async def test_bad_configuration_is_a_clear_error(conn: Any) -> None:
    with pytest.raises(ConfigurationError, match="MEMORY_AGENT_RECALL_TEXT_SEARCH_CONFIG"):
        RecallSettings(text_search_config="english; DROP TABLE items")
    with pytest.raises(ConfigurationError, match="MEMORY_AGENT_RECALL_TEXT_SEARCH_CONFIG"):
        await recall(
            conn, tenant_id=TENANT, user_id=USER, query="peanuts", settings=RecallSettings(text_search_config="klingon")
        )
    with pytest.raises(InvalidInputError, match="user_id"):
        await recall(conn, tenant_id=TENANT, user_id="", query="peanuts")
    with pytest.raises(InvalidInputError, match="paths"):
        await recall(conn, tenant_id=TENANT, user_id=USER, query="peanuts", paths=("bm25",))  # type: ignore[arg-type]


async def test_simple_configuration_and_and_ed_terms(conn: Any) -> None:
    await seed(conn)
    simple = await recall(
        conn,
        tenant_id=TENANT,
        user_id=USER,
        query="allergic peanuts",
        settings=RecallSettings(text_search_config="simple"),
        paths=("fts",),
    )
    assert (OLD, 0) in turns_of(simple)
    anded = await recall(
        conn,
        tenant_id=TENANT,
        user_id=USER,
        query="allergic to peanuts and violin",
        settings=RecallSettings(or_terms=False),
        paths=("fts",),
    )
    ored = await recall(
        conn,
        tenant_id=TENANT,
        user_id=USER,
        query="allergic to peanuts and violin",
        paths=("fts",),
    )
    assert anded.fts_hits == 0 and ored.fts_hits >= 2


async def test_nothing_found_gives_the_latest_turns_of_another_conversation(conn: Any) -> None:
    await seed(conn)
    result = await recall(conn, tenant_id=TENANT, user_id=USER, query="xyzzy plugh", conversation_id=CURRENT)
    assert result.fts_hits == result.trgm_hits == result.vector_hits == 0
    assert result.retrieval_path == "window" and result.used_fallback
    assert [(h.conversation_id, h.sequences[0]) for h in result.results] == [(OLD, 5), (OLD, 4)]
    none = await recall(
        conn,
        tenant_id=TENANT,
        user_id=USER,
        query="xyzzy plugh",
        conversation_id=CURRENT,
        settings=RecallSettings(recent_turns=0),
    )
    assert none.results == [] and none.block == "" and none.estimated_tokens == 0


async def test_a_short_query_that_full_text_answers_skips_trigrams(conn: Any) -> None:
    await seed(conn)
    answered = await recall(conn, tenant_id=TENANT, user_id=USER, query="peanuts", conversation_id=CURRENT)
    assert answered.fts_hits >= 2 and answered.trgm_hits == 0 and not answered.used_fallback
    cjk = await recall(conn, tenant_id=TENANT, user_id=USER, query="里昂 peanuts", conversation_id=CURRENT)
    assert cjk.fts_hits >= 2 and cjk.trgm_hits >= 1  # CJK text is one token to the parser: trigrams always run
