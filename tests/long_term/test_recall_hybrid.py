"""Hybrid recall (an embedder configured): the vector path over all of the user's vectors runs on every recall and
its hits are fused with full text's (a turn that shares no word with the query is found); when full text finds
too little, the vector path runs alone and is fused with their rows as one statement with every path would. The query is embedded without its closing punctuation."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import pytest
from langchain_core.embeddings import Embeddings
from langchain_core.messages import HumanMessage

from memory_agent import with_memory
from memory_agent.errors import ConfigurationError
from memory_agent.evaluation import store_conversation
from memory_agent.llm.offline import OfflineSummaryModel
from memory_agent.long_term.embedders import HashingEmbeddings
from memory_agent.long_term.embeddings import index_items
from memory_agent.long_term.recall import RecallSettings, recall
from memory_agent.long_term.recall.hybrid import can_place_vector_hits
from memory_agent.long_term.recall.query_text import embedded_query
from tests.long_term.recall_fixtures import at, conn  # noqa: F401 (conn is a fixture)
from tests.support import EchoChat

TENANT, USER = "t1", "ana"
NEAR, FAR = [1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0]


class LisbonEmbeddings(Embeddings):
    """Every query points one way; a text that names Lisbon points the same way, any other text at right angles
    (cosine similarity 0, under the default floor). Records the queries it embeds."""

    model = "test-lisbon"

    def __init__(self) -> None:
        self.queries: list[str] = []

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [NEAR if "Lisbon" in text else FAR for text in texts]

    def embed_query(self, text: str) -> list[float]:
        self.queries.append(text)
        return NEAR


async def seed(conn: Any) -> LisbonEmbeddings:
    await store_conversation(
        conn,
        "trips",
        [
            ("user", "We planned the trip to Lisbon in May.", at(0)),
            ("assistant", "Sounds lovely.", at(0)),
            ("user", "Tell me about the weather.", at(0)),
            ("assistant", "Mild and sunny.", at(0)),
            ("user", "What about dinner?", at(0)),
            ("assistant", "Fish, probably.", at(0)),
            ("user", "The trip to Osaka was long.", at(1)),
            ("assistant", "Long flights are tiring.", at(1)),
        ],
        tenant_id=TENANT,
        user_id=USER,
    )
    # Turns near the query that full text does not match: a pass over all of the user's vectors would find them.
    await store_conversation(
        conn,
        "lisbon",
        [("user" if n % 2 == 0 else "assistant", f"Lisbon note number {n}.", at(2)) for n in range(20)],
        tenant_id=TENANT,
        user_id=USER,
    )
    embedder = LisbonEmbeddings()
    assert await index_items(conn, tenant_id=TENANT, user_id=USER, embedder=embedder) == 28
    return embedder


def first_turn(result: Any) -> tuple[str | None, int]:
    hit = next(hit for hit in result.ranked if hit.kind == "turn")
    return hit.conversation_id, hit.sequences[0]


async def test_hybrid_fuses_the_users_nearest_vectors_with_full_text(conn: Any) -> None:
    embedder = await seed(conn)
    ask = {"tenant_id": TENANT, "user_id": USER, "query": "How was the trip?", "conversation_id": "new"}
    # Full text alone: the shorter Osaka turn ranks first (BM25 normalizes by length).
    lexical = await recall(conn, **ask)
    assert first_turn(lexical) == ("trips", 6)
    assert all(hit.conversation_id != "lisbon" for hit in lexical.ranked)
    hybrid = await recall(conn, **ask, embedder=embedder)
    assert first_turn(hybrid) == ("trips", 0)
    lisbon = next(hit for hit in hybrid.ranked if hit.sequences == [0] and hit.conversation_id == "trips")
    assert lisbon.paths == ["fts", "vector"]
    # Though full text found enough, the vector path ran over all of the user's vectors: the Lisbon notes, near the
    # query but sharing no word with it, are recalled by their vectors alone: the 20 notes, the Lisbon turn, and its
    # answer "Sounds lovely." (a turn's vector is made with the end of the turn before it).
    assert hybrid.vector_hits == 22
    assert any(hit.conversation_id == "lisbon" and hit.paths == ["vector"] for hit in hybrid.ranked)
    assert embedder.queries == ["How was the trip"]


async def test_too_little_full_text_searches_all_of_the_users_vectors(conn: Any) -> None:
    embedder = await seed(conn)
    # No word of the query is in any turn: the vector path ranks all of the user's vectors.
    result = await recall(
        conn, tenant_id=TENANT, user_id=USER, query="Portugal?", conversation_id="new", embedder=embedder
    )
    assert result.fts_hits == 0 and result.vector_hits > 1
    assert result.retrieval_path == "vector"
    assert {hit.conversation_id for hit in result.ranked} >= {"lisbon"}
    # The fallback (vectors_always off) does the same; with enough full-text hits it embeds nothing.
    fallback = RecallSettings(vectors_always=False)
    embedder.queries.clear()
    enough = await recall(conn, tenant_id=TENANT, user_id=USER, query="trip", settings=fallback, embedder=embedder)
    assert enough.fts_hits >= 2 and enough.vector_hits == 0 and embedder.queries == []


def test_the_closing_punctuation_of_a_query_is_not_embedded() -> None:
    assert embedded_query("Where did we go?") == "Where did we go"
    assert embedded_query("Really?!  ") == "Really"
    assert embedded_query("我们去了哪里？") == "我们去了哪里"
    assert embedded_query("e.g. the U.S.") == "e.g. the U.S"
    assert embedded_query("?") == "?"  # nothing else to embed: the text as it is


class FailingEmbeddings(LisbonEmbeddings):
    """Passages as LisbonEmbeddings (so the turns have vectors); the query's embedding fails as `failure` says."""

    model = "test-lisbon"

    def __init__(self, failure: str) -> None:
        super().__init__()
        self.failure = failure

    def embed_query(self, text: str) -> list[float]:
        if self.failure == "raise":
            raise ConnectionError("embeddings API unreachable")
        return [float("nan")] * 4


