"""Recall's vector fallback at round start, with the bundled multilingual e5 (the `embeddings` extra) as the
service's embedder: a fact a user stated in one conversation comes back in another for a question that shares
no word with it, in another language, through the vector path; with no embedder the same question finds
nothing and no vector is ever written. The model is loaded once for the module."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import BaseMessage, HumanMessage

from memory_agent import with_memory
from memory_agent.llm.offline import OfflineSummaryModel
from memory_agent.long_term.embedders import BundledE5Embeddings
from tests.conftest import query
from tests.support import EchoChat

FACT = "I'm allergic to shellfish."
ITEM = "The user is allergic to shellfish"
QUESTION = "Welche Meeresfrüchte darf ich nicht essen?"  # German: which seafood must I not eat?
METRICS = (
    "SELECT fts_hits, trgm_hits, used_fallback, recall_path, context_items FROM round_metrics"
    " WHERE conversation_id = 'ana-2'"
)


@pytest.fixture(scope="module")
def e5() -> BundledE5Embeddings:
    return BundledE5Embeddings()


async def ask(memory: Any, thread: str, text: str) -> list[BaseMessage]:
    chat = EchoChat()
    config = {"configurable": {"thread_id": thread, "user_id": "ana"}}
    await with_memory(chat.graph, memory).ainvoke({"messages": [HumanMessage(text)]}, config)
    return chat.seen[-1]


async def state_the_fact(memory: Any) -> None:
    for text in (FACT, "Thanks.", "Bye."):  # the third round's end starts the summary job
        await ask(memory, "ana-1", text)
    assert await memory.drain(timeout=30)


async def test_a_paraphrase_in_another_language_recalls_the_fact_through_vectors(open_memory, database_url, e5):
    memory = await open_memory(model=OfflineSummaryModel(), embedder=e5)
    await state_the_fact(memory)
    # The summary job embedded the item it wrote, with the service's embedder.
    assert query(
        database_url, "SELECT i.content, e.model FROM items AS i JOIN item_embeddings AS e USING (user_id, item_id)"
    ) == [(ITEM, e5.model)]

    given = await ask(memory, "ana-2", QUESTION)
    block = given[0].text
    assert block.startswith("[Long-term memory: ") and ITEM in block
    ((fts, trgm, fallback, path, context_items),) = query(database_url, METRICS)
    assert (fts, trgm, fallback, path) == (0, 0, True, "vector") and context_items >= 1

    # The service's recall API too, with another paraphrase: vectors run on every recall (hybrid) and find the
    # item (and the turns it came from, which share no word with the question either).
    hits = (await memory.long_term.recall("ana", "Which seafood must I avoid?")).results
    assert ("item", ITEM, ["vector"]) in [(hit.kind, hit.text, hit.paths) for hit in hits]


async def test_without_an_embedder_the_same_question_recalls_nothing_and_writes_no_vector(open_memory, database_url):
    memory = await open_memory(model=OfflineSummaryModel())
    assert memory.embedder is None
    await state_the_fact(memory)
    assert query(database_url, "SELECT content FROM items") == [(ITEM,)]
    given = await ask(memory, "ana-2", QUESTION)
    assert "shellfish" not in "\n".join(m.text for m in given)
    ((fts, trgm, _, path, _),) = query(database_url, METRICS)
    assert (fts, trgm) == (0, 0) and path != "vector"
    assert query(database_url, "SELECT count(*) FROM item_embeddings") == [(0,)]
    assert all(hit.paths != ["vector"] for hit in (await memory.long_term.recall("ana", QUESTION)).results)
