"""MemoryStore: a LangGraph `BaseStore` over the long-term items, for `graph.compile(store=…)`,
`create_agent(store=…)` and LangMem's memory tools.

How namespaces map to columns is in store_rows.py; in short `("memories", user_id, …)` → the items of that
user in the store's tenant, the key → the item's key, the value → a JSONB column and its text. A put writes a new
version and closes the previous one (the database decides concurrent puts), a delete forgets every version with
its lineage, a search ranks a user's current rows by text. Every op names its user: a namespace (or prefix) of
fewer than two labels is refused, so no call reads across users.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Iterable
from typing import Any, Protocol, TypeVar

import psycopg
from langchain_core.embeddings import Embeddings
from langgraph.store.base import (
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    validate_op_namespace,
)
from psycopg_pool import AsyncConnectionPool

from memory_agent.db.connector import Connector
from memory_agent.errors import ConfigurationError, InvalidInputError
from memory_agent.long_term.recall import RecallSettings
from memory_agent.long_term.store_keys import (
    check_value,
    index_of,
    matching_namespaces,
    store_key,
    user_of,
    user_of_conditions,
)
from memory_agent.long_term.store_recall import recall_search
from memory_agent.long_term.store_rows import (
    delete_rows,
    equality_filter,
    get_row,
    namespaces_of,
    put_row,
    search_rows,
)
from memory_agent.long_term.tenancy import tenant_transaction
from memory_agent.schemas.keys import DEFAULT_TENANT_ID, validate_identity

T = TypeVar("T")


class Loop(Protocol):
    """The thread-owned event loop a pool lives on (memory_agent.runtime.MemoryLoop)."""

    def run(self, coro: Coroutine[Any, Any, T]) -> T: ...

    async def arun(self, coro: Coroutine[Any, Any, T]) -> T: ...


class Recall(Protocol):
    """Recall's settings and embedder, as the long-term tier holds them (a search with a query is recall)."""

    recall_settings: RecallSettings
    embedder: Embeddings | None


class Service(Protocol):
    """What from_service needs of a MemoryService: its loop, its backend's pool, and its long-term tier's recall
    settings and embedder."""

    @property
    def loop(self) -> Loop: ...

    @property
    def backend(self) -> Connector: ...

    @property
    def long_term(self) -> Recall: ...


