"""The statements of memory_agent.testing, the only module of it that runs any: a database made and dropped (a
test's, an evaluation's), the integrity checker's rules (sql/queries/integrity.sql) and the bulk writer of
generate_conversations (sql/queries/testing.sql). Blocking connections: pytest's fixtures run outside any loop.

The integrity checker: what must hold in a memory_agent database after any sequence of rounds, checked on every
schema memory_agent migrated in it — sequences gap-free, rounds whole, one linear chain of versions, at most one
`processing` row per conversation, no memory past the stored messages, metrics agreeing with the rows they
describe (each rule's description: sql/queries/integrity.sql).
"""

from __future__ import annotations

import contextlib
import time
from typing import Any

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from memory_agent import resources
from memory_agent.db.connector import fetch_all_sync, fetch_one_sync

Row = dict[str, Any]

# The rules by the name a failure reports, and their queries.
RULES = {
    "sequences gap-free": "integrity_sequences_gap_free",
    "rounds whole": "integrity_rounds_whole",
    "linear chain": "integrity_linear_chain",
    "at most one processing": "integrity_at_most_one_processing",
    "no memory past the stored messages": "integrity_no_memory_past_the_stored_messages",
    "metrics agreeing": "integrity_metrics_agreeing",
}


def with_dbname(url: str, dbname: str) -> str:
    """`url` naming the database `dbname` instead of its own."""
    params = conninfo_to_dict(url)
    params["dbname"] = dbname
    return make_conninfo(**params)


def create_database(server_url: str, name: str, *, template: str | None = None) -> str:
    """A new database `name` on the server of `server_url` (a copy of `template` when given); its URL."""
    statement = sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name))
    if template is not None:
        statement = sql.SQL("{} TEMPLATE {}").format(statement, sql.Identifier(template))
    with psycopg.connect(server_url, autocommit=True) as conn:
        fetch_all_sync(conn, statement)
    return with_dbname(server_url, name)


def drop_database(server_url: str, name: str) -> None:
    """Drop the database `name` if it exists, ending the sessions still on it."""
    with psycopg.connect(server_url, autocommit=True) as conn:
        fetch_all_sync(conn, sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


def _on_schema(conn: psycopg.Connection[Any], schema: str) -> None:
    fetch_all_sync(conn, sql.SQL("SET search_path TO {}, public").format(sql.Identifier(schema)))


def find_violations(url: str) -> dict[str, list[Row]]:
    """{"<schema>: <rule>": up to ten offending rows} for every rule broken in the database at `url`."""
    found: dict[str, list[Row]] = {}
    with psycopg.connect(url, autocommit=True) as conn:
        for schema in [row["table_schema"] for row in fetch_all_sync(conn, "integrity_schemas")]:
            _on_schema(conn, schema)
            for rule, name in RULES.items():
                rows = fetch_all_sync(conn, name)
                if rows:
                    found[f"{schema}: {rule}"] = rows[:10]
    return found


def check_integrity(url: str) -> None:
    """Raise AssertionError naming every broken rule and up to ten offending rows of each."""
    found = find_violations(url)
    if found:
        lines = [f"{rule}: {rows}" for rule, rows in found.items()]
        raise AssertionError("memory_agent integrity check failed:\n" + "\n".join(lines))


def generate_conversations(url: str, conversations: int, rounds: int, schema: str = "memory_agent") -> dict[str, Any]:
    """Fill the migrated, empty `schema` at `url` with `conversations` of `rounds` rounds each (what each one holds:
    sql/queries/testing.sql); returns row counts and the seconds each step took."""
    blocks = resources.parse_queries((resources.queries_dir() / "testing.sql").read_text(encoding="utf-8"))
    timings: dict[str, float] = {}
    params = {"conversations": conversations, "rounds": rounds}
    with psycopg.connect(url, autocommit=True) as conn:
        _on_schema(conn, schema)
        fetch_one_sync(conn, "generate_fast_writes")
        # Skipping the per-row foreign-key triggers halves the load. Only a superuser may; elsewhere the load just
        # takes longer.
        with contextlib.suppress(psycopg.Error):
            fetch_one_sync(conn, "generate_without_triggers")
        for name in blocks:
            if name.startswith("scale_"):
                started = time.perf_counter()
                fetch_one_sync(conn, name, params)
                timings[name] = time.perf_counter() - started
        started = time.perf_counter()
        fetch_one_sync(conn, "generated_statistics")
        timings["vacuum_analyze"] = time.perf_counter() - started
        counts = fetch_one_sync(conn, "generated_counts")
    assert counts is not None
    return {**counts, "generate_s": {name: round(seconds, 2) for name, seconds in timings.items()}}
