"""Who is looking at the inspector: the key (header, or the login cookie) and its tenant, checked on every request;
the form token derived from the key; reads in the tenant's transaction; the router every page module adds to."""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable, Coroutine
from typing import Any
from urllib.parse import parse_qs

import psycopg
from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from memory_agent.api.deps import memory_of, on_pool
from memory_agent.api.inspector.html import esc, link, login_page, page
from memory_agent.api.inspector.routing import RawPathRoute
from memory_agent.api.limits import INSPECTOR_COOKIE as COOKIE
from memory_agent.api.limits import bearer_key, lookup_tenant
from memory_agent.db.tenancy import tenant_scope
from memory_agent.long_term import tenant_transaction

router = APIRouter(prefix="/inspect", include_in_schema=False, route_class=RawPathRoute)
LIST_LIMIT = 500
Row = dict[str, Any]


class Seen:
    """Who is looking: the key, its tenant, and whether the key came in the login cookie."""

    def __init__(self, key: str, tenant: str, by_cookie: bool) -> None:
        self.key, self.tenant, self.by_cookie = key, tenant, by_cookie

    @property
    def csrf(self) -> str:
        """The token a form of this key's pages carries: another site's form cannot know it."""
        return hmac.new(self.key.encode(), b"memory_agent inspector forms", hashlib.sha256).hexdigest()[:32]

    def posted_by_page(self, fields: dict[str, str]) -> bool:
        """Whether a form came from one of this key's pages (a header-only client sends no cookie to be misused)."""
        return not self.by_cookie or hmac.compare_digest(fields.get("csrf", ""), self.csrf)


async def seen(request: Request) -> Seen | None:
    """The request's live key and tenant; None without one (the page answers the login form)."""
    header = bearer_key(request.headers)
    key = header or request.cookies.get(COOKIE)
    tenant = await lookup_tenant(memory_of(request), key) if key else None
    return Seen(key, tenant, header is None) if key and tenant else None


def html(body: str, status: int = 200) -> HTMLResponse:
    return HTMLResponse(body, status_code=status, headers={"Cache-Control": "no-store"})


def login(status: int = 401, error: str | None = None) -> HTMLResponse:
    return html(login_page(error), status)


def not_found(who: Seen, what: str) -> HTMLResponse:
    return html(page("Not found", f"<p>{esc(what)}</p>", tenant=who.tenant, crumbs=crumbs()), 404)


async def form_fields(request: Request) -> dict[str, str]:
    """An urlencoded form's fields (first value each); the body is bounded by the API's BodyGuard."""
    fields = parse_qs((await request.body()).decode("utf-8", "replace"), max_num_fields=10)
    return {name: values[0] for name, values in fields.items()}


async def posted_form(request: Request, who: Seen) -> dict[str, str] | None:
    """The form's fields once its body has arrived, with the key checked again then: None when it was revoked
    while the body streamed in (it was checked before the body was read)."""
    fields = await form_fields(request)
    if await lookup_tenant(memory_of(request), who.key) != who.tenant:
        return None
    return fields


async def in_tenant(
    request: Request, who: Seen, work: Callable[[psycopg.AsyncConnection[Any]], Coroutine[Any, Any, Any]]
) -> Any:
    """`work` in one transaction that names the key's tenant (row-level security)."""

    async def scoped(conn: psycopg.AsyncConnection[Any]) -> Any:
        async with tenant_transaction(conn, who.tenant):
            return await work(conn)

    return await on_pool(memory_of(request), scoped, who.tenant)


async def owner_of(request: Request, who: Seen, conversation_id: str) -> str | None:
    """The user of a conversation of the key's tenant; None for another tenant's or nobody's."""
    memory = memory_of(request)
    with tenant_scope(who.tenant):
        owner = await memory.loop.arun(memory.backend.conversations.conversation_owner(conversation_id))
    return owner[1] if owner is not None and owner[0] == who.tenant else None


def more(rows: list[Row], what: str) -> str:
    """A note under a list read with LIST_LIMIT + 1 rows: whether it was cut."""
    return f'<p class="note">Only the first {LIST_LIMIT} {esc(what)} are shown.</p>' if len(rows) > LIST_LIMIT else ""


def crumbs(*pairs: tuple[str, tuple[Any, ...]]) -> list[str]:
    return [link("users", ""), *(link(text, *parts) for text, parts in pairs)]
