"""KeyQueries: the HTTP layer's own statements (sql/queries/api.sql): API keys, whether a tenant knows a user, and
the inspector's pages; one method per operation, the only code of api/ that runs a statement. The rest of what
the routes read and write goes through the service.

A route works on one connection the key's tenant names (deps.on_pool, inspector.auth.in_tenant), and a key is
created or revoked in its caller's transaction: every operation takes that connection (`conn`) and runs there.
"""

from __future__ import annotations

from typing import Any

import psycopg

from memory_agent.db.connector import fetch_all, fetch_one

Conn = psycopg.AsyncConnection[Any]
Row = dict[str, Any]


class KeyQueries:
    """The HTTP layer's statements, on the connection a route or a key's command holds (no pool of its own: every
    caller already holds the connection its tenant is named on)."""

    # API keys.

    @staticmethod
    async def create_key(conn: Conn, key_hash: bytes, key_prefix: str, tenant_id: str) -> None:
        await fetch_all(
            conn, "create_api_key", {"key_hash": key_hash, "key_prefix": key_prefix, "tenant_id": tenant_id}
        )

    @staticmethod
    async def tenant_of_key(conn: Conn, key_hash: bytes) -> str | None:
        """The tenant of the live key with this hash; None when it is unknown or revoked."""
        row = await fetch_one(conn, "api_key_tenant", {"key_hash": key_hash})
        return row["tenant_id"] if row else None

    @staticmethod
    async def list_keys(conn: Conn, tenant_id: str | None) -> list[Row]:
        return await fetch_all(conn, "list_api_keys", {"tenant_id": tenant_id})

    @staticmethod
    async def live_keys_matching(conn: Conn, key_hash: bytes, key_prefix: str) -> list[Row]:
        """The live keys named by a whole key's hash or a listed prefix, locked until the transaction ends."""
        return await fetch_all(conn, "live_api_keys_matching", {"key_hash": key_hash, "key_prefix": key_prefix})

    @staticmethod
    async def revoke_key(conn: Conn, key_hash: bytes) -> Row:
        rows = await fetch_all(conn, "revoke_api_key", {"key_hash": key_hash})
        return rows[0]

    # Users of a tenant.

    @staticmethod
    async def user_known(conn: Conn, tenant_id: str, user_id: str) -> bool:
        """Whether the tenant holds anything of the user (a conversation, an item, a note, a batch summary)."""
        known = await fetch_one(conn, "tenant_user_known", {"tenant_id": tenant_id, "user_id": user_id})
        return bool(known and known["known"])

    # The inspector's pages.

    @staticmethod
    async def tenant_users(conn: Conn, tenant_id: str, limit: int) -> list[Row]:
        return await fetch_all(conn, "inspect_tenant_users", {"tenant_id": tenant_id, "limit": limit})

    @staticmethod
    async def user_items(conn: Conn, scope: Row, limit: int) -> list[Row]:
        """Every version of the user's items (`scope`: tenant_id, user_id), current first."""
        return await fetch_all(conn, "inspect_user_items", {**scope, "limit": limit})

    @staticmethod
    async def user_conversations(conn: Conn, scope: Row, limit: int) -> list[Row]:
        return await fetch_all(conn, "inspect_user_conversations", {**scope, "limit": limit})

    @staticmethod
    async def user_spend(conn: Conn, scope: Row, limit: int) -> list[Row]:
        return await fetch_all(conn, "inspect_user_spend", {**scope, "limit": limit})
