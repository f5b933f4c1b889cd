"""NamedQueries: the plumbing every database class shares — the pool, transactions, driver errors mapped to
ours, and running a named query of sql/ (the only way statements reach PostgreSQL)."""

from __future__ import annotations

import logging
import select
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from typing import Any, cast

import psycopg
from psycopg_pool import AsyncConnectionPool

from memory_agent import resources
from memory_agent.db.tenancy import current_tenant
from memory_agent.errors import (
    DatabaseUnavailableError,
)

logger = logging.getLogger("memory_agent.backend")

Row = dict[str, Any]


def _has_pending_input(fileno: int) -> bool:
    if hasattr(select, "poll"):
        poller = select.poll()
        poller.register(fileno, select.POLLIN | select.POLLERR | select.POLLHUP)
        return bool(poller.poll(0))
    readable, _, errored = select.select([fileno], [], [fileno], 0)  # pragma: no cover - no poll() on Windows
    return bool(readable or errored)


async def check_pooled_connection(conn: psycopg.AsyncConnection[Any]) -> None:
    """The pool's check on every checkout, without a round trip when the connection looks healthy.

    An idle autocommit connection has nothing to read: pending input means the server sent an error
    (a terminated backend) or closed the socket (a stopped server), and only then does the full check
    (one empty query) run and, failing, make the pool replace the connection. Checking every checkout
    with a round trip cost one extra trip per statement group on the round path.
    """
    try:
        suspicious = conn.closed or _has_pending_input(conn.fileno())
    except (OSError, ValueError, psycopg.Error):
        suspicious = True
    if suspicious:
        await AsyncConnectionPool.check_connection(conn)


class NamedQueries:
    """A pool on the memory_agent schema and its named queries."""

    def __init__(self, pool: AsyncConnectionPool, schema: str = "memory_agent") -> None:
        self.pool = pool
        self.schema = schema
        self._queries = resources.queries()
        # Whether the connected role is bound by row-level security (detect_row_security, at open): then every
        # connection handed out names the tenant of the running work (db/tenancy.py).
        self.row_security = False

    async def detect_row_security(self) -> bool:
        """Whether the policies bind the connected role (it does not own the tables and may not bypass them)."""
        async with self.pool.connection() as conn:
            cur = await conn.execute(self._queries["row_security_active"])
            row = await cur.fetchone()
        self.row_security = bool(row and cast(Row, row)["active"])
        if self.row_security:
            logger.info("Row-level security binds this role: every connection names its tenant")
        return self.row_security

    # ------------------------------------------------------------------ plumbing

    @asynccontextmanager
    async def connection(self) -> AsyncIterator[psycopg.AsyncConnection[Row]]:
        try:
            async with self.pool.connection() as conn:
                if self.row_security:
                    # For the session (a pooled connection has no transaction open): each checkout names it again,
                    # so a connection never keeps the tenant of its previous user.
                    await conn.execute(self._queries["name_tenant"], {"tenant_id": current_tenant() or ""})
                yield cast(psycopg.AsyncConnection[Row], conn)  # the pool's row_factory is dict_row
        except psycopg.OperationalError as exc:
            raise DatabaseUnavailableError(
                f"PostgreSQL is unavailable ({type(exc).__name__}: {exc}); nothing was written, retry the call"
            ) from exc

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[psycopg.AsyncConnection[Row]]:
        """One write transaction; everything inside commits together or not at all."""
        async with self.connection() as conn, conn.transaction():
            yield conn

    @asynccontextmanager
    async def round_transaction(self) -> AsyncIterator[psycopg.AsyncConnection[Row]]:
        """`transaction()` in pipeline mode, for the round path: BEGIN travels with the first statement, COMMIT
        with the statements whose results are not read before it, so a transaction whose result is read once
        takes two round trips. (psycopg's transaction() in a pipeline syncs when it opens and twice when it
        closes: five round trips for two statements, traced.) Only single statements inside (no
        multi-statement strings), and no transaction() inside: it would sync. A failure anywhere inside —
        a statement's error or the caller's — rolls the whole transaction back."""
        async with self.connection() as conn:
            try:
                async with conn.pipeline():
                    await conn.execute("BEGIN")
                    yield conn
                    await conn.execute("COMMIT")
            except BaseException:
                if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
                    with suppress(psycopg.Error):  # a broken connection: the pool discards it
                        await conn.execute("ROLLBACK")
                raise

    async def _fetch_all(
        self, name: str, params: dict[str, Any], conn: psycopg.AsyncConnection[Row] | None = None
    ) -> list[Row]:
        if conn is not None:
            cur = await conn.execute(self._queries[name], params)
            return await cur.fetchall()
        async with self.connection() as own:
            cur = await own.execute(self._queries[name], params)
            return await cur.fetchall()

    async def _fetch_one(
        self, name: str, params: dict[str, Any], conn: psycopg.AsyncConnection[Row] | None = None
    ) -> Row | None:
        rows = await self._fetch_all(name, params, conn)
        return rows[0] if rows else None
