"""The FastAPI app: routes, the key check and the mapping of bad input to 4xx.

Every route runs its statements on the service's memory loop and pool (MemoryService.loop.arun), so the app can
share a service with a graph in the same process. A key sees its tenant only: a user or conversation of another
tenant answers 404, exactly like one that does not exist, so a key cannot learn what other tenants hold.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Annotated, Any, TypeVar

import psycopg
from fastapi import Depends, FastAPI, HTTPException, Path, Query, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel

from memory_agent.api.keys import tenant_of_key
from memory_agent.conversation.messages import validate_conversation_id, validate_identity
from memory_agent.errors import InvalidInputError
from memory_agent.long_term import LongTermItem, forget_user, list_items, tenant_transaction
from memory_agent.long_term.scope import check_id
from memory_agent.schemas import MemoryRecord
from memory_agent.service import MemoryService
from memory_agent.settings import MemorySettings

T = TypeVar("T")
_bearer = HTTPBearer(auto_error=False, description="An API key of the tenant: `memory-agent api-key create`.")


class ForgetUserResult(BaseModel):
    """What DELETE /users/{user_id} erased."""

    user_id: str
    items_deleted: int
    conversations_deleted: int


def _unprocessable(location: str, field: str, message: str) -> HTTPException:
    # The shape FastAPI gives its own validation errors, so clients read one format.
    return HTTPException(422, detail=[{"loc": [location, field], "msg": message, "type": "value_error"}])


def _checked(field: str, check: Callable[[str], Any], value: str) -> str:
    try:
        check(value)
    except InvalidInputError as exc:
        raise _unprocessable("path", field, str(exc)) from None
    return value


def _memory(request: Request) -> MemoryService:
    memory: MemoryService = request.app.state.memory
    return memory


async def _on_pool(memory: MemoryService, work: Callable[[psycopg.AsyncConnection[Any]], Coroutine[Any, Any, T]]) -> T:
    async def run() -> T:
        async with memory.backend.pool.connection() as conn:
            return await work(conn)

    return await memory.loop.arun(run())


async def _tenant(
    request: Request, credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]
) -> str:
    """The tenant of the request's key; 401 without a key or with one that is not a live key."""
    if credentials is None or credentials.scheme.lower() != "bearer":
        raise HTTPException(401, "an API key is required: Authorization: Bearer <key>", {"WWW-Authenticate": "Bearer"})
    key = credentials.credentials

    async def lookup(conn: psycopg.AsyncConnection[Any]) -> str | None:
        return await tenant_of_key(conn, key)

    tenant = await _on_pool(_memory(request), lookup)
    if tenant is None:
        raise HTTPException(401, "the API key is not valid", {"WWW-Authenticate": "Bearer"})
    return tenant


UNAUTHORIZED: dict[int | str, dict[str, Any]] = {401: {"description": "no API key, or not a live one"}}
NOT_FOUND: dict[int | str, dict[str, Any]] = {404: {"description": "not in the key's tenant (or nowhere)"}}
Tenant = Annotated[str, Depends(_tenant)]
# The schema states the character limits; the byte limits (UTF-8) and "not blank" are checked in the routes.
UserId = Annotated[
    str,
    Path(min_length=1, max_length=256, description="The user's id: 1-256 characters, at most 512 bytes in UTF-8."),
]
ConversationId = Annotated[
    str,
    Path(min_length=1, max_length=1024, description="The conversation's thread id: at most 1024 bytes in UTF-8."),
]


def _user(user_id: str) -> str:
    _checked("user_id", lambda v: validate_identity(v, "user_id"), user_id)
    return _checked("user_id", lambda v: check_id("user_id", v), user_id)


def create_app(memory: MemoryService | None = None, *, settings: MemorySettings | None = None) -> FastAPI:
    """The HTTP API over `memory` (an open MemoryService the caller owns), or over a service the app opens
    from `settings` (default: the environment) at startup and closes at shutdown."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if memory is not None:
            app.state.memory = memory
            yield
            return
        async with MemoryService.from_settings(settings) as opened:
            app.state.memory = opened
            yield

    app = FastAPI(
        title="memory_agent",
        summary="Conversation memory and long-term items, per tenant.",
        lifespan=lifespan,
    )

    @app.get(
        "/conversations/{conversation_id}/memory",
        response_model=list[MemoryRecord],
        responses={**UNAUTHORIZED, **NOT_FOUND},
    )
    async def conversation_memory(conversation_id: ConversationId, tenant: Tenant, request: Request) -> Any:
        """Every memory version of a conversation of the key's tenant, oldest first."""
        _checked("conversation_id", validate_conversation_id, conversation_id)
        service = _memory(request)
        owner = await service.loop.arun(service.backend.conversation_owner(conversation_id))
        if owner is None or owner[0] != tenant:
            raise HTTPException(404, "no such conversation")
        return await service.get_memory_history(conversation_id, user_id=owner[1], tenant_id=owner[0])

    @app.get("/users/{user_id}/items", response_model=list[LongTermItem], responses=UNAUTHORIZED)
    async def user_items(
        user_id: UserId,
        tenant: Tenant,
        request: Request,
        as_of: Annotated[
            datetime | None,
            Query(description="ISO 8601 with a time zone: the items held then (default: the current ones)."),
        ] = None,
    ) -> Any:
        """The user's current long-term items (with cluster summaries), or those held at `as_of`."""
        _user(user_id)
        if as_of is not None and as_of.utcoffset() is None:
            raise _unprocessable("query", "as_of", "as_of needs a time zone (e.g. 2026-01-31T12:00:00Z)")

        async def read(conn: psycopg.AsyncConnection[Any]) -> list[LongTermItem]:
            async with tenant_transaction(conn, tenant):
                return await list_items(conn, tenant, user_id, as_of=as_of)

        return await _on_pool(_memory(request), read)

    @app.delete("/users/{user_id}", response_model=ForgetUserResult, responses={**UNAUTHORIZED, **NOT_FOUND})
    async def delete_user(user_id: UserId, tenant: Tenant, request: Request) -> ForgetUserResult:
        """Forget the user in the key's tenant: every long-term item with its lineage, and every conversation."""
        _user(user_id)

        async def forget(conn: psycopg.AsyncConnection[Any]) -> ForgetUserResult:
            async with tenant_transaction(conn, tenant):
                report = await forget_user(conn, tenant, user_id)
            return ForgetUserResult(
                user_id=user_id,
                items_deleted=len(report.items_deleted),
                conversations_deleted=len(report.conversations_deleted),
            )

        result = await _on_pool(_memory(request), forget)
        if not (result.items_deleted or result.conversations_deleted):
            raise HTTPException(404, "no such user")
        return result

    return app
