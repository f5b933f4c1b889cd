"""Texts larger than a full-text vector can hold (PostgreSQL refuses a tsvector past 1 MB of lexemes): the round,
the store value, are stored whole and searchable by the first 100,000 characters — never a retryable error that
can never succeed."""

from __future__ import annotations

import random
import string

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from memory_agent import MemoryStore
from memory_agent.errors import InvalidInputError
from tests.conftest import query

INDEXED_CHARS = 100_000  # sql/migrations/0022_bounded_text_search.sql


def distinct_words(n_bytes: int, seed: int = 7) -> str:
    """About `n_bytes` of distinct 8-letter words: ~1 MB of lexemes per ~1 MB of text."""
    rng = random.Random(seed)
    words = {"".join(rng.choices(string.ascii_lowercase, k=8)) for _ in range(n_bytes // 9 + 1000)}
    return " ".join(sorted(words))[:n_bytes]


async def test_a_round_of_a_megabyte_of_distinct_words_is_stored_and_its_start_searchable(open_memory, database_url):
    memory = await open_memory(recall=False)
    huge = "zanzibarian " + distinct_words(1_100_000) + " quokkafinale"
    saved, _ = await memory.conversations.finish_round("huge", [HumanMessage(huge), AIMessage("noted")], user_id="ana")
    assert saved is not None and saved.stored_positions == [0, 1]
    ((length,),) = query(database_url, "SELECT length(content) FROM messages WHERE role = 'user'")
    assert length == len(huge)  # stored whole
    for config in ("english", "simple"):
        found = query(
            database_url,
            "SELECT count(*) FROM messages WHERE to_tsvector(%s::regconfig, left(content, 100000))"
            " @@ plainto_tsquery(%s::regconfig, %s)",
            [config, config, "zanzibarian"],
        )
        assert found == [(1,)]
    result = (await memory.long_term.recall("ana", "zanzibarian")).results
    assert [hit.conversation_id for hit in result if hit.kind == "turn"][:1] == ["huge"]
    # Past the indexed prefix a word is not in the vector (trigrams still see the text).
    assert query(
        database_url, "SELECT count(*) FROM messages WHERE fts_english @@ plainto_tsquery('english', 'quokkafinale')"
    ) == [(0,)]


async def test_a_store_value_of_a_megabyte_of_distinct_words_is_stored_and_found(open_memory, database_url):
    memory = await open_memory()
    store = MemoryStore.from_service(memory, tenant_id="default", text_search_config="simple")
    text = "zanzibarian " + distinct_words(1_400_000, seed=3)
    await store.aput(("memories", "ana"), "big", {"content": text})
    item = await store.aget(("memories", "ana"), "big")
    assert item is not None and len(item.value["content"]) == len(text)
    (hit,) = await store.asearch(("memories", "ana"), query="zanzibarian")
    assert hit.key == "big"
    # A search query of a megabyte is searched with its start (as recall's is), not refused or run for minutes.
    (hit,) = await store.asearch(("memories", "ana"), query="zanzibarian " + distinct_words(1_400_000, seed=5))
    assert hit.key == "big"


async def test_input_past_a_postgresql_limit_is_invalid_input_never_retry(open_memory):
    memory = await open_memory()

    async def vectorize() -> None:
        async with memory.backend.session() as conn:
            await conn.execute("SELECT to_tsvector('simple', %s)", [distinct_words(1_400_000)])

    with pytest.raises(InvalidInputError, match="would fail again") as raised:
        await memory.loop.arun(vectorize())
    assert "retry" not in str(raised.value)
