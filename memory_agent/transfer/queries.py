"""TransferQueries: the statements of a user's document (sql/queries/user_document.sql), one method per operation;
the only code of transfer/ that runs one (through db/connector.py). Each runs on the caller's connection, inside
the one transaction an export reads in or an import writes in.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import psycopg

from memory_agent.db.connector import execute_many, execute_query, fetch_all, fetch_one

if TYPE_CHECKING:
    from memory_agent.db.connector import Connector

Conn = psycopg.AsyncConnection[Any]
Row = dict[str, Any]
P = Mapping[str, Any]

# A document's sections in the order they are written back (what a record names comes first), each with the
# statement that reads it.
SECTIONS = (
    ("conversations", "export_conversations"),
    ("messages", "export_messages"),
    ("memory_versions", "export_memory"),
    ("items", "export_items"),
    ("item_sources", "export_item_sources"),
    ("consolidation_notes", "export_notes"),
    ("batch_summaries", "export_batch_summaries"),
    ("consolidation_schedules", "export_schedules"),
)


class TransferQueries:
    """The statements of reading and writing a user's document, over one connector."""

    def __init__(self, connector: Connector | None = None) -> None:
        self.connector = connector

    # -- export (document.py)

    async def snapshot_reads(self, conn: Conn) -> None:
        await execute_query(conn, "snapshot_reads")

    async def export_section(self, conn: Conn, statement: str, who: P) -> list[Row]:
        """The rows of one of SECTIONS (`statement`: its statement there)."""
        return await fetch_all(conn, statement, who)

    # -- import (load.py, ids.py)

    async def lock_forget(self, conn: Conn, who: P) -> None:
        await fetch_one(conn, "lock_forget", who)

    async def tenant_user_known(self, conn: Conn, who: P) -> bool:
        row = await fetch_one(conn, "tenant_user_known", who)
        return bool(row and row["known"])

    async def new_id(self, conn: Conn, table: str, column: str) -> int:
        row = await fetch_one(conn, "new_ids", {"table": table, "column": column, "count": 1})
        assert row is not None
        return int(row["id"])

    async def import_owner(self, conn: Conn, p: P) -> Row | None:
        return await fetch_one(conn, "import_owner", p)

    async def import_conversation(self, conn: Conn, p: P) -> None:
        await fetch_one(conn, "import_conversation", p)

    async def import_messages(self, conn: Conn, rows: Iterable[P]) -> None:
        await execute_many(conn, "import_message", rows)

    async def import_next_sequence(self, conn: Conn, p: P) -> None:
        await fetch_all(conn, "import_next_sequence", p)

    async def import_memory(self, conn: Conn, p: P) -> Row | None:
        return await fetch_one(conn, "import_memory", p)

    async def import_item(self, conn: Conn, p: P) -> Row | None:
        return await fetch_one(conn, "import_item", p)

    async def import_item_members(self, conn: Conn, p: P) -> None:
        await fetch_all(conn, "import_item_members", p)

    async def import_item_source(self, conn: Conn, p: P) -> None:
        await fetch_all(conn, "import_item_source", p)

    async def import_note(self, conn: Conn, p: P) -> Row | None:
        return await fetch_one(conn, "import_note", p)

    async def import_batch_summary(self, conn: Conn, p: P) -> None:
        await fetch_all(conn, "import_batch_summary", p)

    async def import_schedule(self, conn: Conn, p: P) -> None:
        await fetch_all(conn, "import_schedule", p)


# The statements on a caller's connection need no connector: the functions of this package share this one.
QUERIES = TransferQueries()