@pytest.mark.parametrize("failure", ["raise", "nan"])
async def test_a_failing_embedder_costs_the_vectors_not_the_recall(conn: Any, failure: str, caplog: Any) -> None:
    await seed(conn)
    embedder = FailingEmbeddings(failure)
    ask = {"tenant_id": TENANT, "user_id": USER, "query": "How was the trip?", "conversation_id": "new"}
    with caplog.at_level(logging.WARNING, logger="memory_agent"):
        result = await recall(conn, **ask, embedder=embedder)
    assert first_turn(result) == ("trips", 6) and result.vector_hits == 0  # what full text found, as without
    assert "Recall runs without vectors: the embedder test-lisbon failed" in caplog.text
    # The vector path measured alone has nothing else to return: its failure is recall's.
    with pytest.raises((ConnectionError, ConfigurationError)):
        await recall(conn, **ask, embedder=embedder, paths=("vector",))


async def test_a_long_message_is_embedded_by_its_start_only(conn: Any) -> None:
    embedder = await seed(conn)
    # 1,500 characters: full text searches them all; the model embeds the first max_embedded_chars (300), cut
    # after a word, and the round does not wait ~700 ms for the rest.
    query = "How was the trip? " + " ".join(f"word{n}" for n in range(240))
    result = await recall(conn, tenant_id=TENANT, user_id=USER, query=query, embedder=embedder)
    assert result.query == query[:2000].rstrip() and result.fts_hits > 0
    (embedded,) = embedder.queries
    assert len(embedded) <= 300 and query.startswith(embedded) and query[len(embedded)] == " "
    short = RecallSettings(max_embedded_chars=20)
    await recall(conn, tenant_id=TENANT, user_id=USER, query=query, embedder=embedder, settings=short)
    assert embedder.queries[-1] == "How was the trip"


async def test_through_the_service_the_summary_jobs_vectors_re_rank_its_recall(open_memory: Any) -> None:
    memory = await open_memory(model=OfflineSummaryModel(), embedder=HashingEmbeddings())
    app = with_memory(EchoChat().graph, memory)
    for thread, user, texts in (
        ("trip", "ana", ["I live in Lisbon.", "I'm allergic to peanuts.", "I like green tea.", "Bye."]),
        ("other", "ben", ["I'm allergic to shellfish.", "I live in Porto.", "Fine.", "Bye."]),
    ):
        for text in texts:
            config = {"configurable": {"thread_id": thread, "user_id": user, "tenant_id": "acme"}}
            await app.ainvoke({"messages": [HumanMessage(text)]}, config)
    assert await memory.drain(timeout=30)
    result = await memory.long_term.recall("ana", "peanuts allergy", tenant_id="acme")
    assert result.fts_hits >= 2 and result.vector_hits >= 1
    assert any(hit.paths == ["fts", "vector"] for hit in result.ranked)
    assert all("shellfish" not in hit.text and "Porto" not in hit.text for hit in result.ranked)


class ResizedEmbeddings(LisbonEmbeddings):
    """The same model name, its queries now of another size (as an API's `dimensions` option changes it)."""

    def embed_query(self, text: str) -> list[float]:
        self.queries.append(text)
        return [1.0, 0.0, 0.0]


async def test_stored_vectors_of_another_size_are_skipped_not_an_error(conn: Any) -> None:
    await seed(conn)  # 4-dimension vectors stored under "test-lisbon"
    embedder = ResizedEmbeddings()
    ask = {"tenant_id": TENANT, "user_id": USER, "query": "How was the trip?", "conversation_id": "new"}
    result = await recall(conn, **ask, embedder=embedder)
    assert first_turn(result) == ("trips", 6) and result.vector_hits == 0  # full text's, re-ranked by nothing
    alone = await recall(conn, **ask, embedder=embedder, paths=("vector",))
    assert alone.vector_hits == 0


