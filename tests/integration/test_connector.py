"""The connector, the one seam to PostgreSQL: the same statements and the same driver-error mapping on a caller's
connection as on a pooled one (long-term code runs on the caller's connection, inside its transaction)."""

from __future__ import annotations

import psycopg
import pytest
from psycopg import sql

from memory_agent import DatabaseUnavailableError, InvalidInputError
from memory_agent.db.connector import Connector, execute_query, fetch_all, fetch_one
from memory_agent.db.pooled import create_pool
from memory_agent.service.backend import MemoryBackend
from tests.conftest import query

# repeat() past 1 GB: PostgreSQL refuses it as past one of its limits (ProgramLimitExceeded).
PAST_A_LIMIT = sql.SQL("SELECT repeat('xx', 1100000000) AS text")


async def test_a_limit_is_invalid_input_on_a_callers_connection_too(database_url):
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        with pytest.raises(InvalidInputError, match="past one of its limits") as raised:
            await fetch_one(conn, PAST_A_LIMIT)
        assert isinstance(raised.value.__cause__, psycopg.errors.ProgramLimitExceeded)
        assert await fetch_one(conn, sql.SQL("SELECT 1 AS one")) == {"one": 1}  # the connection is still usable


async def test_a_lost_server_is_unavailable_on_a_callers_connection_too(database_url):
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        pid = conn.info.backend_pid
        query(database_url, "SELECT pg_terminate_backend(%s)", (pid,))
        with pytest.raises(DatabaseUnavailableError, match="retry the call"):
            await fetch_all(conn, sql.SQL("SELECT 1"))


async def test_rows_are_dicts_and_a_statement_without_rows_has_none(database_url):
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:  # tuple rows
        await execute_query(conn, sql.SQL("SET search_path TO memory_agent, public"))
        assert await fetch_all(conn, "conversation_owner", {"conversation_id": "nobody"}) == []
        assert await fetch_one(conn, "row_security_active") == {"active": False}
        assert await fetch_all(conn, sql.SQL("CREATE TEMP TABLE scratch (n int)")) == []
        assert await execute_query(conn, sql.SQL("INSERT INTO scratch SELECT generate_series(1, 3)")) == 3


async def test_a_connector_maps_the_same_on_its_pool(database_url):
    pool = MemoryBackend.create_pool(database_url)
    await pool.open(wait=True)
    try:
        connector = Connector(pool)
        with pytest.raises(InvalidInputError, match="past one of its limits"):
            await connector.fetch_one(PAST_A_LIMIT)
        assert await connector.fetch_one("row_security_active") == {"active": False}
        with pytest.raises(KeyError, match="no query named 'no_such_query'"):
            await connector.fetch_all("no_such_query")
    finally:
        await pool.close()


async def test_the_session_modes_commit_as_they_say(database_url):
    """One unit of work, three modes: autocommit, a transaction (rolled back whole on an error), and the same in
    pipeline mode; a pipeline without its transaction is refused before any connection is taken."""
    pool = create_pool(database_url, min_size=1, max_size=1)
    await pool.open(wait=True)
    connector = Connector(pool)
    try:
        with pytest.raises(ValueError, match="pass transaction=True too"):
            async with connector.session(pipeline=True):
                pass
        async with connector.session() as conn:
            assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE  # autocommit
            await execute_query(conn, sql.SQL("CREATE TABLE IF NOT EXISTS session_modes (n int)"))
        for pipeline in (False, True):
            with pytest.raises(RuntimeError, match="the caller failed"):
                async with connector.session(transaction=True, pipeline=pipeline) as conn:
                    await execute_query(conn, sql.SQL("INSERT INTO session_modes VALUES (1)"))
                    raise RuntimeError("the caller failed")
            async with connector.session(transaction=True, pipeline=pipeline) as conn:
                await execute_query(conn, sql.SQL("INSERT INTO session_modes VALUES (2)"))
        assert await connector.fetch_all(sql.SQL("SELECT n FROM session_modes")) == [{"n": 2}, {"n": 2}]
    finally:
        await connector.execute_query(sql.SQL("DROP TABLE IF EXISTS session_modes"))
        await pool.close()
