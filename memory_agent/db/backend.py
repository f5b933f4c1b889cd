"""MemoryBackend: the only module that talks to PostgreSQL.

Every statement is a named query from sql/queries.sql; schema migrations are applied by memory_agent.db.migrate.
Every method on a conversation's rows takes its key as keyword arguments: `user_id` (the distribution column),
and `tenant_id` where rows are created (memory_agent.db.keys has the per-conversation default).
Connections come from one psycopg AsyncConnectionPool in autocommit mode, with search_path set to the
memory_agent schema, so a read is one round trip and a write transaction is explicit (`transaction()`).
"""

from __future__ import annotations

import logging
import select
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any, cast

import psycopg
from psycopg import sql
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool

from memory_agent import resources
from memory_agent.db.migrate import MigrationReport, Migrator
from memory_agent.errors import (
    ConfigurationError,
    ConversationOwnerError,
    DatabaseUnavailableError,
    MemoryAgentError,
)
from memory_agent.schemas import MemoryRecord, RoundSaved

logger = logging.getLogger("memory_agent.backend")

Row = dict[str, Any]

# The tables memory_agent creates in its schema (a schema without `schema_migrations` holding one of these is not ours).
OWN_TABLES = ("conversations", "messages", "memory", "round_metrics")


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


class MemoryBackend:
    """PostgreSQL operations on conversations, messages and the memory version chain."""

    def __init__(self, pool: AsyncConnectionPool, schema: str = "memory_agent") -> None:
        self.pool = pool
        self.schema = schema
        self._queries = resources.queries()

    @classmethod
    def create_pool(
        cls,
        conninfo: str,
        schema: str = "memory_agent",
        *,
        min_size: int = 1,
        max_size: int = 10,
        timeout: float = 5.0,
        name: str = "memory_agent",
    ) -> AsyncConnectionPool:
        """A closed pool whose connections are autocommit and see only `schema` (then public)."""
        search_path = sql.SQL("SET search_path TO {}, public").format(sql.Identifier(schema))

        async def configure(conn: psycopg.AsyncConnection) -> None:
            await conn.set_autocommit(True)
            await conn.execute(search_path)

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

    # ------------------------------------------------------------------ plumbing

    @asynccontextmanager
    async def connection(self) -> AsyncIterator[psycopg.AsyncConnection[Row]]:
        try:
            async with self.pool.connection() as conn:
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
        """`transaction()` in pipeline mode, for the round path: BEGIN travels with the first statement and a
        statement whose result is not read travels with COMMIT (two round trips fewer). Only single
        statements inside (no multi-statement strings)."""
        async with self.connection() as conn, conn.pipeline(), conn.transaction():
            yield conn

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

    # ------------------------------------------------------------------ schema

    async def check_schema_is_ours(self) -> None:
        """ConfigurationError when the schema holds tables with our names that memory_agent did not create
        (an app's own `public.messages`, say): migrating there would fail or mix the two."""
        row = await self._fetch_one("schema_clash", {"schema": self.schema, "tables": list(OWN_TABLES)})
        if row and row["foreign_tables"]:
            names = ", ".join(f"{self.schema}.{name}" for name in row["foreign_tables"])
            raise ConfigurationError(
                f"schema {self.schema!r} already holds {names}, which memory_agent did not create; set "
                "MEMORY_AGENT_DB_SCHEMA to a schema of memory_agent's own (default memory_agent)"
            )

    async def migrate(self, *, apply: bool = True, procrastinate: bool = False) -> MigrationReport:
        """Apply pending migrations (apply=False: ConfigurationError unless the schema is up to date); safe when
        several processes call it at once. With `procrastinate`, procrastinate's schema too."""
        async with self.connection() as conn:
            migrator = Migrator(conn, self.schema)
            report = await migrator.migrate(apply=apply)
            if procrastinate:
                report.procrastinate = await migrator.migrate_procrastinate(apply=apply)
        return report

    async def setup(self, *, apply: bool = True) -> list[int]:
        """Apply pending migrations; returns the versions applied."""
        return (await self.migrate(apply=apply)).versions

    async def setup_procrastinate(self, *, apply: bool = True) -> list[str]:
        """Create or upgrade procrastinate's tables in our schema; returns what was applied."""
        async with self.connection() as conn:
            return await Migrator(conn, self.schema).migrate_procrastinate(apply=apply)

    # ------------------------------------------------------------------ round path

    async def load_context(
        self, conversation_id: str, message_ids: Sequence[str] = (), max_gap: int = 2**31 - 1, *, user_id: str
    ) -> list[Row]:
        """Latest completed memory + the messages after it (at most the conversation's last `max_gap`), and
        which of `message_ids` are stored, in one statement (at least one row)."""
        return await self._fetch_all(
            "load_context",
            {
                "user_id": user_id,
                "conversation_id": conversation_id,
                "message_ids": list(message_ids),
                "max_gap": max_gap,
            },
        )

    async def acquire_round_lease(
        self, conversation_id: str, holder: str, lease_s: float, *, tenant_id: str, user_id: str
    ) -> bool:
        """Claim the conversation for (tenant_id, user_id) and take its lease; False while another round holds
        it. InvalidInputError when the conversation belongs to another tenant or user (nothing written)."""
        params = {
            "conversation_id": conversation_id,
            "holder": holder,
            "lease_s": lease_s,
            "tenant_id": tenant_id,
            "user_id": user_id,
        }
        row = await self._fetch_one("acquire_round_lease", params)
        assert row is not None
        owner = (row["owner_tenant_id"], row["owner_user_id"])
        if row["owner_user_id"] is None:
            # Another process claimed the thread after this statement's snapshot: its row is committed now.
            found = await self._fetch_one("conversation_owner", {"conversation_id": conversation_id})
            assert found is not None
            owner = (found["tenant_id"], found["user_id"])
            if owner == (tenant_id, user_id):
                row = await self._fetch_one("acquire_round_lease", params)
                assert row is not None
        if owner != (tenant_id, user_id):
            raise ConversationOwnerError(
                f"conversation {conversation_id!r} belongs to another user or tenant; a round for user "
                f"{user_id!r} (tenant {tenant_id!r}) cannot continue it: use a new thread id"
            )
        return row["holder"] is not None

    async def conversation_owner(self, conversation_id: str) -> tuple[str, str] | None:
        """(tenant_id, user_id) of the conversation, None when no round of it has started."""
        row = await self._fetch_one("conversation_owner", {"conversation_id": conversation_id})
        return (row["tenant_id"], row["user_id"]) if row else None

    async def release_round_lease(
        self,
        conversation_id: str,
        holder: str,
        conn: psycopg.AsyncConnection[Row] | None = None,
        *,
        user_id: str,
    ) -> None:
        params = {"user_id": user_id, "conversation_id": conversation_id, "holder": holder}
        if conn is not None:
            await conn.execute(self._queries["release_round_lease"], params)
            return
        async with self.connection() as own:
            await own.execute(self._queries["release_round_lease"], params)

    async def gap_cap_cause(self, conversation_id: str, memory_end_sequence: int | None, *, user_id: str) -> Row | None:
        return await self._fetch_one(
            "gap_cap_cause",
            {"user_id": user_id, "conversation_id": conversation_id, "memory_end_sequence": memory_end_sequence},
        )

    async def save_round(
        self,
        conn: psycopg.AsyncConnection[Row],
        conversation_id: str,
        roles: Sequence[str],
        contents: Sequence[str],
        messages: Sequence[dict[str, Any]],
        *,
        tenant_id: str,
        user_id: str,
    ) -> RoundSaved | None:
        """Store the messages not stored yet (same id and content); None when every one of them was."""
        row = await self._fetch_one(
            "save_round",
            {
                "tenant_id": tenant_id,
                "user_id": user_id,
                "conversation_id": conversation_id,
                "roles": list(roles),
                "contents": list(contents),
                "messages": [Jsonb(m) for m in messages],
            },
            conn,
        )
        if row is None:  # pragma: no cover - the statement always returns one row
            raise MemoryAgentError(f"storing the round of {conversation_id!r} returned no row")
        if not row["stored"]:
            return None
        return RoundSaved(
            conversation_id=conversation_id,
            round_number=row["round_number"],
            first_sequence=row["first_sequence"],
            last_sequence=row["last_sequence"],
            stored_positions=[position - 1 for position in row["stored_positions"]],
        )

    async def trigger_state(
        self, conn: psycopg.AsyncConnection[Row], conversation_id: str, from_sequence: int, *, user_id: str
    ) -> Row:
        row = await self._fetch_one(
            "trigger_state",
            {"user_id": user_id, "conversation_id": conversation_id, "from_sequence": from_sequence},
            conn,
        )
        assert row is not None
        return row

    async def insert_processing(
        self,
        conn: psycopg.AsyncConnection[Row],
        conversation_id: str,
        start_sequence: int,
        end_sequence: int,
        base_memory_id: int | None,
        *,
        tenant_id: str,
        user_id: str,
    ) -> int | None:
        row = await self._fetch_one(
            "insert_processing",
            {
                "tenant_id": tenant_id,
                "user_id": user_id,
                "conversation_id": conversation_id,
                "start_sequence": start_sequence,
                "end_sequence": end_sequence,
                "base_memory_id": base_memory_id,
            },
            conn,
        )
        return row["memory_id"] if row else None

    async def reclaim_stale(
        self,
        timeout_s: float,
        conversation_id: str | None = None,
        conn: psycopg.AsyncConnection[Row] | None = None,
        *,
        user_id: str | None = None,
    ) -> list[Row]:
        """Fail stuck rows of one conversation (its user_id required), or of every user (the sweep)."""
        if conversation_id is not None and user_id is None:
            raise TypeError("reclaim_stale: a conversation needs its user_id")
        return await self._fetch_all(
            "reclaim_stale",
            {"timeout_s": timeout_s, "user_id": user_id, "conversation_id": conversation_id},
            conn,
        )

    async def insert_round_metrics(
        self, conn: psycopg.AsyncConnection[Row] | None, row: dict[str, Any], *, tenant_id: str, user_id: str
    ) -> None:
        params = {**row, "tenant_id": tenant_id, "user_id": user_id}
        if params.get("truncation") is not None:
            params["truncation"] = Jsonb(params["truncation"])
        if conn is not None:
            await conn.execute(self._queries["insert_round_metrics"], params)
            return
        async with self.connection() as own:
            await own.execute(self._queries["insert_round_metrics"], params)

    # ------------------------------------------------------------------ summarization

    async def start_memory(self, memory_id: int, *, user_id: str) -> Row | None:
        return await self._fetch_one("start_memory", {"user_id": user_id, "memory_id": memory_id})

    async def get_messages(
        self, conversation_id: str, start_sequence: int, end_sequence: int, *, user_id: str
    ) -> list[Row]:
        return await self._fetch_all(
            "get_messages",
            {
                "user_id": user_id,
                "conversation_id": conversation_id,
                "start_sequence": start_sequence,
                "end_sequence": end_sequence,
            },
        )

    async def hold_conversation(
        self, conn: psycopg.AsyncConnection[Row], conversation_id: str, *, user_id: str
    ) -> bool:
        """Lock the conversation against erasure for the rest of `conn`'s transaction; False when it is gone."""
        params = {"user_id": user_id, "conversation_id": conversation_id}
        return await self._fetch_one("hold_conversation", params, conn) is not None

    async def complete_memory(
        self, *, user_id: str, conn: psycopg.AsyncConnection[Row] | None = None, **fields: Any
    ) -> bool:
        """Record a finished summary (in `conn`'s transaction when given); False when the row was reclaimed."""
        fields.setdefault("items", None)
        return await self._fetch_one("complete_memory", {**fields, "user_id": user_id}, conn) is not None

    async def fail_memory(self, *, user_id: str, **fields: Any) -> bool:
        return await self._fetch_one("fail_memory", {**fields, "user_id": user_id}) is not None

    # ------------------------------------------------------------------ reading

    async def get_memory(self, memory_id: int, *, user_id: str) -> MemoryRecord | None:
        row = await self._fetch_one("get_memory", {"user_id": user_id, "memory_id": memory_id})
        return MemoryRecord(**row) if row else None

    async def list_memory(self, conversation_id: str, *, user_id: str) -> list[MemoryRecord]:
        rows = await self._fetch_all("list_memory", {"user_id": user_id, "conversation_id": conversation_id})
        return [MemoryRecord(**row) for row in rows]

    async def last_sequence(self, conversation_id: str, *, user_id: str) -> int | None:
        row = await self._fetch_one("last_sequence", {"user_id": user_id, "conversation_id": conversation_id})
        return row["last_sequence"] if row else None

    async def delete_conversation(self, conversation_id: str, *, user_id: str) -> bool:
        params = {"user_id": user_id, "conversation_id": conversation_id}
        return await self._fetch_one("delete_conversation", params) is not None
