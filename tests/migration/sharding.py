"""The sharding rules, read from the catalog: what a table of the memory_agent schema must look like to be
distributed by user_id (Citus) without cross-shard keys.

Distributed tables (every table except the bookkeeping ones and conversation_owners):
- carry tenant_id and user_id, both NOT NULL;
- have a primary key, and it leads with user_id; so does every unique index (partial ones included);
- every foreign key leads with user_id on both sides (a key between distributed tables names the shard);
- every foreign key is backed by an index of the referencing table that starts with its columns (else a
  delete of the referenced row reads the whole referencing table, as `memory.base_memory_id` once did).
conversation_owners (keyed by conversation_id): tenant_id and user_id NOT NULL, primary key (conversation_id),
no foreign key to or from it.
Reference tables (REFERENCE: api_keys, looked up by a key's hash before any user is named; replicated to every
node on Citus, docs/how-to/scaling.md): tenant_id NOT NULL, a primary key, no foreign key to or from it.
Reference tables of no tenant (GLOBAL: vector_centers, one row per embedding model, 0025): no tenant_id or user_id
column (they hold no tenant's data), a primary key, no foreign key to or from it.
"""

from __future__ import annotations

from typing import Any

import psycopg

BOOKKEEPING = ("schema_migrations", "schema_definitions", "schema_procrastinate")
OWNERS = "conversation_owners"
REFERENCE = ("api_keys",)
GLOBAL = ("vector_centers",)

TABLES_SQL = """
SELECT c.oid, c.relname FROM pg_class AS c JOIN pg_namespace AS n ON n.oid = c.relnamespace
WHERE n.nspname = %s AND c.relkind IN ('r', 'p') ORDER BY c.relname
"""
COLUMNS_SQL = """
SELECT a.attname, a.attnotnull FROM pg_attribute AS a
WHERE a.attrelid = %s AND a.attnum > 0 AND NOT a.attisdropped
"""
UNIQUE_SQL = """
SELECT i.indexrelid::regclass::text AS name, i.indisprimary,
       ARRAY(SELECT a.attname::text FROM unnest(i.indkey::int2[]) WITH ORDINALITY AS k (attnum, ord)
             LEFT JOIN pg_attribute AS a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
             ORDER BY k.ord) AS columns
FROM pg_index AS i WHERE i.indrelid = %s AND i.indisunique
"""
INDEXES_SQL = """
SELECT ARRAY(SELECT a.attname::text FROM unnest(i.indkey::int2[]) WITH ORDINALITY AS k (attnum, ord)
             LEFT JOIN pg_attribute AS a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
             ORDER BY k.ord) AS columns
FROM pg_index AS i WHERE i.indrelid = %s
"""
FOREIGN_KEYS_SQL = """
SELECT co.conname, co.conrelid::regclass::text AS source, co.confrelid::regclass::text AS target,
       co.conrelid = %(oid)s AS outgoing,
       ARRAY(SELECT a.attname::text FROM unnest(co.conkey) WITH ORDINALITY AS k (attnum, ord)
             JOIN pg_attribute AS a ON a.attrelid = co.conrelid AND a.attnum = k.attnum ORDER BY k.ord) AS columns,
       ARRAY(SELECT a.attname::text FROM unnest(co.confkey) WITH ORDINALITY AS k (attnum, ord)
             JOIN pg_attribute AS a ON a.attrelid = co.confrelid AND a.attnum = k.attnum ORDER BY k.ord)
           AS target_columns
FROM pg_constraint AS co
WHERE co.contype = 'f' AND (co.conrelid = %(oid)s OR co.confrelid = %(oid)s)
"""


def _rows(conn: psycopg.Connection[Any], query: str, params: Any) -> list[tuple[Any, ...]]:
    return conn.execute(query, params).fetchall()


def sharding_violations(url: str, schema: str) -> list[str]:
    """Every broken rule of every table of `schema`, as `table: problem` lines (empty: all hold)."""
    problems: list[str] = []
    with psycopg.connect(url) as conn:
        for oid, table in _rows(conn, TABLES_SQL, [schema]):
            if table in BOOKKEEPING or table.startswith("procrastinate_"):
                continue
            columns = dict(_rows(conn, COLUMNS_SQL, [oid]))
            unique = _rows(conn, UNIQUE_SQL, [oid])
            foreign = _rows(conn, FOREIGN_KEYS_SQL, {"oid": oid})
            if table in REFERENCE or table in GLOBAL:
                if table in REFERENCE and not columns.get("tenant_id"):
                    problems.append(f"{table}: tenant_id is missing or nullable")
                if table in GLOBAL and {"tenant_id", "user_id"} & set(columns):
                    problems.append(f"{table}: a table of no tenant has a tenant_id or user_id column")
                if not any(is_pk for _, is_pk, _ in unique):
                    problems.append(f"{table}: no primary key")
                for name, *_ in foreign:
                    problems.append(f"{table}: foreign key {name} (a reference table stands alone)")
                continue
            for key in ("tenant_id", "user_id"):
                if key not in columns:
                    problems.append(f"{table}: no {key} column")
                elif not columns[key]:
                    problems.append(f"{table}: {key} is nullable")
            if table == OWNERS:
                primary = [cols for _, is_pk, cols in unique if is_pk]
                if primary != [["conversation_id"]]:
                    problems.append(f"{table}: primary key is {primary}, not (conversation_id)")
                for name, *_ in foreign:
                    problems.append(f"{table}: foreign key {name} (the owners table stands alone)")
                continue
            if not any(is_pk for _, is_pk, _ in unique):
                problems.append(f"{table}: no primary key")
            for name, is_pk, cols in unique:
                if not cols or cols[0] != "user_id":
                    kind = "primary key" if is_pk else "unique index"
                    problems.append(f"{table}: {kind} {name} {tuple(cols)} does not lead with user_id")
            indexes = [cols for (cols,) in _rows(conn, INDEXES_SQL, [oid])]
            for name, _source, target, outgoing, cols, target_cols in foreign:
                if not outgoing:
                    continue  # checked on the referencing table
                if not cols or cols[0] != "user_id" or not target_cols or target_cols[0] != "user_id":
                    problems.append(
                        f"{table}: foreign key {name} {tuple(cols)} -> {target} {tuple(target_cols)} "
                        "does not lead with user_id on both sides"
                    )
                if not any(index[: len(cols)] == cols for index in indexes):
                    problems.append(f"{table}: foreign key {name} {tuple(cols)} has no index starting with its columns")
    return problems
