"""Naming the tenant for row-level security (optional; see sql/migrations/0008_long_term.sql).

The long-term tables carry policies `tenant_id = current_setting('memory_agent.tenant_id', true)`. They bind
roles that do not own the tables: an application that connects as such a role names its tenant in every
transaction, here, and then cannot read or write another tenant's rows whatever its queries say. The owner role
(the one that ran the migrations) bypasses the policies, so a single-role deployment behaves as before.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import psycopg
from psycopg import pq

from memory_agent.errors import InvalidInputError
from memory_agent.long_term.queries import QUERIES as Q
from memory_agent.schemas.keys import UserKey, validate_identity


async def set_tenant(conn: psycopg.AsyncConnection[Any], tenant: str | UserKey) -> None:
    """SET LOCAL memory_agent.tenant_id for the rest of the open transaction: a key's tenant (checked when the
    key was built), or a tenant id, checked here."""
    tenant_id = tenant.tenant_id if isinstance(tenant, UserKey) else validate_identity(tenant, "tenant_id")
    if conn.info.transaction_status != pq.TransactionStatus.INTRANS:
        # Outside a transaction SET LOCAL lasts one statement: the next one would run with no tenant.
        raise InvalidInputError("set_tenant needs an open transaction (use tenant_transaction)")
    await Q.set_tenant(conn, tenant_id)


@asynccontextmanager
async def tenant_transaction(conn: psycopg.AsyncConnection[Any], tenant: str | UserKey) -> AsyncIterator[None]:
    """A transaction (or savepoint) whose statements row-level security scopes to the tenant (of a key)."""
    async with conn.transaction():
        await set_tenant(conn, tenant)
        yield