class HugeEmbeddings(LisbonEmbeddings):
    def embed_query(self, text: str) -> list[float]:
        return [1e308, 0.0, 0.0, 0.0]


async def test_a_vector_pgvector_would_refuse_costs_the_vectors(conn: Any, caplog: Any) -> None:
    await seed(conn)
    with caplog.at_level(logging.WARNING, logger="memory_agent"):
        result = await recall(
            conn, tenant_id=TENANT, user_id=USER, query="How was the trip?", embedder=HugeEmbeddings()
        )
    assert first_turn(result) == ("trips", 6) and result.vector_hits == 0
    assert "single-precision" in caplog.text


async def test_the_re_ranked_hits_and_their_order_do_not_depend_on_the_limit(conn: Any) -> None:
    embedder = await seed(conn)
    for n in range(30):  # more full-text hits than the re-ranking reads
        await store_conversation(
            conn,
            f"more-{n}",
            [("user", f"Another trip, number {n}, to Lisbon or not.", at(3))],
            tenant_id=TENANT,
            user_id=USER,
        )
    await index_items(conn, tenant_id=TENANT, user_id=USER, embedder=embedder)
    ask = {"tenant_id": TENANT, "user_id": USER, "query": "trip", "conversation_id": "new", "embedder": embedder}
    keys = [
        [(h.kind, h.conversation_id, h.sequences, h.item_ids) for h in (await recall(conn, **ask, limit=n)).ranked]
        for n in (5, 12, 21, 50)
    ]
    assert all(ranking == keys[-1][: len(ranking)] for ranking in keys)
    few = await recall(conn, **ask, settings=RecallSettings(candidates=3))
    assert few.vector_hits <= 3


class SlowEmbeddings(LisbonEmbeddings):
    async def aembed_query(self, text: str) -> list[float]:
        await asyncio.sleep(5)
        return NEAR


async def test_a_late_embedding_is_not_waited_for(conn: Any, caplog: Any) -> None:
    await seed(conn)
    settings = RecallSettings(embedding_timeout_s=0.2)
    started = time.perf_counter()
    with caplog.at_level(logging.WARNING, logger="memory_agent"):
        result = await recall(
            conn,
            tenant_id=TENANT,
            user_id=USER,
            query="How was the trip?",
            embedder=SlowEmbeddings(),
            settings=settings,
        )
    assert time.perf_counter() - started < 2
    assert first_turn(result) == ("trips", 6) and result.vector_hits == 0
    assert "took longer than 0.2 s" in caplog.text


async def test_a_vector_weight_of_zero_embeds_only_for_the_fallback(conn: Any) -> None:
    embedder = await seed(conn)
    settings = RecallSettings(vector_weight=0)
    result = await recall(conn, tenant_id=TENANT, user_id=USER, query="trip", embedder=embedder, settings=settings)
    assert result.fts_hits >= 2 and embedder.queries == [] and all("vector" not in h.paths for h in result.ranked)


def test_the_pass_over_all_vectors_runs_only_where_full_text_left_places() -> None:
    full = [{"kind": "turn"}] * 20
    assert not can_place_vector_hits(full, 20)
    assert can_place_vector_hits(full[:5], 20)


def test_a_vector_weight_above_one_is_refused() -> None:
    # The weight is the vectors' share of a convex combination: above 1, full text's share would be negative.
    with pytest.raises(ConfigurationError, match="VECTOR_WEIGHT"):
        RecallSettings(vector_weight=2.0)


class GradedEmbeddings(Embeddings):
    """Every query points one way; a text that names Lisbon is at similarity `lisbon` to it, any other text at
    `other`."""

    model = "test-graded"

    def __init__(self, lisbon: float, other: float) -> None:
        self.lisbon, self.other = lisbon, other

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        similarities = (self.lisbon if "Lisbon" in text else self.other for text in texts)
        return [[c, (1 - c * c) ** 0.5, 0.0, 0.0] for c in similarities]

    def embed_query(self, text: str) -> list[float]:
        return NEAR


