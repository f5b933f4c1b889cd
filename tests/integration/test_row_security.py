"""Row-level security end to end. The catalog: every table and view that holds a tenant's data is bound by a
tenant policy (views read as the querying role). Behaviour: a service connected as a role that does not own
the tables serves its tenant in full — rounds, summaries, long-term items, recall (items and summaries, not only
turns), forgetting — and that role, with a tenant named, reads no row of another tenant in any table or view."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from langchain_core.messages import HumanMessage

from memory_agent import with_memory
from memory_agent.db.connector import Connector
from memory_agent.errors import ConversationOwnerError
from memory_agent.llm.offline import OfflineSummaryModel
from tests.api.conftest import serve
from tests.api.test_http import client
from tests.conftest import query
from tests.support import EchoChat

# The schema's bookkeeping, and the embedding models' centers (0025, computed from reference texts): no tenant's data
# (asserted below: no tenant or user column).
TENANT_FREE = {"schema_migrations", "schema_definitions", "schema_procrastinate", "vector_centers"}
# The tables that two tenants' rounds, summaries and items (say() for each) fill with rows of both tenants,
# on one server as on a Citus cluster.
SAID_BY_BOTH = {
    "conversations",
    "conversation_owners",
    "messages",
    "memory",
    "round_metrics",
    "items",
    "item_sources",
    "llm_calls",
    "tenant_monthly_spend",
}
RELATIONS = """
    SELECT c.relname, c.relkind, c.relrowsecurity,
           (SELECT count(*) FROM pg_policy AS p WHERE p.polrelid = c.oid) AS policies,
           COALESCE('security_invoker=true' = ANY (c.reloptions), false) AS invoker,
           EXISTS (SELECT 1 FROM pg_attribute AS a
                   WHERE a.attrelid = c.oid AND a.attname IN ('tenant_id', 'user_id') AND NOT a.attisdropped) AS keyed
    FROM pg_class AS c JOIN pg_namespace AS n ON n.oid = c.relnamespace
    WHERE n.nspname = 'memory_agent' AND c.relkind IN ('r', 'p', 'v', 'm') AND c.relname NOT LIKE 'procrastinate%'
    ORDER BY c.relname
"""


def test_every_table_and_view_holding_tenant_data_is_bound_by_a_tenant_policy(database_url):
    rows = query(database_url, RELATIONS)
    tables = {name: (rls, policies, keyed) for name, kind, rls, policies, _, keyed in rows if kind in ("r", "p")}
    views = {name: invoker for name, kind, _, _, invoker, _ in rows if kind == "v"}
    assert not [name for name, kind, *_ in rows if kind == "m"]  # a materialized view could not be bound
    assert {"conversations", "messages", "memory", "round_metrics", "items", "llm_calls"} <= set(tables)
    assert not [name for name in TENANT_FREE if tables[name][2]]
    unbound = [
        name for name, (rls, policies, _) in tables.items() if name not in TENANT_FREE and not (rls and policies)
    ]
    assert unbound == []
    assert {"upgrade_report_weekly", "round_report_weekly", "memory_health"} <= set(views)
    assert [name for name, invoker in views.items() if not invoker] == []
    # Every policy is the tenant rule, for every command.
    policies = query(
        database_url,
        "SELECT c.relname, p.polcmd, pg_get_expr(p.polqual, p.polrelid), p.polwithcheck IS NULL FROM pg_policy AS p"
        " JOIN pg_class AS c ON c.oid = p.polrelid JOIN pg_namespace AS n ON n.oid = c.relnamespace"
        " WHERE n.nspname = 'memory_agent'",
    )
    assert {cmd for _, cmd, _, _ in policies} == {"*"}
    rule = "(tenant_id = current_setting('memory_agent.tenant_id'::text, true))"
    assert [name for name, _, qual, no_check in policies if qual != rule or not no_check] == []


async def say(memory: Any, thread: str, user: str, tenant: str, texts: list[str]) -> list[Any]:
    """Rounds through with_memory, each followed by its summary; what the chat model was given each round."""
    chat = EchoChat()
    app = with_memory(chat.graph, memory)
    for text in texts:
        config = {"configurable": {"thread_id": thread, "user_id": user, "tenant_id": tenant}}
        await app.ainvoke({"messages": [HumanMessage(text)]}, config)
        assert await memory.drain(timeout=10)
    return chat.seen


def tenants_seen(url: str, tenant: str | None) -> dict[str, set[str]]:
    """Per table and view with a tenant column: the tenants a connection to `url` reads, naming `tenant`."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SET search_path TO memory_agent, public")
        if tenant is not None:
            conn.execute("SELECT set_config('memory_agent.tenant_id', %s, false)", (tenant,))
        names = conn.execute(
            "SELECT c.relname FROM pg_class AS c JOIN pg_namespace AS n ON n.oid = c.relnamespace"
            " JOIN pg_attribute AS a ON a.attrelid = c.oid AND a.attname = 'tenant_id'"
            " WHERE n.nspname = 'memory_agent' AND c.relkind IN ('r', 'v') ORDER BY 1"
        ).fetchall()
        return {
            name: {row[0] for row in conn.execute(f'SELECT DISTINCT tenant_id FROM "{name}"').fetchall()}
            for (name,) in names
        }


