"""What every route shares: the key check (the request's tenant), running work on the service's pool, the
shape of a 422, and the checks of ids that the OpenAPI schema cannot state."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Annotated, Any, TypeVar

import psycopg
from fastapi import Depends, HTTPException, Path, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from memory_agent.api.limits import TENANT_STATE, lookup_tenant
from memory_agent.api.queries import KeyQueries
from memory_agent.conversation.identity import MAX_IDENTITY_BYTES, validate_user_id
from memory_agent.db.tenancy import tenant_scope
from memory_agent.errors import InvalidInputError
from memory_agent.long_term.tenancy import tenant_transaction
from memory_agent.service import MemoryService

T = TypeVar("T")
_bearer = HTTPBearer(auto_error=False, description="An API key of the tenant: `memory-agent api-key create`.")


def unprocessable(location: str, field: str, message: str) -> HTTPException:
    # The shape FastAPI gives its own validation errors, so clients read one format.
    return HTTPException(422, detail=[{"loc": [location, field], "msg": message, "type": "value_error"}])


def checked(field: str, check: Callable[[str], Any], value: str, location: str = "path") -> str:
    try:
        check(value)
    except InvalidInputError as exc:
        raise unprocessable(location, field, str(exc)) from None
    return value


def checked_user(user_id: str, *, location: str = "path", field: str = "user_id") -> str:
    """A user id a caller gives (conversation/identity.py: the one rule of both tiers)."""
    return checked(field, lambda v: validate_user_id(v, field), user_id, location)


async def user_known(conn: psycopg.AsyncConnection[Any], tenant: str, user_id: str) -> bool:
    """Whether the tenant holds anything of the user; a route naming a user it does not answers 404, whether
    the user is another tenant's or nobody's."""
    return await KeyQueries.user_known(conn, tenant, user_id)


def no_such_user() -> HTTPException:
    return HTTPException(404, "no such user")


def memory_of(request: Request) -> MemoryService:
    memory: MemoryService = request.app.state.memory
    return memory


async def on_pool(
    memory: MemoryService,
    work: Callable[[psycopg.AsyncConnection[Any]], Coroutine[Any, Any, T]],
    tenant: str | None = None,
) -> T:
    """`work` on a pooled connection, on the memory loop, for `tenant` (a role bound by row-level security
    sees that tenant's rows only; None: no tenant, as for resolving a key)."""

    async def run() -> T:
        async with memory.backend.session() as conn:
            return await work(conn)

    with tenant_scope(tenant):
        return await memory.loop.arun(run())


async def require_user(memory: MemoryService, tenant: str, user_id: str) -> None:
    """404 (no_such_user) unless the tenant holds anything of the user: for a route that then reads the user's
    memory through the service (each of its reads names the tenant itself)."""

    async def known(conn: psycopg.AsyncConnection[Any]) -> bool:
        async with tenant_transaction(conn, tenant):
            return await user_known(conn, tenant, user_id)

    if not await on_pool(memory, known, tenant):
        raise no_such_user()


async def _tenant(
    request: Request, credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]
) -> str:
    """The tenant of the request's key; 401 without a key or with one that is not a live key. A request with a body
    had its key checked before the body was read (limits.BodyGuard), and is checked again here, once the body has
    arrived (FastAPI reads it before the dependencies): a key revoked while its body was streaming in is refused."""
    if credentials is None or credentials.scheme.lower() != "bearer":
        raise HTTPException(401, "an API key is required: Authorization: Bearer <key>", {"WWW-Authenticate": "Bearer"})
    tenant = await lookup_tenant(memory_of(request), credentials.credentials)
    checked_before_body = request.scope.get("state", {}).get(TENANT_STATE)
    if tenant is None or (checked_before_body is not None and tenant != checked_before_body):
        raise HTTPException(401, "the API key is not valid", {"WWW-Authenticate": "Bearer"})
    return tenant


UNAUTHORIZED: dict[int | str, dict[str, Any]] = {401: {"description": "no API key, or not a live one"}}
NOT_FOUND: dict[int | str, dict[str, Any]] = {404: {"description": "not in the key's tenant (or nowhere)"}}
Tenant = Annotated[str, Depends(_tenant)]
USER_ID_LIMITS = f"not blank, at most {MAX_IDENTITY_BYTES} bytes in UTF-8"
# The schema states the characters the bytes allow at most; the bytes (UTF-8) and "not blank" are checked in the routes.
UserId = Annotated[
    str, Path(min_length=1, max_length=MAX_IDENTITY_BYTES, description=f"The user's id: {USER_ID_LIMITS}.")
]
ConversationId = Annotated[
    str,
    Path(min_length=1, max_length=1024, description="The conversation's thread id: at most 1024 bytes in UTF-8."),
]
