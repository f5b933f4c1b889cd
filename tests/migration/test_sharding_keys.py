"""The schema is keyed for sharding by user_id (rules in tests/migration/sharding.py), and the check catches a
table that is not."""

from __future__ import annotations

import psycopg

from tests.conftest import query
from tests.migration.sharding import sharding_violations


def test_every_table_is_keyed_by_user_id(database_url):
    tables = [
        name
        for (name,) in query(
            database_url,
            "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = 'memory_agent' AND c.relkind = 'r' ORDER BY 1",
        )
    ]
    # The check covers the tables it should (a table missing here would be checked by no rule).
    assert {
        "conversations",
        "messages",
        "memory",
        "round_metrics",
        "round_leases",
        "conversation_owners",
        "api_keys",
        "vector_centers",
    } <= set(tables)
    assert sharding_violations(database_url, "memory_agent") == []


def test_the_check_finds_each_broken_rule(database_url):
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("CREATE SCHEMA broken")
        conn.execute("SET search_path TO broken")
        conn.execute("CREATE TABLE keyless (id int PRIMARY KEY, note text)")
        conn.execute("CREATE TABLE parent (tenant_id text NOT NULL, user_id text, id int PRIMARY KEY)")
        conn.execute("CREATE UNIQUE INDEX parent_id_only ON parent (id)")
        conn.execute("CREATE UNIQUE INDEX parent_positive ON parent (id, tenant_id) WHERE id > 0")
        conn.execute(
            "CREATE TABLE child (tenant_id text NOT NULL, user_id text NOT NULL, id int, parent_id int,"
            " PRIMARY KEY (user_id, id), FOREIGN KEY (parent_id) REFERENCES parent (id))"
        )
        conn.execute(
            "CREATE TABLE good_parent (tenant_id text NOT NULL, user_id text NOT NULL, id int,"
            " PRIMARY KEY (user_id, id))"
        )
        conn.execute(
            "CREATE TABLE unindexed_child (tenant_id text NOT NULL, user_id text NOT NULL, id int, parent_id int,"
            " PRIMARY KEY (user_id, id), FOREIGN KEY (user_id, parent_id) REFERENCES good_parent (user_id, id))"
        )
        conn.execute(
            "CREATE TABLE conversation_owners (conversation_id text, tenant_id text NOT NULL,"
            " user_id text NOT NULL, PRIMARY KEY (user_id, conversation_id))"
        )
        # A reference table needs no user_id, but a tenant, a primary key and no foreign key.
        conn.execute("CREATE TABLE api_keys (key_hash bytea, tenant_id text, parent_id int REFERENCES parent (id))")
        # A table of no tenant holds no tenant's key either.
        conn.execute("CREATE TABLE vector_centers (model text, user_id text)")
    problems = sharding_violations(database_url, "broken")
    assert "vector_centers: a table of no tenant has a tenant_id or user_id column" in problems
    assert "vector_centers: no primary key" in problems
    assert "api_keys: tenant_id is missing or nullable" in problems
    assert "api_keys: no primary key" in problems
    assert any(p.startswith("api_keys: foreign key") for p in problems)
    assert not any(p.startswith("api_keys") and "user_id" in p for p in problems)
    assert "keyless: no tenant_id column" in problems
    assert "keyless: no user_id column" in problems
    assert any(p.startswith("keyless: primary key") and "does not lead with user_id" in p for p in problems)
    assert "parent: user_id is nullable" in problems
    assert any(p.startswith("parent: primary key") and "parent_pkey ('id',)" in p for p in problems)
    assert any(p.startswith("parent: unique index") and "parent_id_only" in p for p in problems)
    assert any(p.startswith("parent: unique index") and "parent_positive" in p for p in problems)  # partial
    assert any(p.startswith("child: foreign key") and "does not lead with user_id" in p for p in problems)
    assert any(p.startswith("child: foreign key") and "has no index" in p for p in problems)
    assert any(p.startswith("unindexed_child: foreign key") and "has no index" in p for p in problems)
    assert not any(p.startswith("unindexed_child") and "lead" in p for p in problems)
    assert not any(p.startswith("good_parent") for p in problems)
    assert any(p.startswith("conversation_owners: primary key") for p in problems)


def test_every_named_query_on_a_conversation_names_user_id():
    from memory_agent.resources import parse_queries, queries_dir

    named = parse_queries((queries_dir() / "conversation.sql").read_text(encoding="utf-8"))
    tables = ("conversations", "messages", "memory", "round_metrics", "round_leases", "latest_memory")
    # schema_clash reads the catalog; conversation_owner reads the owners table, keyed by the thread id.
    for name, statement in named.items():
        if name in ("schema_clash", "conversation_owner"):
            continue
        if any(f" {table}" in statement for table in tables):
            assert "%(user_id)s" in statement, name
