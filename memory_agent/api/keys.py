"""API keys: one tenant each, stored as their SHA-256 only; the key itself is shown once, when created.

A key is `mak_` and 32 random bytes (URL-safe base64), so a plain hash is enough to store it: there is nothing
to guess from the hash, and a request finds its key's row by the hash in one index lookup.
"""

from __future__ import annotations

import hashlib
import secrets
from typing import Any

import psycopg

from memory_agent.conversation.messages import validate_identity
from memory_agent.long_term.scope import fetch
from memory_agent.long_term.tenancy import tenant_transaction

KEY_PREFIX = "mak_"
MAX_KEY_CHARS = 128  # far above a real key: anything longer is refused before it is hashed


def key_hash(key: str) -> bytes:
    return hashlib.sha256(key.encode("utf-8")).digest()


async def create_api_key(conn: psycopg.AsyncConnection[Any], tenant_id: str) -> str:
    """A new key of `tenant_id`, stored hashed in the caller's transaction; the only time the key is seen."""
    validate_identity(tenant_id, "tenant_id")
    key = KEY_PREFIX + secrets.token_urlsafe(32)
    # Named for row-level security: a role bound by the policies writes the keys of the tenant it names only.
    async with tenant_transaction(conn, tenant_id):
        await fetch(
            conn,
            "create_api_key",
            {"key_hash": key_hash(key), "key_prefix": key[: len(KEY_PREFIX) + 6], "tenant_id": tenant_id},
        )
    return key


async def tenant_of_key(conn: psycopg.AsyncConnection[Any], key: str) -> str | None:
    """The tenant of a key that is not revoked; None for anything else (unknown, revoked, malformed)."""
    if not key.startswith(KEY_PREFIX) or len(key) > MAX_KEY_CHARS:
        return None
    rows = await fetch(conn, "api_key_tenant", {"key_hash": key_hash(key)})
    return rows[0]["tenant_id"] if rows else None
