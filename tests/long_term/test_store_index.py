"""MemoryStore and BaseStore's `index` argument: a list of paths names the text searched; False is refused."""

from __future__ import annotations

import pytest

from memory_agent.errors import InvalidInputError
from tests.conftest import query
from tests.long_term import test_store

store = test_store.store  # the fixture: a MemoryStore of tenant "acme" over a bare pool
ALICE = ("memories", "alice")


async def test_index_paths_name_the_text_that_is_searched(store, database_url):
    value = {"title": "Trip to Kyoto", "notes": [{"text": "temples"}, {"text": "ramen"}], "content": "hidden"}
    await store.aput(ALICE, "trip", value, index=["title", "notes[*].text"])
    assert [hit.key for hit in await store.asearch(ALICE, query="Kyoto")] == ["trip"]
    assert [hit.key for hit in await store.asearch(ALICE, query="ramen")] == ["trip"]
    assert await store.asearch(ALICE, query="hidden") == []
    assert query(database_url, "SELECT content FROM items WHERE key = 'trip'") == [("Trip to Kyoto\ntemples\nramen",)]
    # Paths that hold no text: the value is searched as without index.
    await store.aput(ALICE, "plain", {"content": "Lyon"}, index=["missing"])
    assert [hit.key for hit in await store.asearch(ALICE, query="Lyon")] == ["plain"]


@pytest.mark.parametrize(("index", "problem"), [(False, "index=False cannot be honoured"), ([""], "field paths")])
async def test_an_index_the_store_cannot_honour_is_refused(store, database_url, index, problem):
    with pytest.raises(InvalidInputError, match=problem):
        await store.aput(ALICE, "k", {"content": "x"}, index=index)
    assert query(database_url, "SELECT count(*) FROM items") == [(0,)]
