"""MemoryStore as a LangGraph BaseStore: versions on put, forgetting on delete, search, namespaces, isolation,
concurrent puts, bad input, and both connection modes (a bare pool, a MemoryService)."""

from __future__ import annotations

import asyncio
import itertools
import sys
from collections.abc import AsyncIterator

import pytest
from langgraph.store.base import GetOp, PutOp

from memory_agent import MemoryStore
from memory_agent.errors import ConfigurationError, InvalidInputError
from memory_agent.service.backend import MemoryBackend
from tests.conftest import query

ALICE = ("memories", "alice")
BOB = ("memories", "bob")


@pytest.fixture
async def store(database_url: str) -> AsyncIterator[MemoryStore]:
    """A store over a bare pool opened on the test's event loop (async callers)."""
    pool = MemoryBackend.create_pool(database_url, max_size=8)
    await pool.open()
    yield MemoryStore(pool, tenant_id="acme")
    await pool.close()


def versions(url: str, key: str) -> list[tuple]:
    return query(
        url,
        "SELECT value, upper_inf(valid_during), lower(valid_during), upper(valid_during), item_type, user_id,"
        " tenant_id FROM items WHERE key = %s ORDER BY lower(valid_during)",
        [key],
    )


async def test_put_closes_the_previous_version_and_get_returns_the_current(store, database_url):
    await store.aput(ALICE, "city", {"content": "Alice lives in Lyon"})
    first = await store.aget(ALICE, "city")
    await store.aput(ALICE, "city", {"content": "Alice lives in Lyon"})  # the same value: no new version
    await store.aput(ALICE, "city", {"content": "Alice moved to Berlin", "source": "chat"})
    item = await store.aget(ALICE, "city")
    assert item is not None and first is not None
    assert item.value == {"content": "Alice moved to Berlin", "source": "chat"}
    assert item.namespace == ALICE and item.key == "city"
    assert item.created_at == first.created_at < item.updated_at
    rows = versions(database_url, "city")
    assert [(r[0]["content"], r[1]) for r in rows] == [("Alice lives in Lyon", False), ("Alice moved to Berlin", True)]
    assert rows[0][3] == rows[1][2]  # closed exactly when the next one opened: history without a gap or overlap
    assert {(r[4], r[5], r[6]) for r in rows} == {("fact", "alice", "acme")}
    assert await store.aget(ALICE, "nothing") is None
    assert await store.aget(("memories", "alice", "work"), "city") is None  # another namespace, another slot


async def test_concurrent_puts_of_one_key_leave_one_current_version(store, database_url):
    await asyncio.gather(*(store.aput(ALICE, "theme", {"content": f"theme {n}"}) for n in range(8)))
    rows = versions(database_url, "theme")
    assert len(rows) == 8 and [r[1] for r in rows].count(True) == 1
    for earlier, later in itertools.pairwise(rows):
        assert earlier[3] == later[2]  # each version closed where the next began
    current = await store.aget(ALICE, "theme")
    assert current is not None and current.value == rows[-1][0]


async def test_delete_forgets_every_version_and_its_lineage(store, database_url):
    await store.aput(ALICE, "secret", {"content": "canary-5f3a old"})
    await store.aput(ALICE, "secret", {"content": "canary-5f3a new"})
    await store.aput(ALICE, "kept", {"content": "stays"})
    await store.adelete(ALICE, "secret")
    assert await store.aget(ALICE, "secret") is None
    assert query(database_url, "SELECT count(*) FROM items WHERE content LIKE '%%canary-5f3a%%'") == [(0,)]
    assert query(database_url, "SELECT count(*) FROM items WHERE value::text LIKE '%%canary-5f3a%%'") == [(0,)]
    assert query(database_url, "SELECT count(*) FROM item_sources") == [(1,)]  # the kept item's lineage only
    await store.adelete(ALICE, "never-put")  # nothing to forget: no error