async def test_a_role_bound_by_the_policies_serves_its_tenant_and_reads_no_other(open_memory, app_role, database_url):
    owner = await open_memory(model=OfflineSummaryModel(), llm_prices={"offline-summarizer": {"input": 1, "output": 1}})
    await say(owner, "globex-1", "ana", "globex", ["I live in Porto.", "My violin teacher is Carla.", "Bye."])

    memory = await open_memory(
        model=OfflineSummaryModel(),
        database_url=app_role,
        auto_migrate=False,
        llm_prices={"offline-summarizer": {"input": 1, "output": 1}},
    )
    await say(memory, "acme-1", "ana", "acme", ["I live in Lisbon.", "My violin teacher is Ingrid.", "Bye."])
    # Summaries ran as that role: versions completed, items written, for acme only.
    contents = {item.content for item in await memory.long_term.list_items("ana", tenant_id="acme")}
    assert "The user lives in Lisbon" in contents and not any("Porto" in c for c in contents)
    # Recall finds the items, not only turns (row-level security hid them when recall named no tenant).
    hits = (await memory.long_term.recall("ana", "Where do I live?", tenant_id="acme")).results
    assert any(hit.kind == "item" and "Lisbon" in hit.text for hit in hits)
    assert not any("Porto" in hit.text for hit in hits)
    # The round's recalled block too.
    (given,) = await say(memory, "acme-2", "ana", "acme", ["Where do I live?"])
    block = given[0].text
    assert "The user lives in Lisbon" in block and "Porto" not in block

    assert memory.backend.row_security  # detected at open, for the pool: any Connector over it names the tenant
    assert Connector(memory.backend.pool).row_security
    # Another tenant's thread id is refused as it is to the owner, though this role cannot see who holds it.
    with pytest.raises(ConversationOwnerError):
        await say(memory, "globex-1", "ana", "acme", ["Hello?"])
    # With a tenant named, the role reads that tenant's rows in every table and view, and nothing without one;
    # the owner sees both tenants, so the reads above had another tenant's rows to leak.
    every = tenants_seen(database_url, None)
    assert {name for name, seen in every.items() if seen == {"acme", "globex"}} >= SAID_BY_BOTH | {
        "upgrade_report_weekly",
        "memory_version_chain",
        "latest_memory",
    }
    as_acme = tenants_seen(app_role, "acme")
    assert {name: seen for name, seen in as_acme.items() if seen - {"acme"}} == {}
    assert as_acme["messages"] == as_acme["upgrade_report_weekly"] == {"acme"}
    assert {name: seen for name, seen in tenants_seen(app_role, None).items() if seen} == {}

    # Forgetting works as that role, and leaves the other tenant's rows alone.
    assert await memory.delete_conversation("acme-2", user_id="ana", tenant_id="acme")
    report = await memory.long_term.forget_user("ana", tenant_id="acme")
    assert report.items_deleted and report.conversations_deleted == ("acme-1",)
    assert query(database_url, "SELECT DISTINCT tenant_id FROM messages") == [("globex",)]
    assert query(database_url, "SELECT DISTINCT tenant_id FROM items") == [("globex",)]


async def serve_two_tenants(owner: Any, memory: Any) -> None:
    """The HTTP API of `memory` (connected as a role bound by the policies) for two tenants' keys: each reads its
    own items and conversations only, a consolidation call under the cost ceiling completes for acme, globex
    forgets its user, and a bad key gets 401. `owner` (connected as the owner) wrote globex's rounds."""
    async with serve(memory) as keys:  # the bound role writes keys of the tenant it names
        acme, globex = await keys.key("acme"), await keys.key("globex")
    await say(owner, "globex-1", "ana", "globex", ["I live in Porto.", "Hi.", "Bye."])
    await say(memory, "acme-1", "ana", "acme", ["I live in Lisbon.", "Hi.", "Bye."])
    async with serve(memory) as served:
        # Keys resolve before any tenant is named (api_key_tenant), then every read is the key's tenant's.
        async with client(served, acme) as http:
            items = (await http.get("/users/ana/items")).json()
            assert [item["content"] for item in items] == ["The user lives in Lisbon"]
            assert (await http.get("/conversations/globex-1/memory")).status_code == 404
            assert (await http.get("/conversations/acme-1/memory")).status_code == 200
            # A consolidation call reserves and settles the tenant's ceiling as that role.
            served.clock.set(datetime.now(UTC) + timedelta(days=1))
            posted = await http.post("/memory/summarize", json={"userId": "ana", "period": "daily"})
            assert posted.status_code == 200 and posted.json()["status"] == "complete", posted.text
        async with client(served, globex) as http:
            items = (await http.get("/users/ana/items")).json()
            assert [item["content"] for item in items] == ["The user lives in Porto"]
            assert (await http.delete("/users/ana")).status_code == 200
        async with client(served, "mak_not-a-key") as http:
            assert (await http.get("/users/ana/items")).status_code == 401


async def test_the_http_api_as_a_role_bound_by_the_policies(open_memory, app_role, database_url):
    owner = await open_memory(model=OfflineSummaryModel())
    memory = await open_memory(
        model=OfflineSummaryModel(),
        database_url=app_role,  # auto_migrate left on: an up-to-date schema needs no privilege to check
        monthly_cost_ceiling=1000.0,
        llm_prices={"offline-consolidator": {"input": 1.0, "output": 1.0}},
    )
    await serve_two_tenants(owner, memory)
    assert query(database_url, "SELECT DISTINCT tenant_id FROM items") == [("acme",)]
    assert query(database_url, "SELECT tenant_id, purpose FROM llm_calls WHERE purpose = 'consolidation'") == [
        ("acme", "consolidation")
    ]
    assert query(database_url, "SELECT count(*) FROM budget_reservations") == [(0,)]
