"""The long-term migration: extensions where every memory_agent schema finds them, keys led by user_id."""

from __future__ import annotations

import psycopg

from memory_agent.long_term import ItemOrigin, ItemScope, list_items, remember
from memory_agent.schemas.keys import UserKey
from tests.conftest import query
from tests.long_term.conftest import at, items


async def test_extensions_serve_every_schema_of_the_database(open_memory, database_url):
    assert sorted(
        query(
            database_url,
            "SELECT extname, extnamespace::regnamespace::text FROM pg_extension"
            " WHERE extname IN ('btree_gist', 'pg_trgm')",
        )
    ) == [("btree_gist", "public"), ("pg_trgm", "public")]
    await open_memory(db_schema="second_tier")  # migrates a second schema of the same database
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        await conn.execute('SET search_path TO "second_tier", public')
        await remember(
            conn,
            scope=ItemScope(tenant_id="t", user_id="u"),
            source=ItemOrigin(conversation_id=None, memory_id=None),
            now=at(0),
            items=items(facts=[("home_city", "The user lives in Lisbon")]),
        )
        assert [i.content for i in await list_items(conn, UserKey("t", "u"))] == ["The user lives in Lisbon"]
        assert (await (await conn.execute("SELECT similarity('Lisbon', 'Lisboa') > 0.3")).fetchone()) == (True,)
    assert query(database_url, "SELECT count(*) FROM memory_agent.items") == [(0,)]


def test_every_key_of_the_long_term_tables_leads_with_user_id(database_url):
    keys = query(
        database_url,
        "SELECT conrelid::regclass::text, conname, contype, (SELECT attname FROM pg_attribute"
        "  WHERE attrelid = conrelid AND attnum = conkey[1])"
        " FROM pg_constraint WHERE conrelid IN ('memory_agent.items'::regclass, 'memory_agent.item_sources'::regclass)"
        " AND contype IN ('p', 'u', 'f')",
    )
    assert len(keys) == 5 and {row[3] for row in keys} == {"user_id"}, keys