async def test_search_ranks_by_text_filters_by_value_and_pages(store):
    await store.aput(ALICE, "a", {"content": "Alice is allergic to peanuts", "kind": "health"})
    await store.aput(ALICE, "b", {"content": "Alice prefers the dark theme", "kind": "ui"})
    await store.aput(ALICE, "c", {"content": "我以前住在里昂", "kind": "place"})
    await store.aput(("memories", "alice", "work"), "d", {"content": "Allergy training on Friday", "kind": "health"})
    hits = await store.asearch(ALICE, query="what is she allergic to?")
    assert [h.key for h in hits][:1] == ["a"] and all(h.score is not None for h in hits)
    assert "b" not in [h.key for h in hits]
    assert [h.key for h in await store.asearch(ALICE, query="里昂")] == ["c"]  # CJK: trigrams, not full text
    health = await store.asearch(ALICE, filter={"kind": "health"})
    assert sorted(h.key for h in health) == ["a", "d"] and all(h.score is None for h in health)
    assert [h.key for h in await store.asearch(ALICE, filter={"kind": {"$eq": "ui"}})] == ["b"]
    assert [h.key for h in await store.asearch(("memories", "alice", "work"))] == ["d"]
    everything = await store.asearch(ALICE, limit=10)
    assert len(everything) == 4
    paged = await store.asearch(ALICE, limit=2, offset=1)
    assert [h.key for h in paged] == [h.key for h in everything[1:3]]
    with pytest.raises(InvalidInputError, match=r"only equality"):
        await store.asearch(ALICE, filter={"kind": {"$gt": "a"}})


async def test_a_user_never_reads_another_users_or_tenants_items(store):
    other_tenant = MemoryStore(store._connector().pool, tenant_id="globex")
    await store.aput(ALICE, "k", {"content": "Alice's peanut allergy"})
    await store.aput(BOB, "k", {"content": "Bob's peanut allergy"})
    await other_tenant.aput(ALICE, "k", {"content": "another Alice's peanut allergy"})
    assert [h.value["content"] for h in await store.asearch(ALICE, query="peanut")] == ["Alice's peanut allergy"]
    assert [h.value["content"] for h in await store.asearch(BOB)] == ["Bob's peanut allergy"]
    item = await other_tenant.aget(ALICE, "k")
    assert item is not None and item.value["content"] == "another Alice's peanut allergy"
    await other_tenant.adelete(ALICE, "k")
    assert (await store.aget(ALICE, "k")) is not None  # the other tenant's delete forgot its own row only
    with pytest.raises(InvalidInputError, match="names no user"):
        await store.asearch(("memories",), query="peanut")
    with pytest.raises(InvalidInputError, match="prefix naming the user"):
        await store.alist_namespaces()


async def test_list_namespaces_comes_from_the_data(store):
    for namespace in [ALICE, ("memories", "alice", "work"), ("memories", "alice", "home"), ("facts", "alice"), BOB]:
        await store.aput(namespace, "k", {"content": "x"})
    assert await store.alist_namespaces(prefix=ALICE) == [
        ("memories", "alice"),
        ("memories", "alice", "home"),
        ("memories", "alice", "work"),
    ]
    assert await store.alist_namespaces(prefix=("*", "alice"), max_depth=2) == [("facts", "alice"), ALICE]
    assert await store.alist_namespaces(prefix=ALICE, suffix=("work",)) == [("memories", "alice", "work")]
    assert await store.alist_namespaces(prefix=ALICE, limit=1, offset=1) == [("memories", "alice", "home")]
    await store.adelete(("memories", "alice", "work"), "k")
    assert ("memories", "alice", "work") not in await store.alist_namespaces(prefix=ALICE)


async def test_bad_input_is_refused_and_nothing_is_written(store, database_url):
    good = PutOp(ALICE, "fine", {"content": "would be written"})
    for bad, message in [
        (PutOp(("memories",), "k", {"content": "x"}), "names no user"),
        (PutOp(("memories", "a.b"), "k", {"content": "x"}), "periods"),
        (PutOp(("langgraph", "alice"), "k", {"content": "x"}), "langgraph"),
        (PutOp(ALICE, "", {"content": "x"}), "non-empty string"),
        (PutOp(ALICE, "k", {"content": object()}), "JSON-serializable"),
        (PutOp(ALICE, "k", {"content": "x"}, ttl=5.0), "TTL"),
        (GetOp(("memories", " "), "k"), "user label"),
    ]:
        with pytest.raises(InvalidInputError, match=message):
            await store.abatch([good, bad])
    assert query(database_url, "SELECT count(*) FROM items") == [(0,)]
    with pytest.raises(ConfigurationError, match="async calls only"):
        store.put(ALICE, "k", {"content": "a sync call on a bare pool"})
    with pytest.raises(InvalidInputError, match="tenant_id"):
        MemoryStore(None, tenant_id="")


