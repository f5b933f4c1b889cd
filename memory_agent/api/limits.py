"""What the API reads of a request before any route does: the key of a request that carries a body is checked
before one byte of the body is read (401), and a body larger than MEMORY_AGENT_API_MAX_BODY_BYTES is refused
(413) — from its Content-Length, or as it streams in. And the 422 of a body FastAPI cannot validate never echoes
text it could not encode (a lone surrogate in the JSON made the error handler answer 500)."""

from __future__ import annotations

from typing import Any

from fastapi import Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from memory_agent.api.keys import tenant_of_key
from memory_agent.db.tenancy import tenant_scope
from memory_agent.service import MemoryService

TENANT_STATE = "memory_agent_tenant"  # the tenant a checked key named, for the route's dependency
INSPECTOR_LOGIN = "/inspect/login"
INSPECTOR_COOKIE = "memory_agent_inspect"  # the key the inspector's login keeps (api/inspector/auth.py)
LOGIN_BODY_BYTES = 1_024


def _json(status: int, detail: Any, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"detail": detail}, status_code=status, headers=headers)


def unauthorized(detail: str) -> JSONResponse:
    return _json(401, detail, {"WWW-Authenticate": "Bearer"})


def too_large(limit: int) -> JSONResponse:
    return _json(413, f"the request body is larger than {limit} bytes (MEMORY_AGENT_API_MAX_BODY_BYTES)")


def bearer_key(headers: Headers) -> str | None:
    scheme, _, key = (headers.get("authorization") or "").partition(" ")
    return (key.strip() or None) if scheme.lower() == "bearer" else None


def inspector_cookie(scope: Scope) -> str | None:
    """The key in the inspector's login cookie, for a request to one of its pages (nowhere else)."""
    if not str(scope.get("path", "")).startswith("/inspect/"):
        return None
    from starlette.requests import HTTPConnection

    return HTTPConnection(scope).cookies.get(INSPECTOR_COOKIE)


async def lookup_tenant(memory: MemoryService, key: str) -> str | None:
    """The tenant of a live key (None otherwise), read with no tenant named, as resolving a key is."""

    async def run() -> str | None:
        async with memory.backend.session() as conn:
            return await tenant_of_key(conn, key)

    with tenant_scope(None):
        return await memory.loop.arun(run())


class BodyGuard:
    """Pure ASGI middleware (a BaseHTTPMiddleware would read the body into memory first)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not _has_body(headers := Headers(scope=scope)):
            await self.app(scope, receive, send)
            return
        memory: MemoryService = scope["app"].state.memory
        limit = memory.settings.api.api_max_body_bytes
        key = bearer_key(headers) or inspector_cookie(scope)
        tenant = await lookup_tenant(memory, key) if key is not None else None
        if tenant is None and scope.get("path") == INSPECTOR_LOGIN:
            # The inspector's login form carries the key in its body: a few bytes, read before any key is known.
            tenant, limit = "", LOGIN_BODY_BYTES
        if tenant is None:
            detail = (
                "an API key is required: Authorization: Bearer <key>" if key is None else "the API key is not valid"
            )
            await unauthorized(detail)(scope, receive, send)
            return
        declared = headers.get("content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > limit):
            await too_large(limit)(scope, receive, send)
            return
        if tenant:
            scope.setdefault("state", {})[TENANT_STATE] = tenant
        received = 0
        over = False

        async def counted() -> Message:
            # Past the cap the body is cut where it is: the route fails to parse it, and its answer becomes the 413.
            nonlocal received, over
            if over:
                return {"type": "http.disconnect"}
            message = await receive()
            received += len(message.get("body", b""))
            if received > limit:
                over = True
                return {"type": "http.request", "body": b"", "more_body": False}
            return message

        async def answered(message: Message) -> None:
            if not over:
                await send(message)
            elif message["type"] == "http.response.start":
                await too_large(limit)(scope, receive, send)

        await self.app(scope, counted, answered)


def _has_body(headers: Headers) -> bool:
    return headers.get("content-length", "0") != "0" or "transfer-encoding" in headers


def _encodable(value: Any) -> Any:
    """`value` with every string made encodable in UTF-8 (a lone surrogate spelled as its escape)."""
    if isinstance(value, str):
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    if isinstance(value, list):
        return [_encodable(v) for v in value]
    if isinstance(value, dict):
        return {_encodable(k): _encodable(v) for k, v in value.items()}
    return value


async def validation_error(request: Request, exc: Exception) -> JSONResponse:
    """FastAPI's 422 body (errors with their input), every string of it encodable."""
    assert isinstance(exc, RequestValidationError)
    return _json(422, _encodable(jsonable_encoder(exc.errors())))
