"""The one seam to PostgreSQL: every statement memory_agent runs goes through this module.

A statement is the name of a query of sql/queries/ (a `str`), a statement composed with `psycopg.sql` (only for
identifiers that are configurable: a schema, a database name) or, for the migrator, a script of several
statements without parameters (`bytes`). The functions below run one on a connection the caller holds (inside
its transaction, say); `Connector` runs them on a given connection or a pooled one, and owns the pool's
transactions. Driver errors become ours in one place (`driver_errors`), whichever path a statement took, and
rows are dicts whatever row factory the connection has.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager, nullcontext, suppress
from dataclasses import dataclass
from typing import Any, TypeVar, cast
from weakref import WeakKeyDictionary

import psycopg
from psycopg import sql
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

from memory_agent.db.statements import PARSED_EVERY_CALL, Statement, numbered, statement_text
from memory_agent.db.tenancy import current_tenant
from memory_agent.errors import DatabaseUnavailableError, InvalidInputError

logger = logging.getLogger("memory_agent.backend")

Row = dict[str, Any]
T = TypeVar("T")
Connection = psycopg.AsyncConnection[Any]
Cursor = psycopg.AsyncCursor[Row]
Params = Mapping[str, Any] | Sequence[Any] | None


@contextmanager
def driver_errors() -> Iterator[None]:
    """The driver's errors as ours: input past one of PostgreSQL's limits is the caller's (never retryable), a
    lost or refused server is DatabaseUnavailableError (retry). Anything else (a constraint, a lock the caller
    asked to fail fast on) stays the driver's, for the caller that expects it."""
    try:
        yield
    except psycopg.errors.ProgramLimitExceeded as exc:
        # An OperationalError to the driver, but the same input fails at every attempt: never "retry".
        raise InvalidInputError(
            f"PostgreSQL refused the input as past one of its limits ({exc.diag.message_primary}); nothing was "
            "written, and the same input would fail again (docs/limits.md)"
        ) from exc
    except psycopg.OperationalError as exc:
        raise DatabaseUnavailableError(
            f"PostgreSQL is unavailable ({type(exc).__name__}: {exc}); nothing was written, retry the call"
        ) from exc


async def send(
    conn: Connection, statement: Statement, params: Params = None, *, prepare: bool | None = None
) -> psycopg.AsyncCursor[Row]:
    """Run `statement` on `conn` and hand back its cursor unread: in a pipeline, its rows come with a later
    reply (the round path reads a round end's metrics row with COMMIT's)."""
    text = statement_text(statement)
    if isinstance(params, Mapping) and not isinstance(text, bytes):
        encoded = text.as_bytes(conn) if isinstance(text, sql.Composable) else text
        if len(encoded) > PARSED_EVERY_CALL:
            positional, names = numbered(encoded if isinstance(encoded, bytes) else encoded.encode())
            raw = psycopg.AsyncRawCursor(conn, row_factory=dict_row)
            with driver_errors():
                await raw.execute(positional, [params[name] for name in names], prepare=prepare)
            return raw
    cur = conn.cursor(row_factory=dict_row)
    with driver_errors():
        await cur.execute(cast(Any, text), params, prepare=prepare)
    return cur


async def rows_of(cur: psycopg.AsyncCursor[Row]) -> list[Row]:
    """The rows of a cursor `send` returned (none for a statement that returns no rows)."""
    if cur.pgresult is not None and cur.description is None:  # answered, and not with rows
        return []
    with driver_errors():
        return await cur.fetchall()


async def _rowcount(cur: Cursor) -> int:
    return cur.rowcount


async def fetch_all(
    conn: Connection, statement: Statement, params: Params = None, *, prepare: bool | None = None
) -> list[Row]:
    """Every row of `statement` run on `conn`."""
    return await rows_of(await send(conn, statement, params, prepare=prepare))


async def fetch_one(
    conn: Connection, statement: Statement, params: Params = None, *, prepare: bool | None = None
) -> Row | None:
    """The first row of `statement` run on `conn`, None when it returns none."""
    rows = await fetch_all(conn, statement, params, prepare=prepare)
    return rows[0] if rows else None


async def execute_query(
    conn: Connection, statement: Statement, params: Params = None, *, prepare: bool | None = None
) -> int:
    """Run `statement` on `conn` for its effect; the number of rows it touched."""
    return (await send(conn, statement, params, prepare=prepare)).rowcount


