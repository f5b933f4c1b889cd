"""Isolation: every read names its (tenant, user); with row-level security a non-owner role connected for
tenant A reads and writes nothing of tenant B, whatever its queries ask for."""

from __future__ import annotations

import psycopg
import pytest

from memory_agent.errors import InvalidInputError
from memory_agent.long_term import (
    ItemOrigin,
    ItemScope,
    forget_user,
    list_items,
    pending_clusters,
    remember,
    set_tenant,
    tenant_transaction,
)
from memory_agent.schemas.keys import UserKey
from tests.conftest import query
from tests.long_term.conftest import at, items


async def seed(conn) -> None:
    for tenant, user, city in (("A", "alice", "Lisbon"), ("B", "bob", "Porto"), ("B", "alice", "Faro")):
        await remember(
            conn,
            scope=ItemScope(tenant_id=tenant, user_id=user),
            source=ItemOrigin(conversation_id=f"{tenant}-{user}", memory_id=1),
            now=at(0),
            items=items(
                facts=[("home_city", f"The user lives in {city}")]
                + [
                    ("allergies", f"The user is allergic to {x}", {"single_valued": False})
                    for x in ("peanuts", "shellfish", "latex")
                ]
            ),
        )


async def test_reads_are_scoped_by_tenant_and_user(conn):
    await seed(conn)
    assert {i.content for i in await list_items(conn, UserKey("A", "alice"))} >= {"The user lives in Lisbon"}
    assert "The user lives in Faro" not in {i.content for i in await list_items(conn, UserKey("A", "alice"))}
    assert {i.tenant_id for i in await list_items(conn, UserKey("B", "alice"))} == {"B"}
    assert await list_items(conn, UserKey("A", "bob")) == []


async def test_a_non_owner_role_for_tenant_a_reads_nothing_of_tenant_b(conn, app_role, database_url):
    await seed(conn)
    async with await psycopg.AsyncConnection.connect(app_role, autocommit=True) as app:
        await app.execute("SET search_path TO memory_agent, public")
        # No tenant named: nothing at all.
        assert await (await app.execute("SELECT count(*) FROM items")).fetchone() == (0,)
        assert await list_items(app, UserKey("A", "alice")) == []
        with pytest.raises(InvalidInputError, match="open transaction"):
            await set_tenant(app, "A")

        async with tenant_transaction(app, "A"):
            tenants = await (await app.execute("SELECT DISTINCT tenant_id FROM items")).fetchall()
            sources = await (await app.execute("SELECT DISTINCT tenant_id FROM item_sources")).fetchall()
            assert tenants == [("A",)] and sources == [("A",)]
            assert (
                await list_items(app, UserKey("B", "bob")) == [] and await list_items(app, UserKey("B", "alice")) == []
            )
            assert len(await list_items(app, UserKey("A", "alice"))) == 4
            assert {c.tenant_id for c in await pending_clusters(app)} == {"A"}
            # Writes and erasures of tenant B are refused or find nothing.
            assert (await forget_user(app, UserKey("B", "bob"))).items_deleted == ()
            await remember(
                app,
                scope=ItemScope(tenant_id="A", user_id="alice"),
                source=ItemOrigin(conversation_id=None, memory_id=None),
                now=at(1),
                items=items(facts=[("home_city", "The user lives in Braga")]),
            )

        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="row-level security"):
            async with tenant_transaction(app, "A"):
                await remember(
                    app,
                    scope=ItemScope(tenant_id="B", user_id="bob"),
                    source=ItemOrigin(conversation_id=None, memory_id=None),
                    now=at(1),
                    items=items(facts=[("home_city", "The user lives in Braga")]),
                )

    # The owner bypasses the policies (no FORCE): it sees both tenants, and B is untouched.
    assert query(database_url, "SELECT tenant_id, user_id, count(*) FROM items GROUP BY 1, 2 ORDER BY 1, 2") == [
        ("A", "alice", 5),
        ("B", "alice", 4),
        ("B", "bob", 4),
    ]
    assert query(
        database_url,
        "SELECT content FROM items WHERE tenant_id = 'A' AND key = 'home_city' AND upper_inf(valid_during)",
    ) == [("The user lives in Braga",)]
