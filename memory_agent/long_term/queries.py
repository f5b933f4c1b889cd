"""LongTermQueries: the statements of the long-term tier (items, clusters, vectors, recall, the store, forgetting,
the cost ledger), one method per operation; the only code of long_term/ that runs one (through db/connector.py).

A method runs on the caller's connection `conn`, inside its transaction: a summary job writes a memory version
and its items together, a forget erases in one transaction. Parameters are the named queries' (sql/queries/
long_term.sql, forget.sql, store.sql, recall.sql, guards.sql); `who` is a user's (tenant_id, user_id). The
connector (the service's backend) runs what needs no caller's transaction: the check at open.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg import sql

from memory_agent.db.connector import execute_many, execute_query, fetch_all, fetch_one

if TYPE_CHECKING:
    from memory_agent.db.connector import Connector

Conn = psycopg.AsyncConnection[Any]
Row = dict[str, Any]
P = Mapping[str, Any]


class LongTermQueries:
    """The long-term tier's statements over one connector."""

    def __init__(self, connector: Connector | None = None) -> None:
        self.connector = connector

    # -- tenancy, recall, the check at open

    async def set_tenant(self, conn: Conn, tenant_id: str) -> None:
        await execute_query(conn, "set_tenant", {"tenant_id": tenant_id})

    async def check_text_search_config(self, config: str) -> None:
        if self.connector is None:
            raise RuntimeError("LongTermQueries needs a connector to check the server's text search configurations")
        await self.connector.fetch_one("check_text_search_config", {"config": config})

    async def recall_rows(
        self, conn: Conn, settings: P, statement: str | sql.Composed, p: P, prepare: bool
    ) -> list[Row]:
        """One of recall's statements after recall's settings for the transaction (in the caller's pipeline)."""
        await execute_query(conn, "recall_settings", settings)
        return await fetch_all(conn, statement, p, prepare=prepare)

    async def recall_source_turns(self, conn: Conn, p: P) -> list[Row]:
        return await fetch_all(conn, "recall_source_turns", p)

    # -- items (writer.py, reads.py, the store)

    async def lock_item_slot(self, conn: Conn, p: P) -> None:
        await fetch_all(conn, "lock_item_slot", p)

    async def lock_current_item(self, conn: Conn, p: P) -> Row | None:
        return await fetch_one(conn, "lock_current_item", p)

    async def restate_item(self, conn: Conn, p: P) -> None:
        await fetch_all(conn, "restate_item", p)

    async def close_item(self, conn: Conn, p: P) -> None:
        await fetch_all(conn, "close_item", p)

    async def insert_item(self, conn: Conn, p: P) -> Row | None:
        return await fetch_one(conn, "insert_item", p)

    async def close_key(self, conn: Conn, p: P) -> list[Row]:
        return await fetch_all(conn, "close_key", p)

    async def add_item_sources(self, conn: Conn, p: P) -> None:
        await fetch_all(conn, "add_item_sources", p)

    async def list_items(self, conn: Conn, p: P) -> list[Row]:
        return await fetch_all(conn, "list_items", p)

    async def item_history(self, conn: Conn, p: P) -> list[Row]:
        return await fetch_all(conn, "item_history", p)

    async def delete_items(self, conn: Conn, who: P, item_ids: list[int]) -> list[Row]:
        return await fetch_all(conn, "delete_items", {**who, "item_ids": item_ids})

    # -- cluster summaries (clusters.py)

    async def lock_cluster_summary(self, conn: Conn, p: P) -> Row | None:
        return await fetch_one(conn, "lock_cluster_summary", p)

    async def cluster_members(self, conn: Conn, p: P) -> list[Row]:
        return await fetch_all(conn, "cluster_members", p)

    async def set_cluster_weight(self, conn: Conn, p: P) -> None:
        await fetch_all(conn, "set_cluster_weight", p)

    async def insert_cluster_summary(self, conn: Conn, p: P) -> Row | None:
        return await fetch_one(conn, "insert_cluster_summary", p)

    async def update_cluster_summary(self, conn: Conn, p: P) -> None:
        await fetch_all(conn, "update_cluster_summary", p)

    async def pending_clusters(self, conn: Conn, p: P) -> list[Row]:
        return await fetch_all(conn, "pending_clusters", p)

    # -- vectors (embeddings.py)

    async def vectors_available(self, conn: Conn) -> bool:
        row = await fetch_one(conn, "vectors_available")
        return bool(row and row["available"])

    async def vector_center(self, conn: Conn, model: str) -> Row | None:
        return await fetch_one(conn, "vector_center", {"model": model})

    async def save_vector_center(self, conn: Conn, model: str, center: str) -> None:
        await execute_query(conn, "save_vector_center", {"model": model, "center": center})

    async def fill_bits(self, conn: Conn, p: P) -> None:
        """The compact copies of the user's vectors stored before they existed (items, then turns)."""
        for fill in ("fill_item_bits", "fill_turn_bits"):
            await execute_query(conn, fill, p)

    async def items_to_embed(self, conn: Conn, p: P) -> list[Row]:
        return await fetch_all(conn, "items_to_embed", p)

    async def turns_to_embed(self, conn: Conn, p: P) -> list[Row]:
        return await fetch_all(conn, "turns_to_embed", p)

    async def save_item_embeddings(self, conn: Conn, rows: Iterable[P]) -> int:
        return await execute_many(conn, "save_item_embedding", rows)

    async def save_turn_embeddings(self, conn: Conn, rows: Iterable[P]) -> int:
        return await execute_many(conn, "save_turn_embedding", rows)

    async def users_to_embed(self, conn: Conn, model: str, limit: int, text_version: int) -> list[Row]:
        return await fetch_all(conn, "users_to_embed", {"model": model, "limit": limit, "text_version": text_version})

    async def delete_item_embedding(self, conn: Conn, p: P) -> None:
        await execute_query(conn, "delete_item_embedding", p)

    # -- the store (store_rows.py, store_recall.py)

    async def store_get(self, conn: Conn, p: P) -> Row | None:
        return await fetch_one(conn, "store_get", p)

    async def store_lock_current(self, conn: Conn, p: P) -> Row | None:
        return await fetch_one(conn, "store_lock_current", p)

    async def store_touch(self, conn: Conn, p: P) -> None:
        await fetch_all(conn, "store_touch", p)

    async def store_insert(self, conn: Conn, p: P) -> None:
        await fetch_all(conn, "store_insert", p)

    async def store_derived_item(self, conn: Conn, p: P) -> Row | None:
        return await fetch_one(conn, "store_derived_item", p)

    async def store_versions(self, conn: Conn, p: P) -> list[Row]:
        return await fetch_all(conn, "store_versions", p)

    async def store_search(self, conn: Conn, p: P) -> list[Row]:
        return await fetch_all(conn, "store_search", p)

    async def store_namespaces(self, conn: Conn, who: P) -> list[Row]:
        return await fetch_all(conn, "store_namespaces", who)

    async def store_rows_by_id(self, conn: Conn, p: P) -> list[Row]:
        return await fetch_all(conn, "store_rows_by_id", p)

    # -- lineage: the guard of every writer of a derived row (lineage.py)

    async def share_forget_lock(self, conn: Conn, who: P) -> None:
        await fetch_one(conn, "share_forget_lock", who)

    async def try_share_forget_lock(self, conn: Conn, who: P) -> bool:
        row = await fetch_one(conn, "try_share_forget_lock", who)
        return bool(row and row["held"])

    async def sources_present(self, conn: Conn, p: P) -> bool:
        row = await fetch_one(conn, "sources_present", p)
        return bool(row and row["present"])

    async def user_present(self, conn: Conn, who: P) -> bool:
        row = await fetch_one(conn, "user_present", who)
        return bool(row and row["present"])

    # -- forgetting (forget.py)

    async def lock_user_conversations(self, conn: Conn, who: P, conversation_id: str | None) -> None:
        await fetch_all(conn, "lock_user_conversations", {**who, "conversation_id": conversation_id})

    async def lock_forget(self, conn: Conn, who: P) -> None:
        await fetch_all(conn, "lock_forget", who)

    async def delete_user_items(self, conn: Conn, who: P) -> list[Row]:
        return await fetch_all(conn, "delete_user_items", who)

    async def delete_user_consolidation(self, conn: Conn, who: P) -> list[Row]:
        return await fetch_all(conn, "delete_user_consolidation", who)

    async def erase_user_conversations(self, conn: Conn, who: P) -> list[Row]:
        return await fetch_all(conn, "erase_user_conversations", who)

    async def erase_user_traces(self, conn: Conn, who: P) -> None:
        await fetch_all(conn, "erase_user_traces", who)

    async def pseudonymise_user_ledger(self, conn: Conn, who: P) -> None:
        await fetch_all(conn, "pseudonymise_user_ledger", who)

    async def erase_conversation_rows(self, conn: Conn, who: P, conversation_id: str) -> list[Row]:
        return await fetch_all(conn, "erase_conversation_rows", {**who, "conversation_id": conversation_id})

    async def erase_conversation_traces(self, conn: Conn, who: P, conversation_id: str) -> None:
        await fetch_all(conn, "erase_conversation_traces", {**who, "conversation_id": conversation_id})

    async def erase_conversation_sources(self, conn: Conn, who: P, conversation_id: str) -> list[Row]:
        return await fetch_all(conn, "erase_conversation_sources", {**who, "conversation_id": conversation_id})

    async def delete_unsourced_items(self, conn: Conn, who: P, item_ids: list[int]) -> list[Row]:
        return await fetch_all(conn, "delete_unsourced_items", {**who, "item_ids": item_ids})

    async def summaries_over(self, conn: Conn, who: P, item_ids: list[int]) -> list[Row]:
        return await fetch_all(conn, "summaries_over", {**who, "item_ids": item_ids})

    async def drop_derived(self, conn: Conn, p: P) -> list[Row]:
        return await fetch_all(conn, "drop_derived", p)

    async def procrastinate_installed(self, conn: Conn) -> bool:
        row = await fetch_one(conn, "procrastinate_installed", {})
        return bool(row and row["installed"])

    async def user_memory_ids(self, conn: Conn, who: P, conversation_id: str | None) -> list[Row]:
        return await fetch_all(conn, "user_memory_ids", {**who, "conversation_id": conversation_id})

    async def erase_user_jobs(self, conn: Conn, p: P) -> None:
        await fetch_all(conn, "erase_user_jobs", p)

    async def clear_recalled_blocks(self, conn: Conn, who: P, item_ids: list[int]) -> None:
        await fetch_all(conn, "clear_recalled_blocks", {**who, "item_ids": item_ids})

    async def user_threads(self, conn: Conn, who: P) -> list[Row]:
        return await fetch_all(conn, "user_threads", who)

    async def release_thread(self, conn: Conn, who: P, conversation_id: str) -> bool:
        row = await fetch_one(conn, "release_thread", {**who, "conversation_id": conversation_id})
        return bool(row and row["released"])

    # -- the cost ledger (ledger.py)

    async def record_llm_calls(self, conn: Conn, p: P) -> None:
        await execute_query(conn, "record_llm_calls", p)

    async def settle_budget(self, conn: Conn, p: P) -> None:
        await execute_query(conn, "settle_budget", p)

    async def reserve_budget(self, conn: Conn, p: P) -> Row | None:
        return await fetch_one(conn, "reserve_budget", p)

    async def release_budget(self, conn: Conn, p: P) -> None:
        await execute_query(conn, "release_budget", p)

    async def tenant_month_spend(self, conn: Conn, tenant_id: str, now: Any) -> Row | None:
        return await fetch_one(conn, "tenant_month_spend", {"tenant_id": tenant_id, "now": now})


# The statements on a caller's connection need no connector: the functions of this package share this one.
QUERIES = LongTermQueries()