def nested(depth: int) -> dict:
    value: dict = {"content": "deep"}
    for _ in range(depth):
        value = {"inner": value}
    return value


async def test_values_keys_and_namespaces_the_database_cannot_hold_are_refused_by_name(store, database_url):
    for bad, message in [
        (PutOp(ALICE, "k", {"content": "x", "note": "a \x00 inside"}), "NUL"),
        (PutOp(ALICE, "k", {"content": ["fine", {"deep": "nul \x00"}]}), "NUL"),
        (PutOp(ALICE, "k", {"content": "lone \ud800 surrogate"}), "lone surrogate"),
        (PutOp(ALICE, "k", {"lone \udc00 key": "x"}), "lone surrogate"),
        (PutOp(ALICE, "lone \ud800", {"content": "x"}), "lone surrogate"),
        (PutOp(("memories", "alice", "tag \ud800"), "k", {"content": "x"}), "lone surrogate"),
        (PutOp(ALICE, "k" * 10_000, {"content": "x"}), "at most 512 bytes"),
        (PutOp(("memories", "alice", "n" * 10_000), "k", {"content": "x"}), "at most 512 bytes"),
        (GetOp(ALICE, "k" * 10_000), "at most 512 bytes"),
        (PutOp(ALICE, "k", nested(3_000)), "more than 100 levels"),
        (PutOp(ALICE, "k", {"content": float("nan")}), "JSON-serializable"),
    ]:
        with pytest.raises(InvalidInputError, match=message):
            await store.abatch([bad])
    assert query(database_url, "SELECT count(*) FROM items") == [(0,)]
    # At the limits, values are stored and read back whole.
    await store.aput(("memories", "alice", "n" * 400), "k" * 512, nested(98))
    item = await store.aget(("memories", "alice", "n" * 400), "k" * 512)
    assert item is not None and item.value == nested(98)


async def test_a_store_on_the_service_serves_sync_and_async_callers(open_memory, database_url):
    memory = await open_memory()
    store = MemoryStore.from_service(memory)
    await store.aput(ALICE, "k", {"content": "from the async side"})
    # A sync call blocks its thread while the memory loop does the work (run it off this test's loop).
    item = await asyncio.to_thread(store.get, ALICE, "k")
    assert item is not None and item.value == {"content": "from the async side"}
    await asyncio.to_thread(store.put, ALICE, "k", {"content": "from the sync side"})
    assert versions(database_url, "k")[-1][0] == {"content": "from the sync side"}
    assert [r[6] for r in versions(database_url, "k")] == ["default", "default"]


async def test_with_row_level_security_a_tenants_store_sees_only_its_rows(store, app_role, database_url):
    await store.aput(ALICE, "k", {"content": "acme's Alice"})
    pool = MemoryBackend.create_pool(app_role, max_size=2)
    await pool.open()
    try:
        # The application role is bound by the policies: the store names its tenant in every transaction.
        acme, globex = MemoryStore(pool, tenant_id="acme"), MemoryStore(pool, tenant_id="globex")
        item = await acme.aget(ALICE, "k")
        assert item is not None and item.value == {"content": "acme's Alice"}
        assert await globex.aget(ALICE, "k") is None and await globex.asearch(ALICE) == []
        await globex.aput(ALICE, "k", {"content": "globex's Alice"})
        await globex.adelete(ALICE, "k")
        await acme.aput(ALICE, "k2", {"content": "written under row-level security"})
    finally:
        await pool.close()
    assert query(database_url, "SELECT tenant_id, key FROM items ORDER BY key") == [("acme", "k"), ("acme", "k2")]


PUT_IN_ANOTHER_PROCESS = """
import sys
from memory_agent import MemoryService, MemorySettings, MemoryStore
with MemoryService.from_settings(MemorySettings(database_url=sys.argv[1])) as memory:
    MemoryStore.from_service(memory, tenant_id="acme").put(("memories", "alice"), "k", {"content": sys.argv[2]})
"""


async def test_a_put_in_another_process_is_read_here(store, database_url):
    await store.aput(ALICE, "k", {"content": "written here"})
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-c", PUT_IN_ANOTHER_PROCESS, database_url, "written there"
    )
    assert await process.wait() == 0
    item = await store.aget(ALICE, "k")
    assert item is not None and item.value == {"content": "written there"}
