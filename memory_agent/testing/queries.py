"""The statements of memory_agent.testing, the only module of it that runs any: a database made and dropped (a
test's, an evaluation's), the integrity checker's rules (sql/queries/integrity.sql), the bulk writer of
generate_conversations (sql/queries/testing.sql), and rows written straight into the tables for the recall
evaluation and tests (sql/queries/evaluation.sql). The fixtures' statements run on blocking connections (pytest's
fixtures run outside any loop); the evaluation's on the caller's async connection.

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
from memory_agent.db.connector import (
    execute_many,
    execute_query,
    fetch_all,
    fetch_all_sync,
    fetch_one,
    fetch_one_sync,
)
from memory_agent.long_term.embeddings import TURN_TEXT_VERSION

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
    return make_conninfo("", **params)


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


# Rows written straight into the tables (the recall evaluation's direct load, and tests that need stored turns and
# items without running rounds): sql/queries/evaluation.sql, on the caller's connection and transaction.


async def insert_conversation(conn: psycopg.AsyncConnection[Any], conversation: Row, messages: list[Row]) -> None:
    """A conversation with its owner row, and its messages (one statement, pipelined per message)."""
    await execute_query(conn, "eval_insert_conversation", conversation)
    await execute_many(conn, "eval_insert_message", messages)


async def insert_item(conn: psycopg.AsyncConnection[Any], item: Row, sources: list[Row], *, single_valued: bool) -> Any:
    """An item (closing the current value of its key first when `single_valued`) and the turns it came from; its
    id, None when the same content was current already (then nothing is written)."""
    if single_valued:
        await execute_query(conn, "eval_close_item", item)
    row = await fetch_one(conn, "eval_insert_item", item)
    if row is None:
        return None
    for source in sources:
        await execute_query(conn, "eval_insert_item_source", {**source, "item_id": row["item_id"]})
    return row["item_id"]


async def turns_without_vector(conn: psycopg.AsyncConnection[Any], scope: Row, model: str) -> int:
    """How many of the user's stored turns have no vector of `model` made from the current text version."""
    row = await fetch_one(
        conn, "eval_turns_without_vector", {**scope, "model": model, "text_version": TURN_TEXT_VERSION}
    )
    return int(row["missing"]) if row else 0


async def stored_turns(conn: psycopg.AsyncConnection[Any], scope: Row) -> list[Row]:
    """The user's stored turns (conversation_id, sequence_number, content), in order."""
    return await fetch_all(conn, "eval_stored_turns", scope)


async def long_term_volume(conn: psycopg.AsyncConnection[Any], tenant_id: str) -> Row:
    """The tenant's completed summaries, item rows (every version) and cluster summaries."""
    return await fetch_one(conn, "eval_long_term_volume", {"tenant_id": tenant_id}) or {}
