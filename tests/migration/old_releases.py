"""Databases as earlier releases left them: their migration files applied one by one the way their setup() did
(schema_migrations without a checksum), then rows written in their schema."""

from __future__ import annotations

import json
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from memory_agent.db.migrate import load_migrations

# Released before checksums: 0001-0003 (observability) and 0001-0005 (message ids, round leases).
RELEASES = {"0.3": 3, "0.5": 5}


def build_release(url: str, up_to: int, schema: str = "memory_agent") -> None:
    """Apply migrations 0001..`up_to` as the releases did: one transaction, schema_migrations(version, name)."""
    with psycopg.connect(url) as conn:
        conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
        conn.execute(f'SET LOCAL search_path TO "{schema}", public')
        conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations ("
            " version INTEGER PRIMARY KEY, name TEXT NOT NULL,"
            " applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"
        )
        for migration in load_migrations():
            if migration.version > up_to:
                break
            conn.execute(migration.text.encode())
            conn.execute(
                "INSERT INTO schema_migrations (version, name) VALUES (%s, %s)", [migration.version, migration.name]
            )


def _message(role: str, text: str, conversation_id: str, n: int) -> dict[str, Any]:
    kind = {"user": "human", "assistant": "ai"}[role]
    return {"type": kind, "data": {"content": text, "type": kind, "id": f"{conversation_id}-{n}"}}


def write_old_rows(url: str, conversations: dict[str, int], schema: str = "memory_agent") -> None:
    """For each conversation: `rounds` user/assistant rounds, a chain of completed memory versions (each based on
    the previous) plus a failed one, and a round_metrics row per round; and a failed first round of a thread
    that has no conversation row. Only columns every release has."""
    with psycopg.connect(url) as conn:
        conn.execute(f'SET LOCAL search_path TO "{schema}", public')
        for conversation_id, rounds in conversations.items():
            conn.execute(
                "INSERT INTO conversations (conversation_id, next_sequence, round_count) VALUES (%s, %s, %s)",
                [conversation_id, rounds * 2, rounds],
            )
            for r in range(1, rounds + 1):
                for offset, role in enumerate(("user", "assistant")):
                    seq = (r - 1) * 2 + offset
                    text = f"{role} {r} of {conversation_id}: {'ü' * r}"
                    conn.execute(
                        "INSERT INTO messages (conversation_id, sequence_number, round_number, role, content, message)"
                        " VALUES (%s, %s, %s, %s, %s, %s)",
                        [conversation_id, seq, r, role, text, Jsonb(_message(role, text, conversation_id, seq))],
                    )
                conn.execute(
                    "INSERT INTO round_metrics (conversation_id, round_number, first_sequence, last_sequence,"
                    " gap_size, context_messages, retrieval_path, truncation)"
                    " VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
                    [
                        conversation_id,
                        r,
                        (r - 1) * 2,
                        (r - 1) * 2 + 1,
                        r,
                        r + 1,
                        "raw" if r < 3 else "memory+gap",
                        Jsonb({"round": r}) if r == 2 else None,
                    ],
                )
            base = None
            for end in range(3, rounds * 2 - 2, 4):
                row = conn.execute(
                    "INSERT INTO memory (conversation_id, memory_text, start_sequence, end_sequence, base_memory_id,"
                    " status, model_name, input_tokens, output_tokens, attempts, finished_at)"
                    " VALUES (%s, %s, %s, %s, %s, 'completed', 'old-model', 100, 10, 1, now()) RETURNING memory_id",
                    [conversation_id, f"summary of {conversation_id} to {end}", max(0, end - 13), end, base],
                ).fetchone()
                assert row is not None
                base = row[0]
            conn.execute(
                "INSERT INTO memory (conversation_id, memory_text, start_sequence, end_sequence, base_memory_id,"
                " status, error, attempts, finished_at)"
                " VALUES (%s, '', 0, %s, %s, 'failed', 'Timeout: old failure', 3, now())",
                [conversation_id, rounds * 2 - 1, base],
            )
        conn.execute(
            "INSERT INTO round_metrics (conversation_id, retrieval_path, error_stage, error)"
            " VALUES ('never-stored', 'raw', 'graph', 'RuntimeError: boom')"
        )


SNAPSHOTS = {
    "conversations": "SELECT conversation_id, next_sequence, round_count, created_at, updated_at FROM conversations"
    " ORDER BY conversation_id",
    "messages": "SELECT conversation_id, sequence_number, round_number, role, content, message, created_at"
    " FROM messages ORDER BY conversation_id, sequence_number",
    "memory": "SELECT memory_id, conversation_id, memory_text, start_sequence, end_sequence, base_memory_id, status,"
    " created_at, error, model_name, input_tokens, output_tokens, attempts, finished_at FROM memory ORDER BY memory_id",
    "round_metrics": "SELECT id, conversation_id, round_number, first_sequence, last_sequence, gap_size,"
    " context_messages, retrieval_path, truncation, error_stage, error, created_at FROM round_metrics ORDER BY id",
}


def snapshot(url: str, schema: str = "memory_agent") -> dict[str, list[tuple[Any, ...]]]:
    """Every row of the released tables, in the released columns."""
    with psycopg.connect(url) as conn:
        conn.execute(f'SET search_path TO "{schema}", public')
        return {table: conn.execute(sql).fetchall() for table, sql in SNAPSHOTS.items()}


def keys(url: str, table: str, schema: str = "memory_agent") -> set[tuple[str, str, str]]:
    """(conversation_id, tenant_id, user_id) of every row of `table`."""
    with psycopg.connect(url) as conn:
        conn.execute(f'SET search_path TO "{schema}", public')
        return set(conn.execute(f"SELECT DISTINCT conversation_id, tenant_id, user_id FROM {table}").fetchall())


def dumps(value: Any) -> str:
    return json.dumps(value, default=str, sort_keys=True)