async def trip_turns_ranked(conn: Any, embedder: Embeddings, **settings: Any) -> tuple[list[int], list[int]]:
    """Four turns, three of them about a trip, ranked for "How was the trip?" by full text alone and with
    `embedder`: their sequences. Full text ranks the short ones first (BM25 normalizes by length), the Lisbon
    turn third, its score close to theirs."""
    await store_conversation(
        conn,
        "trips",
        [
            ("user", "The trip was long.", at(0)),
            ("user", "A trip by train.", at(0)),
            ("user", "The trip to Lisbon in May was long and lovely.", at(0)),
            ("user", "Tell me about the weather.", at(0)),
        ],
        tenant_id=TENANT,
        user_id=USER,
    )
    await index_items(conn, tenant_id=TENANT, user_id=USER, embedder=embedder)
    ask = {"tenant_id": TENANT, "user_id": USER, "query": "How was the trip?", "conversation_id": "new"}
    lexical = await recall(conn, **ask, settings=RecallSettings(**settings))
    hybrid = await recall(conn, **ask, embedder=embedder, settings=RecallSettings(**settings))
    return [hit.sequences[0] for hit in lexical.ranked], [hit.sequences[0] for hit in hybrid.ranked]


async def test_a_hit_nearest_by_far_outranks_full_texts_best_when_its_words_match_nearly_as_well(conn: Any) -> None:
    # Its vector is the nearest by far (1 against 0.6). Fused by ranks (1 / (60 + rank)), a vector's first place
    # could not lift it over full text's first; fused by scores, it ranks first.
    lexical, hybrid = await trip_turns_ranked(conn, GradedEmbeddings(1.0, 0.6), neighbours_before=0, neighbours_after=0)
    assert lexical[2] == 2 and hybrid[0] == 2


@pytest.mark.parametrize(("spread", "lisbon_place"), [(None, 2), (0.0, 0)], ids=["default", "min-max"])
async def test_vectors_nearly_as_near_as_each_other_do_not_overturn_full_texts_order(
    conn: Any, spread: float | None, lisbon_place: int
) -> None:
    # Similarities of 0.84 (Lisbon) and 0.83, the range of a small model's among hits that all share the query's
    # words. Placed min-max over the hits' own range they scored 1 and 0: a difference the model hardly makes
    # decided the order over full text's. Over a range of `vector_min_spread` at least, it stays small.
    settings: dict[str, Any] = {"neighbours_before": 0, "neighbours_after": 0}
    if spread is not None:
        settings["vector_min_spread"] = spread
    lexical, hybrid = await trip_turns_ranked(conn, GradedEmbeddings(0.84, 0.83), **settings)
    assert lexical.index(2) == 2 and hybrid.index(2) == lisbon_place


@pytest.mark.parametrize(
    ("query", "min_hits"),
    [("Portugal?", 2), ("凉爽的里斯本", 2), ("Osaka", 3), ("Lisbon", 50)],
    ids=["nothing", "cjk", "one-turn-two-paths", "hits-vectors-found-too"],
)
async def test_too_little_full_text_fuses_the_vector_path_as_one_statement_with_every_path_would(
    conn: Any, query: str, min_hits: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Full text and trigrams are not run twice: their first run's rows and the vector path run alone, fused,
    rank as the statement with every path ranks (same hits, order, scores, paths and counts): nothing matched
    (the latest turns dropped for the vectors' hits), a turn found by full text and trigrams, hits found by full
    text and vectors both (their reciprocal ranks summed)."""
    from memory_agent.long_term.recall import search

    embedder = await seed(conn)
    compared: list[tuple[list[dict[str, Any]], list[dict[str, Any]]]] = []
    first_runs: list[list[dict[str, Any]]] = []
    split = search._with_nearest

    async def both(conn: Any, lexical: Any, params: Any, settings: Any, vectors: Any) -> list[dict[str, Any]]:
        rows = await split(conn, lexical, params, settings, vectors)
        compared.append((rows, await search._search(conn, params, settings, vectors=vectors)))
        first_runs.append(lexical)
        return rows

    monkeypatch.setattr(search, "_with_nearest", both)
    settings = RecallSettings(min_hits=min_hits)
    await recall(
        conn, tenant_id=TENANT, user_id=USER, query=query, conversation_id="trips", embedder=embedder, settings=settings
    )
    [(rows, statement)] = compared
    fields = ("kind", "conversation_id", "sequence_number", "item_id", "paths", "bm25", "similarity", "text")
    counts = ("fts_hits", "trgm_hits", "vector_hits", "recent_hits", "trgm_ran", "user_wide")
    assert [[row[f] for f in fields] for row in rows] == [[row[f] for f in fields] for row in statement]
    assert [row["score"] for row in rows] == pytest.approx([row["score"] for row in statement])
    assert [[row[c] for c in counts] for row in rows] == [[row[c] for c in counts] for row in statement]
    assert statement[0]["vector_hits"] > 0 and statement[0]["fts_hits"] + statement[0]["trgm_hits"] < min_hits
    if query == "Portugal?":  # the first run's answer, the latest turns, gave way to the vectors' hits
        assert [row["paths"] for row in first_runs[0]] == [["recent"], ["recent"]]
    if query == "Lisbon":
        assert any({"fts", "vector"} <= set(row["paths"]) for row in rows)
