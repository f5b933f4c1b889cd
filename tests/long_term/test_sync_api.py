"""Synchronous remember / recall on the service (mem0's add / search in five lines), beside the async ones."""

from __future__ import annotations

import pytest

from memory_agent import InvalidInputError, MemoryService, MemorySettings
from memory_agent.llm import OfflineModel
from tests.conftest import query


def test_remember_and_recall_from_synchronous_code(database_url):
    with MemoryService(MemorySettings(database_url=database_url), model=OfflineModel()) as memory:
        memory.long_term.remember_sync("maya", "Maya is allergic to peanuts")
        memory.long_term.remember_sync("maya", "Maya's sister lives in Porto")
        hits = memory.long_term.recall_sync("maya", "peanuts allergy").results
        assert hits and hits[0].kind == "item" and hits[0].text.endswith("Maya is allergic to peanuts")
        # Notes without a key add up; a keyed fact's new value closes the old one.
        memory.long_term.remember_sync("maya", "Maya lives in Lisbon", key="home_city")
        moved = memory.long_term.remember_sync("maya", "Maya lives in Berlin", key="home_city")
        assert moved.closed_item_ids
        current = {item.content for item in memory.call_sync(memory.long_term.list_items("maya"))}
        assert current == {"Maya is allergic to peanuts", "Maya's sister lives in Porto", "Maya lives in Berlin"}
        # Another tenant's user of the same name sees none of it.
        assert memory.long_term.recall_sync("maya", "peanuts allergy", tenant_id="other").results == []
        with pytest.raises(InvalidInputError, match="content must be a non-empty string"):
            memory.long_term.remember_sync("maya", "  ")
        with pytest.raises(InvalidInputError, match="item_type must be one of"):
            memory.long_term.remember_sync("maya", "x", item_type="rumour")  # type: ignore[arg-type]
    assert query(database_url, "SELECT count(*) FROM items WHERE user_id = 'maya' AND valid_to IS NULL") == [(3,)]


def test_the_sync_calls_take_what_the_async_ones_take(database_url):
    """importance on remember_sync; as_of and recent_fallback on recall_sync (they were async only)."""
    from datetime import UTC, datetime

    with MemoryService(MemorySettings(database_url=database_url), model=OfflineModel()) as memory:
        memory.long_term.remember_sync("ivo", "Ivo is allergic to cats", importance=0.9)
        assert [item.importance for item in memory.call_sync(memory.long_term.list_items("ivo"))] == [0.9]
        before = datetime(2000, 1, 1, tzinfo=UTC)
        past = memory.long_term.recall_sync("ivo", "cats allergy", as_of=before, recent_fallback=False)
        assert [hit for hit in past.results if hit.kind == "item"] == []
        assert memory.long_term.recall_sync("ivo", "cats allergy").results[0].kind == "item"


async def test_remember_is_async_too(open_memory):
    memory = await open_memory(model=OfflineModel())
    outcome = await memory.long_term.remember("sam", "Sam prefers window seats", item_type="preference", key="seat")
    assert outcome.item_id is not None
    hits = (await memory.long_term.recall("sam", "window seats")).results
    assert hits[0].kind == "item" and outcome.item_id in hits[0].item_ids


def test_forgetting_from_synchronous_code(database_url):
    """A script opened with `with` forgets as it remembers: forget_user() there is a coroutine that, called
    without await, erased nothing; the _sync twins run it and return the report."""
    with MemoryService(MemorySettings(database_url=database_url), model=OfflineModel()) as memory:
        kept = memory.long_term.remember_sync("lia", "Lia is allergic to peanuts")
        memory.long_term.remember_sync("lia", "Lia lives in Porto", key="home_city")
        memory.long_term.remember_sync("noa", "Noa is allergic to peanuts")
        assert {item.content for item in memory.long_term.list_items_sync("lia")} == {
            "Lia is allergic to peanuts",
            "Lia lives in Porto",
        }
        assert memory.long_term.forget_item_sync("lia", kept.item_id).items_deleted == (kept.item_id,)
        assert [item.content for item in memory.long_term.list_items_sync("lia")] == ["Lia lives in Porto"]
        assert len(memory.long_term.forget_user_sync("lia").items_deleted) == 1
        assert memory.long_term.list_items_sync("lia") == []
        assert memory.long_term.recall_sync("lia", "peanuts allergy").results == []
        with pytest.raises(InvalidInputError, match="item_id must be an integer"):
            memory.long_term.forget_item_sync("noa", "1")  # type: ignore[arg-type]
    assert query(database_url, "SELECT user_id, content FROM items") == [("noa", "Noa is allergic to peanuts")]
