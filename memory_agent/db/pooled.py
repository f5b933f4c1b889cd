"""The pool and a pooled connection's life around the statements (memory_agent/db/connector.py runs them): its
session set up when the pool makes it (connector.configure_session), its health checked when the pool hands it out."""

from __future__ import annotations

import select
from typing import Any

import psycopg
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

from memory_agent.db.connector import configure_session

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


def create_pool(
    conninfo: str,
    schema: str = "memory_agent",
    *,
    min_size: int = 1,
    max_size: int = 10,
    timeout: float = 5.0,
    name: str = "memory_agent",
    processing_timeout_s: float | None = None,
) -> AsyncConnectionPool:
    """A closed pool whose connections are autocommit and see only `schema` (then public); with
    `processing_timeout_s`, the views count a `processing` row as stuck after it (processing_timeout())."""

    async def configure(conn: Connection) -> None:
        await configure_session(conn, schema, processing_timeout_s)

    return AsyncConnectionPool(
        conninfo,
        min_size=min_size,
        max_size=max_size,
        timeout=timeout,
        open=False,
        configure=configure,
        kwargs={"row_factory": dict_row},
        name=name,
        # A pooled connection whose server went away is replaced instead of handed out.
        check=check_pooled_connection,
    )
