"""On a Citus cluster: row-level security for a role that does not own the tables. The service connected as that
role serves two tenants in full (rounds, summaries, long-term items, recall, forgetting), and a connection of that
role reads, on the coordinator and on every worker, the rows of the tenant its transaction names and nothing else
in every distributed table, nothing at all when it names none."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import psycopg
import pytest
from langchain_core.messages import HumanMessage
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from memory_agent import MemoryStore, with_memory
from memory_agent.db.connector import Connector
from memory_agent.errors import ConversationOwnerError
from memory_agent.llm.offline import OfflineSummaryModel
from memory_agent.settings import ModelPrice
from tests.citus.conftest import query
from tests.consolidation.test_ledger import _EchoGraph, cost_of
from tests.integration.test_row_security import SAID_BY_BOTH, say, serve_two_tenants


@pytest.fixture
def app_role(citus_url: str, schema: str) -> Iterator[str]:
    """A login role of the cluster (Citus creates it on the workers too) that does not own the tables, granted what
    an application needs on the test's schema; the URL that connects as it. Granted after the schema exists: the
    test opens the owner's service first."""
    role = f"ma_app_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(citus_url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
    params = conninfo_to_dict(citus_url)
    params["user"] = role
    yield make_conninfo(**params)
    with psycopg.connect(citus_url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
        conn.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(role)))
        conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


def grant(url: str, schema: str, role_url: str) -> None:
    """As docs/concepts/privacy.md says: grant_bound_role, run by the owner."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            sql.SQL("SELECT {}.grant_bound_role(%s)").format(sql.Identifier(schema)),
            (conninfo_to_dict(role_url)["user"],),
        )


def distributed_tables(url: str, schema: str) -> list[str]:
    rows = query(
        url,
        schema,
        "SELECT c.relname FROM pg_dist_partition AS p JOIN pg_class AS c ON c.oid = p.logicalrelid"
        " WHERE c.relnamespace = %s::regnamespace AND p.partmethod = 'h' ORDER BY 1",
        [schema],
    )
    return [name for (name,) in rows]


def nodes(url: str) -> list[str]:
    """The URL of the coordinator's database on the coordinator and on every active worker."""
    with psycopg.connect(url, autocommit=True) as conn:
        workers = conn.execute("SELECT node_name, node_port FROM citus_get_active_worker_nodes()").fetchall()
    params = conninfo_to_dict(url)
    return [url] + [make_conninfo(**{**params, "host": host, "port": str(port)}) for host, port in workers]


