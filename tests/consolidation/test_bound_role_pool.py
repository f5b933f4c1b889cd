"""Code that builds its own Connector over a pool (the consolidation scheduler, a MemoryStore given a pool) names
the running work's tenant as the service's backend does: a role bound by row-level security sees its tenant's
rows on a connection whose previous user named another tenant, and only those."""

from __future__ import annotations

from typing import Any

from memory_agent.consolidation import ConsolidationRunner
from memory_agent.consolidation.schedule import NIGHTLY
from memory_agent.long_term.store import MemoryStore
from memory_agent.service.backend import MemoryBackend
from memory_agent.settings import MemorySettings
from tests.conftest import query
from tests.consolidation.conftest import CountingModel, day, write_day

SUMMARIES = "SELECT tenant_id, count(*) FROM consolidation_notes GROUP BY tenant_id ORDER BY tenant_id"


async def name_globex(pool: Any) -> None:
    """Every connection of `pool` last served globex: its previous user named that tenant for the session."""
    async with pool.connection() as first, pool.connection() as second:
        for shared in (first, second):
            await shared.execute("SELECT set_config('memory_agent.tenant_id', 'globex', false)")


async def test_the_scheduler_over_a_bound_roles_pool_works_for_each_users_tenant(conn: Any, app_role, database_url):
    for n in range(2):
        await write_day(conn, "alice", n)  # acme
        await write_day(conn, "alice", n, tenant_id="globex")
    # A pool of the bound role's that nobody detected (an application's own), two connections: every
    # user shares them.
    pool = MemoryBackend.create_pool(app_role, "memory_agent", min_size=2, max_size=2)
    await pool.open(wait=True)
    try:
        await name_globex(pool)
        model = CountingModel()
        runner = ConsolidationRunner(pool, model, MemorySettings(consolidation_enabled=True))
        line = await runner.run_user(NIGHTLY, "acme", "alice", day(2, 5))
        assert line.startswith("2 days: 2 daily"), line  # acme's two days, read and written as acme
        assert query(database_url, SUMMARIES) == [("acme", 2)]
        # A MemoryStore over that pool, right after: its tenant's rows, written under its tenant.
        await name_globex(pool)
        store = MemoryStore(pool, tenant_id="acme")
        await store.aput(("memories", "alice"), "k", {"text": "acme's"})
        got = await store.aget(("memories", "alice"), "k")
        assert got is not None and got.value == {"text": "acme's"}
        assert [hit.key for hit in await store.asearch(("memories", "alice"))] == ["k"]
        assert await MemoryStore(pool, tenant_id="globex").asearch(("memories", "alice")) == []
        assert query(database_url, "SELECT DISTINCT tenant_id FROM items WHERE store_namespace IS NOT NULL") == [
            ("acme",)
        ]
    finally:
        await pool.close()
