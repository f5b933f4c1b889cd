"""API keys: one tenant each, stored as their SHA-256 only; the key itself is shown once, when created.

A key is `mak_` and 32 random bytes (URL-safe base64), so a plain hash is enough to store it: there is nothing
to guess from the hash, and a request finds its key's row by the hash in one index lookup.
"""

from __future__ import annotations

import hashlib
import secrets
from typing import Any

import psycopg

from memory_agent.api.queries import KeyQueries
from memory_agent.conversation.identity import validate_identity
from memory_agent.errors import InvalidInputError
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
        await KeyQueries.create_key(conn, key_hash(key), key[: len(KEY_PREFIX) + 6], tenant_id)
    return key


async def tenant_of_key(conn: psycopg.AsyncConnection[Any], key: str) -> str | None:
    """The tenant of a key that is not revoked; None for anything else (unknown, revoked, malformed)."""
    if not key.startswith(KEY_PREFIX) or len(key) > MAX_KEY_CHARS:
        return None
    return await KeyQueries.tenant_of_key(conn, key_hash(key))


async def list_api_keys(conn: psycopg.AsyncConnection[Any], tenant_id: str | None = None) -> list[dict[str, Any]]:
    """Every key of `tenant_id` (None: of every tenant) as its prefix, tenant, created_at and revoked_at."""
    return await KeyQueries.list_keys(conn, tenant_id)


async def revoke_api_key(conn: psycopg.AsyncConnection[Any], key_or_prefix: str) -> dict[str, Any]:
    """Revoke the one live key named by the whole key or by the prefix a listing shows, in the caller's
    transaction (the key's row stays locked until it commits); InvalidInputError when none or several match."""
    named = key_or_prefix.strip()
    if not named.startswith(KEY_PREFIX) or len(named) > MAX_KEY_CHARS:
        raise InvalidInputError(
            f"name a key by its prefix (as `memory-agent api-key list` shows it) or whole key, got {named!r}"
        )
    matching = await KeyQueries.live_keys_matching(conn, key_hash(named), named)
    if len(matching) != 1:
        what = "no live key" if not matching else f"{len(matching)} live keys"
        raise InvalidInputError(f"{what} named {named!r}: nothing revoked (give the whole key when a prefix is shared)")
    return await KeyQueries.revoke_key(conn, matching[0]["key_hash"])