async def execute_many(
    conn: Connection, statement: Statement, rows: Iterable[Mapping[str, Any] | Sequence[Any]]
) -> int:
    """Run `statement` once per parameter set of `rows` on `conn` (psycopg pipelines them); the number of rows
    they touched, together."""
    async with conn.cursor() as cur:
        with driver_errors():
            await cur.executemany(cast(Any, statement_text(statement)), rows)
        return cur.rowcount


def fetch_one_sync(conn: psycopg.Connection[Any], statement: Statement, params: Params = None) -> Row | None:
    """fetch_one on a blocking connection, for callers that have no event loop: the embedded server's setup,
    before any pool exists, and the test fixtures of memory_agent.testing."""
    rows = fetch_all_sync(conn, statement, params)
    return rows[0] if rows else None


def fetch_all_sync(conn: psycopg.Connection[Any], statement: Statement, params: Params = None) -> list[Row]:
    """fetch_all on a blocking connection (fetch_one_sync's callers)."""
    with driver_errors(), conn.cursor(row_factory=dict_row) as cur:
        cur.execute(cast(Any, statement_text(statement)), params)
        return cur.fetchall() if cur.description is not None else []


@dataclass
class _Tenancy:
    """How a pool's connections name their tenant (row-level security), whichever Connector hands them out."""

    row_security: bool | None = None  # None: not detected yet
    per_transaction: bool = False

    async def detect(self, conn: Connection) -> None:
        row = await fetch_one(conn, "row_security_active")
        self.row_security = bool(row and row["active"])
        if self.row_security:
            logger.info("Row-level security binds this role: every connection names its tenant")


# Per pool, not per Connector: code that builds its own Connector over a service's pool (a MemoryStore, the
# consolidation scheduler) names the tenant as the service does.
_TENANCY: WeakKeyDictionary[AsyncConnectionPool, _Tenancy] = WeakKeyDictionary()


