"""A pooled connection's life around the statements (memory_agent/db/connector.py runs them): its session set up
when the pool makes it, its health checked when the pool hands it out."""

from __future__ import annotations

import select
from typing import Any

import psycopg
from psycopg import sql
from psycopg_pool import AsyncConnectionPool

from memory_agent.db.connector import execute_query

Connection = psycopg.AsyncConnection[Any]


def _has_pending_input(fileno: int) -> bool:
    if hasattr(select, "poll"):
        poller = select.poll()
        poller.register(fileno, select.POLLIN | select.POLLERR | select.POLLHUP)
        return bool(poller.poll(0))
    readable, _, errored = select.select([fileno], [], [fileno], 0)  # pragma: no cover - no poll() on Windows
    return bool(readable or errored)


async def check_pooled_connection(conn: Connection) -> None:
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


async def configure_session(conn: Connection, schema: str, processing_timeout_s: float | None) -> None:
    """A new pooled connection: autocommit, `schema` (then public) on its search path, and the timeout after
    which the views count a `processing` row as stuck (processing_timeout())."""
    await conn.set_autocommit(True)
    await execute_query(conn, sql.SQL("SET search_path TO {}, public").format(sql.Identifier(schema)))
    if processing_timeout_s is not None:
        await execute_query(conn, "session_settings", {"processing_timeout_s": str(processing_timeout_s)})