def tenants_seen(url: str, schema: str, tables: list[str], tenant: str | None) -> dict[str, set[str]]:
    """Per table, the tenants a connection to `url` reads in one transaction that names `tenant` as an application
    on Citus must (SET LOCAL, propagated to the workers the transaction uses); None: names no tenant."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(sql.SQL("SET search_path TO {}, public").format(sql.Identifier(schema)))
        with conn.transaction():
            conn.execute("SET LOCAL citus.propagate_set_commands = local")
            if tenant is not None:
                conn.execute(sql.SQL("SET LOCAL memory_agent.tenant_id = {}").format(sql.Literal(tenant)))
            return {
                name: {
                    row[0]
                    for row in conn.execute(sql.SQL("SELECT DISTINCT tenant_id FROM {}").format(sql.Identifier(name)))
                }
                for name in tables
            }


async def test_a_role_bound_by_the_policies_serves_each_tenant_and_reads_no_other(
    app_role, open_memory, citus_url, schema
):
    owner = await open_memory(model=OfflineSummaryModel())  # migrates and distributes the schema
    grant(citus_url, schema, app_role)
    memory = await open_memory(model=OfflineSummaryModel(), database_url=app_role, auto_migrate=False)
    assert memory.backend.row_security
    assert Connector(memory.backend.pool).tenant_per_transaction  # the pool's, whichever Connector hands it out

    await say(memory, "acme-1", "ana", "acme", ["I live in Lisbon.", "My violin teacher is Ingrid.", "Bye."])
    await say(memory, "globex-1", "ben", "globex", ["I live in Porto.", "My violin teacher is Carla.", "Bye."])
    # Summaries ran as that role: items written, each for its tenant.
    acme_items = {item.content for item in await memory.long_term.list_items("ana", tenant_id="acme")}
    assert "The user lives in Lisbon" in acme_items and not any("Porto" in c for c in acme_items)
    assert await memory.long_term.list_items("ana", tenant_id="globex") == []
    # Recall finds the tenant's items (not only turns), and nothing of the other tenant's.
    hits = (await memory.long_term.recall("ana", "Where do I live?", tenant_id="acme")).results
    assert any(hit.kind == "item" and "Lisbon" in hit.text for hit in hits)
    assert (await memory.long_term.recall("ben", "Where do I live?", tenant_id="acme")).results == []
    (given,) = await say(memory, "acme-2", "ana", "acme", ["Where do I live?"])
    assert "The user lives in Lisbon" in given[0].text and "Porto" not in given[0].text

    # Another tenant's thread id is refused as it is to the owner, though this role cannot see who holds it.
    with pytest.raises(ConversationOwnerError):
        await say(memory, "globex-1", "ana", "acme", ["Hello?"])
    # The LangGraph store keeps each tenant's values to itself.
    await MemoryStore.from_service(memory, tenant_id="acme").aput(("facts", "ana"), "diet", {"content": "no meat"})
    stored = await MemoryStore.from_service(memory, tenant_id="acme").aget(("facts", "ana"), "diet")
    assert stored is not None and stored.value == {"content": "no meat"}
    other = MemoryStore.from_service(memory, tenant_id="globex")
    assert await other.aget(("facts", "ana"), "diet") is None
    assert await other.asearch(("facts", "ana"), query="meat") == []

    # Every distributed table holds both tenants' rows (the owner reads them all), so there was something to leak.
    tables = distributed_tables(citus_url, schema)
    assert {"conversations", "messages", "memory", "items", "item_sources", "llm_calls"} <= set(tables)
    everything = tenants_seen(citus_url, schema, tables, None)
    assert {name for name, seen in everything.items() if seen == {"acme", "globex"}} >= SAID_BY_BOTH
    # The role, on the coordinator and on every worker: its named tenant's rows only, none without a tenant.
    for node in nodes(app_role):
        for tenant in ("acme", "globex"):
            seen = tenants_seen(node, schema, tables, tenant)
            assert {name: rows for name, rows in seen.items() if rows - {tenant}} == {}, node
            assert seen["messages"] == seen["items"] == {tenant}, node
        assert {name: rows for name, rows in tenants_seen(node, schema, tables, None).items() if rows} == {}, node

    # Forgetting works as that role, and leaves the other tenant's rows alone.
    report = await memory.long_term.forget_user("ana", tenant_id="acme")
    assert report.items_deleted and set(report.conversations_deleted) == {"acme-1", "acme-2"}
    assert query(citus_url, schema, "SELECT DISTINCT tenant_id FROM messages") == [("globex",)]
    assert query(citus_url, schema, "SELECT DISTINCT tenant_id FROM items") == [("globex",)]
    # Its model calls stay counted for the tenant, under no user.
    assert query(citus_url, schema, "SELECT DISTINCT user_id FROM llm_calls WHERE tenant_id = 'acme'") == [("",)]
    await owner.aclose()


async def test_the_http_api_as_a_role_bound_by_the_policies(app_role, open_memory, citus_url, schema):
    owner = await open_memory(model=OfflineSummaryModel())
    grant(citus_url, schema, app_role)
    memory = await open_memory(
        model=OfflineSummaryModel(),
        database_url=app_role,
        auto_migrate=False,
        monthly_cost_ceiling=1000.0,
        llm_prices={"offline-consolidator": {"input": 1.0, "output": 1.0}},
    )
    await serve_two_tenants(owner, memory)
    assert query(citus_url, schema, "SELECT DISTINCT tenant_id FROM items") == [("acme",)]
    assert query(citus_url, schema, "SELECT tenant_id FROM llm_calls WHERE purpose = 'consolidation'") == [("acme",)]
    assert query(citus_url, schema, "SELECT count(*) FROM budget_reservations") == [(0,)]


async def test_a_bound_role_records_the_app_models_calls_at_round_end(app_role, open_memory, citus_url, schema):
    await open_memory()
    grant(citus_url, schema, app_role)
    prices = {"app-model-1": {"input": 10.0, "output": 30.0}}
    memory = await open_memory(database_url=app_role, auto_migrate=False, llm_prices=prices)
    app = with_memory(_EchoGraph(usage=True).graph, memory)
    config = {"configurable": {"thread_id": "t", "user_id": "ana", "tenant_id": "acme"}}
    for n in range(2):
        await app.ainvoke({"messages": [HumanMessage(f"question {n}")]}, config)
    rows = query(
        citus_url,
        schema,
        "SELECT tenant_id, user_id, model, input_tokens, output_tokens, cost, priced FROM llm_calls"
        " WHERE purpose = 'app'",
    )
    expected = cost_of(1200, 300, ModelPrice(input=10.0, output=30.0))
    assert rows == [("acme", "ana", "app-model-1", 1200, 300, expected, True)] * 2
    assert query(citus_url, schema, "SELECT count(*) FROM tenant_monthly_spend")[0][0] == 0