class Connector:
    """A pool on the memory_agent schema: its connections and transactions, and the statements run on them
    (on the caller's connection when one is given)."""

    def __init__(self, pool: AsyncConnectionPool, schema: str = "memory_agent") -> None:
        self.pool = pool
        self.schema = schema
        # How the pool's connections name their tenant: the pool's, shared by every Connector over it.
        self._tenancy = _TENANCY.setdefault(pool, _Tenancy())

    @property
    def row_security(self) -> bool:
        """Whether the connected role is bound by row-level security (detected at the pool's first checkout, or
        by detect_row_security): then every connection handed out names the running work's tenant (db/tenancy.py)."""
        return bool(self._tenancy.row_security)

    @property
    def tenant_per_transaction(self) -> bool:
        """On Citus, with row_security: the tenant is named per transaction, never per session
        (name_per_transaction)."""
        return self._tenancy.per_transaction

    async def detect_row_security(self) -> bool:
        """Whether the policies bind the connected role (it does not own the tables and may not bypass them)."""
        with driver_errors():
            async with self.pool.connection() as conn:
                await self._tenancy.detect(conn)
        return self.row_security

    def name_per_transaction(self) -> None:
        """Name the tenant in every transaction instead of every session: a Citus cluster checks the policies on
        the workers' shards, through connections of its own that see a SET LOCAL statement of the transaction
        (propagated, name_transaction_tenant) and no session setting. Then every connection handed out is one
        transaction that names the tenant first (`connection()`), and a statement run alone is one too."""
        self._tenancy.per_transaction = True
        logger.info("Row-level security on Citus: every transaction names its tenant, on the workers too")

    @asynccontextmanager
    async def _checkout(self) -> AsyncIterator[Connection]:
        with driver_errors():
            async with self.pool.connection() as conn:
                if self._tenancy.row_security is None:  # a pool nobody detected: once, at its first checkout
                    await self._tenancy.detect(conn)
                if self.row_security and not self.tenant_per_transaction:
                    # For the session (a pooled connection has no transaction open): each checkout names it again,
                    # so a connection never keeps the tenant of its previous user.
                    await execute_query(conn, "name_tenant", {"tenant_id": current_tenant() or ""})
                yield conn

    async def _begin(self, conn: Connection) -> None:
        """BEGIN, and the transaction's tenant first when it is named per transaction; sent, not synced."""
        await conn.execute("BEGIN")
        if self.tenant_per_transaction:
            await execute_query(conn, "set_tenant", {"tenant_id": current_tenant() or ""})

    @staticmethod
    async def _rollback(conn: Connection) -> None:
        if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
            with suppress(psycopg.Error):  # a broken connection: the pool discards it
                await conn.execute("ROLLBACK")

    @asynccontextmanager
    async def connection(self) -> AsyncIterator[psycopg.AsyncConnection[Row]]:
        """A pooled connection (autocommit) for the block; driver errors inside it come out as ours. When the
        tenant is named per transaction (name_per_transaction), the block is one transaction instead: its
        `conn.transaction()` blocks are savepoints, and it commits at the end (rolls back on an error)."""
        async with self._checkout() as conn:
            if not self.tenant_per_transaction:
                yield cast(psycopg.AsyncConnection[Row], conn)  # the pool's row_factory is dict_row
                return
            try:
                async with conn.pipeline():  # BEGIN and the tenant: one round trip
                    await self._begin(conn)
                yield cast(psycopg.AsyncConnection[Row], conn)
                if conn.info.transaction_status == psycopg.pq.TransactionStatus.INERROR:
                    # An error the block caught aborted the transaction: COMMIT would roll back in silence.
                    raise psycopg.errors.InFailedSqlTransaction(
                        "a statement failed inside a transaction of a tenant (row-level security on Citus); "
                        "the block's writes were rolled back"
                    )
                await conn.execute("COMMIT")
            except BaseException:
                await self._rollback(conn)
                raise

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[psycopg.AsyncConnection[Row]]:
        """One write transaction; everything inside commits together or not at all."""
        async with (
            self.connection() as conn,
            nullcontext() if self.tenant_per_transaction else conn.transaction(),  # the block's own, then
        ):
            yield conn

    @asynccontextmanager
    async def round_transaction(self) -> AsyncIterator[psycopg.AsyncConnection[Row]]:
        """`transaction()` in pipeline mode, for the round path: BEGIN (and the tenant, when it is named per
        transaction) travels with the first statement, COMMIT with the statements whose results are not read
        before it, so a transaction whose result is read once takes two round trips. (psycopg's transaction() in a
        pipeline syncs when it opens and twice when it closes: five round trips for two statements, traced.) Only
        single statements inside (no multi-statement strings), and no transaction() inside: it would sync. A
        failure anywhere inside — a statement's error or the caller's — rolls the whole transaction back."""
        async with self._checkout() as conn:
            try:
                async with conn.pipeline():
                    await self._begin(conn)
                    yield cast(psycopg.AsyncConnection[Row], conn)
                    await conn.execute("COMMIT")
            except BaseException:
                await self._rollback(conn)
                raise

    async def _alone(
        self, statement: Statement, params: Params, prepare: bool | None, read: Callable[[Cursor], Awaitable[T]]
    ) -> T:
        """`read` of `statement`'s cursor, run on a pooled connection: in autocommit, or, when the tenant is named
        per transaction, in a transaction of its own that names it, in one round trip (BEGIN, the tenant, the
        statement and COMMIT in one pipeline; the cursor is read once COMMIT's answer is in)."""
        if not self.tenant_per_transaction:
            async with self.connection() as own:
                return await read(await send(own, statement, params, prepare=prepare))
        async with self.round_transaction() as own:
            cursor = await send(own, statement, params, prepare=prepare)
        return await read(cursor)

    async def fetch_all(
        self,
        statement: Statement,
        params: Params = None,
        *,
        conn: Connection | None = None,
        prepare: bool | None = None,
    ) -> list[Row]:
        """Every row of `statement`, on `conn` when given, else on a pooled connection."""
        if conn is not None:
            return await fetch_all(conn, statement, params, prepare=prepare)
        return await self._alone(statement, params, prepare, rows_of)

    async def fetch_one(
        self,
        statement: Statement,
        params: Params = None,
        *,
        conn: Connection | None = None,
        prepare: bool | None = None,
    ) -> Row | None:
        """The first row of `statement` (None when none), on `conn` when given, else on a pooled connection."""
        rows = await self.fetch_all(statement, params, conn=conn, prepare=prepare)
        return rows[0] if rows else None

    async def execute_query(
        self,
        statement: Statement,
        params: Params = None,
        *,
        conn: Connection | None = None,
        prepare: bool | None = None,
    ) -> int:
        """Run `statement` for its effect (the rows it touched), on `conn` when given, else on a pooled one."""
        if conn is not None:
            return await execute_query(conn, statement, params, prepare=prepare)
        return await self._alone(statement, params, prepare, _rowcount)