class MemoryStore(BaseStore):
    """A LangGraph store whose rows are long-term items of one tenant.

    - Namespace `(category, user_id, *more)`: user_id is the row's user; the tenant is the store's (one store per
      tenant). The category picks the item type ("facts", "preferences", "decisions", "todos", "entities" or
      their singular; anything else, e.g. LangMem's "memories", is a fact). The whole namespace is kept, so
      `list_namespaces` answers from the data.
    - `put(ns, key, value)`: value is a JSON object; a new value closes the current version (valid_to) and opens
      another, the same value only touches updated_at; concurrent puts of one key leave one current version.
      `value=None` (delete) forgets every version of the key and its lineage. The searched text is the value's
      "content" (or the whole value); `index=[paths]` names the fields searched instead ("title", "a.b",
      "notes[*].text"); `index=False` and `ttl` are refused (every item is searched and recalled; nothing expires).
    - `get` → the current version (created_at: when the key was first put; updated_at: last put).
    - `search(prefix, query=, filter=, limit=, offset=)`: the prefix names the user; filter is equality on
      top-level value fields. With a query it is recall (the round start's statement and ranking) and shows
      the whole of the user's memory under `(category, user_id)`: items the summaries extracted, cluster, batch
      and consolidation summaries, earlier turns, each with its provenance in the value (store_recall.py).
      Without one it lists the store's rows, newest first.
    - `list_namespaces` needs a prefix condition naming the user (`prefix=("memories", user_id)`).

    Connections: `MemoryStore(pool, tenant_id=…)` over an AsyncConnectionPool of the memory_agent schema serves
    async callers (`await store.aput(…)`) on the pool's loop; give `loop=` (the loop that owns the pool) for sync
    callers too. `MemoryStore.from_service(memory)` uses the service's pool on its memory loop, for both.
    """

    supports_ttl: bool = False

    def __init__(
        self,
        pool: AsyncConnectionPool | None,
        *,
        tenant_id: str = DEFAULT_TENANT_ID,
        loop: Loop | None = None,
        text_search_config: str = "english",
    ) -> None:
        validate_identity(tenant_id, "tenant_id")
        if not isinstance(text_search_config, str) or not text_search_config:
            raise InvalidInputError(
                f"text_search_config must name a text search configuration, got {text_search_config!r}"
            )
        self.tenant_id = tenant_id
        self.text_search_config = text_search_config
        self._pool = pool
        self._loop = loop
        self._service: Service | None = None

    @classmethod
    def from_service(
        cls, memory: Service, *, tenant_id: str = DEFAULT_TENANT_ID, text_search_config: str = "english"
    ) -> MemoryStore:
        """A store on a MemoryService's pool; the pool and loop are looked up per call (open the service first)."""
        store = cls(None, tenant_id=tenant_id, text_search_config=text_search_config)
        store._service = memory
        return store

    def _connector(self) -> Connector:
        if self._service is not None:
            return self._service.backend
        assert self._pool is not None
        return Connector(self._pool)

    def _owning_loop(self) -> Loop | None:
        return self._service.loop if self._service is not None else self._loop

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        loop = self._owning_loop()
        if loop is None:
            raise ConfigurationError(
                "this MemoryStore serves async calls only (await store.aput/aget/asearch): its pool runs on the "
                "caller's event loop. For sync calls build it with MemoryStore.from_service(memory), or pass "
                "loop= (the loop that owns the pool)"
            )
        return loop.run(self._run(list(ops)))

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        loop = self._owning_loop()
        work = self._run(list(ops))
        return await (loop.arun(work) if loop is not None else work)

    async def _run(self, ops: list[Op]) -> list[Result]:
        # Every op is checked before any runs: a bad op in a batch writes nothing.
        steps = [self._plan(op) for op in ops]
        results: list[Result] = []
        async with self._connector().session() as conn:
            for step in steps:
                async with tenant_transaction(conn, self.tenant_id):
                    results.append(await step(conn))
        return results

    def _plan(self, op: Op) -> Callable[[psycopg.AsyncConnection[Any]], Coroutine[Any, Any, Result]]:
        try:
            validate_op_namespace(op)
        except Exception as exc:  # InvalidNamespaceError is a ValueError of langgraph's
            raise InvalidInputError(str(exc)) from None
        tenant = self.tenant_id
        if isinstance(op, GetOp):
            at = store_key(tenant, op.namespace, op.key)

            async def get(conn: psycopg.AsyncConnection[Any]) -> Result:
                row = await get_row(conn, at)
                return _item(row) if row else None

            return get
        if isinstance(op, PutOp):
            at = store_key(tenant, op.namespace, op.key)
            if op.namespace[0] == "langgraph":
                raise InvalidInputError(f"the root label 'langgraph' is reserved by LangGraph: {op.namespace!r}")
            if op.ttl is not None:
                raise InvalidInputError("MemoryStore does not support TTL (supports_ttl is False); put without ttl")
            index = index_of(op.index)
            if op.value is None:

                async def delete(conn: psycopg.AsyncConnection[Any]) -> Result:
                    await delete_rows(conn, at)
                    return None

                return delete
            value = check_value(op.value)

            async def put(conn: psycopg.AsyncConnection[Any]) -> Result:
                await put_row(conn, at, value, index=index)
                return None

            return put
        if isinstance(op, SearchOp):
            user_of(op.namespace_prefix, "namespace prefix")
            if op.query is not None and not isinstance(op.query, str):
                raise InvalidInputError(f"query must be a string or None, got {type(op.query).__name__}")
            if op.query and op.query.strip():
                return self._recall_search(op)

            async def search(conn: psycopg.AsyncConnection[Any]) -> Result:
                rows = await search_rows(
                    conn,
                    tenant,
                    op.namespace_prefix,
                    query=op.query,
                    filter=op.filter,
                    limit=op.limit,
                    offset=op.offset,
                    text_search_config=self.text_search_config,
                )
                return [_search_item(row) for row in rows]

            return search
        if isinstance(op, ListNamespacesOp):
            user_id = user_of_conditions(op.match_conditions)

            async def list_namespaces(conn: psycopg.AsyncConnection[Any]) -> Result:
                return matching_namespaces(await namespaces_of(conn, tenant, user_id), op)

            return list_namespaces
        raise InvalidInputError(f"MemoryStore cannot run {type(op).__name__}")

    def _recall_search(self, op: SearchOp) -> Callable[[psycopg.AsyncConnection[Any]], Coroutine[Any, Any, Result]]:
        if not isinstance(op.limit, int) or not isinstance(op.offset, int) or op.limit < 0 or op.offset < 0:
            raise InvalidInputError(f"limit and offset must be integers >= 0, got {op.limit!r} and {op.offset!r}")
        equal = equality_filter(op.filter)
        if self._service is not None:
            settings, embedder = self._service.long_term.recall_settings, self._service.long_term.embedder
        else:
            settings, embedder = RecallSettings(text_search_config=self.text_search_config), None
        tenant, query = self.tenant_id, op.query or ""

        async def search(conn: psycopg.AsyncConnection[Any]) -> Result:
            return await recall_search(
                conn,
                tenant,
                op.namespace_prefix,
                query=query,
                equal=equal,
                limit=op.limit,
                offset=op.offset,
                settings=settings,
                embedder=embedder,
            )

        return search


def _item(row: dict[str, Any]) -> Item:
    return Item(
        value=row["value"],
        key=row["key"],
        namespace=tuple(row["namespace"]),
        created_at=row["created_at"],
        updated_at=row["updated_at"],
    )


def _search_item(row: dict[str, Any]) -> SearchItem:
    score = row["score"]
    return SearchItem(
        namespace=tuple(row["namespace"]),
        key=row["key"],
        value=row["value"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        score=None if score is None else float(score),
    )
