"""A turn's vector is made from the turn with the turn before it: a short answer whose meaning is in the question
it answers is found by its vector for a query that shares no word with it, and the vectors made from the turn
alone (before 0028) are made again by the periodic catch-up."""

from __future__ import annotations

import json
from typing import Any

import psycopg
import pytest
from langchain_core.messages import AIMessage
from langgraph.graph import START, MessagesState, StateGraph
from psycopg.rows import dict_row

from memory_agent import with_memory
from memory_agent.db.migrate import load_migrations
from memory_agent.db.schema import SchemaManager
from memory_agent.evaluation import store_conversation
from memory_agent.llm.offline import OfflineSummaryModel
from memory_agent.long_term.embedders import HashingEmbeddings
from memory_agent.long_term.embeddings import index_pending, to_vector_literal, turn_passage
from memory_agent.long_term.recall import RecallSettings, recall
from memory_agent.service.backend import MemoryBackend
from tests.conftest import execute, query
from tests.long_term.recall_fixtures import at
from tests.long_term.test_embedding_races import cosine
from tests.long_term.test_forget import rounds
from tests.migration.old_releases import build_release

# Not a question: a recalled question is shown as its reply (recall/replies.py), and these tests look at which
# turns' vectors match.
QUESTION = "I hope you got to the pottery workshop on Saturday!"
ANSWER = "Yes! It was amazing."


def answering(answers: list[str]) -> Any:
    """A chat graph answering each round with the next of `answers`."""
    queued = list(answers)

    def respond(state: MessagesState) -> dict[str, Any]:
        return {"messages": [AIMessage(queued.pop(0), name="Mel")]}

    builder = StateGraph(MessagesState)
    builder.add_node("respond", respond)
    builder.add_edge(START, "respond")
    return builder.compile()


# Hits without neighbours: a turn shown beside a better hit is left out of the ranking (without_repeats), and
# these tests ask which turns are hits of their own.
ALONE = RecallSettings(neighbours_before=0, neighbours_after=0)


async def vector_hits(conn: Any, tenant_id: str, embedder: HashingEmbeddings, settings: RecallSettings) -> list[Any]:
    """Ana's hits for "pottery workshop" by the vector path alone (it shares no word with the answer)."""
    found = await recall(
        conn,
        tenant_id=tenant_id,
        user_id="ana",
        query="pottery workshop",
        paths=("vector",),
        embedder=embedder,
        settings=settings,
    )
    return found.ranked


async def test_a_short_answer_is_found_by_its_vector_through_the_turn_it_answers(open_memory, conn):
    embedder = HashingEmbeddings()
    memory = await open_memory(model=OfflineSummaryModel(), embedder=embedder)
    app = with_memory(answering([ANSWER, "Sure, see you then."]), memory)
    await rounds(app, "chat", [QUESTION, "Let's meet next week."])
    assert await memory.drain(timeout=10)
    await index_pending(conn, embedder)  # the turns after the conversation's last version
    # The query shares no word with the answer: only the turn it answers gives its vector the meaning.
    own = [hit.sequences for hit in await vector_hits(conn, "default", embedder, ALONE) if hit.kind == "turn"]
    assert [1] in own, own  # the answer is a hit of its own, not only the question's neighbour
    assert [3] not in own  # "Sure, see you then." answers "Let's meet next week."


async def test_turn_vectors_made_from_the_turn_alone_are_made_again_with_their_context(empty_database_url: str):
    url = empty_database_url
    build_release(url, 27)  # the schema before 0028: a turn's vector from its own text
    execute(url, "ALTER TABLE memory_agent.schema_migrations ADD COLUMN IF NOT EXISTS checksum TEXT")
    for migration in load_migrations():
        if migration.version <= 27:
            execute(
                url,
                "UPDATE memory_agent.schema_migrations SET checksum = %s WHERE version = %s",
                [migration.checksum, migration.version],
            )
    embedder = HashingEmbeddings()
    turns = [
        ("user", QUESTION, at(0)),
        ("assistant", ANSWER, at(1)),
        ("user", "Let's meet next week.", at(2)),
        ("assistant", "Sure, see you then.", at(3)),
    ]
    async with await psycopg.AsyncConnection.connect(url, autocommit=True, row_factory=dict_row) as old:
        await old.execute("SET search_path TO memory_agent, public")
        await store_conversation(old, "c1", turns, tenant_id="t1", user_id="ana")
        for sequence, (_, text, _) in enumerate(turns):
            await old.execute(
                "INSERT INTO message_embeddings (user_id, tenant_id, conversation_id, sequence_number, model,"
                " embedding) VALUES ('ana', 't1', 'c1', %s, %s, %s::vector)",
                [sequence, embedder.model, to_vector_literal(embedder.embed_query(text))],
            )
    pool = MemoryBackend.create_pool(url, max_size=1)
    await pool.open(wait=True)
    try:
        await SchemaManager(MemoryBackend(pool)).migrate()  # the upgrade: 0028
        async with pool.connection() as conn:
            conn.row_factory = dict_row
            settings = ALONE.replace(vectors_always=True)
            # The old vectors serve recall until they are made again.
            assert [hit.sequences for hit in await vector_hits(conn, "t1", embedder, settings)] == [[0]]
            assert await index_pending(conn, embedder) == 4  # every one: the first turn's text version is old too
            assert await index_pending(conn, embedder) == 0  # converged
            assert sorted(hit.sequences for hit in await vector_hits(conn, "t1", embedder, settings)) == [[0], [1]]
    finally:
        await pool.close()
    stored = query(
        url,
        "SELECT sequence_number, text_version, embedding::text FROM memory_agent.message_embeddings ORDER BY 1",
    )
    answer = turn_passage({"content": ANSWER, "previous_name": None, "previous_tail": QUESTION})
    assert [(sequence, version) for sequence, version, _ in stored] == [(0, 1), (1, 1), (2, 1), (3, 1)]
    assert cosine(json.loads(stored[1][2]), embedder.embed_query(answer)) == pytest.approx(1.0, abs=1e-5)


def test_a_long_turn_before_gives_its_last_whole_words_and_its_speaker():
    row = {"content": "Mel: Yes!", "previous_name": "Ana", "previous_tail": "ttery workshop?", "previous_cut": True}
    assert turn_passage(row) == "Ana: …workshop?\nMel: Yes!"
    whole = {**row, "previous_tail": "Pottery workshop?", "previous_cut": False}
    assert turn_passage(whole) == "Ana: Pottery workshop?\nMel: Yes!"
    assert turn_passage({"content": "Mel: Hi!", "previous_tail": None}) == "Mel: Hi!"
