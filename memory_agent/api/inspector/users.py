"""The inspector's login and the pages of a tenant's users: the list, and one user's items (current and past,
with validity and source turns), conversations, consolidation notes and spend."""

from __future__ import annotations

from typing import Any

import psycopg
from fastapi import Request
from fastapi.responses import RedirectResponse, Response

from memory_agent.api.deps import memory_of, user_known
from memory_agent.api.inspector.auth import (
    COOKIE,
    LIST_LIMIT,
    Row,
    crumbs,
    form_fields,
    html,
    in_tenant,
    login,
    more,
    not_found,
    router,
    seen,
)
from memory_agent.api.inspector.html import erase_button, esc, href, link, login_page, page, sources_cell, table, tag
from memory_agent.api.limits import lookup_tenant
from memory_agent.api.queries import KeyQueries
from memory_agent.consolidation import list_notes


@router.get("/login")
async def login_form() -> Response:
    return html(login_page())


@router.post("/login")
async def log_in(request: Request) -> Response:
    key = (await form_fields(request)).get("key", "").strip()
    if not key or await lookup_tenant(memory_of(request), key) is None:
        return login(error="That is not a live API key.")
    answer = RedirectResponse("/inspect/", status_code=303)
    answer.set_cookie(COOKIE, key, httponly=True, samesite="strict", path="/inspect")
    return answer


@router.get("/logout")
async def log_out() -> Response:
    answer = RedirectResponse("/inspect/login", status_code=303)
    answer.delete_cookie(COOKIE, path="/inspect")
    return answer


@router.get("/")
async def users(request: Request) -> Response:
    who = await seen(request)
    if who is None:
        return login()
    # One more than shown: whether the list goes on.
    rows = await in_tenant(request, who, lambda conn: KeyQueries.tenant_users(conn, who.tenant, LIST_LIMIT + 1))
    cells = (
        (
            (
                link(row["user_id"], "users", row["user_id"]),
                esc(row["conversations"]),
                esc(row["current_items"]),
                esc(row["last_at"]),
            ),
            "",
        )
        for row in rows[:LIST_LIMIT]
    )
    body = table(
        ("user", "conversations", "current items", "last active"), cells, "This tenant holds nothing yet."
    ) + more(rows, "users")
    return html(page(f"Users of {who.tenant}", body, tenant=who.tenant))


async def _user_rows(conn: psycopg.AsyncConnection[Any], tenant: str, user_id: str) -> tuple[list[Row], ...] | None:
    if not await user_known(conn, tenant, user_id):
        return None
    scope, limit = {"tenant_id": tenant, "user_id": user_id}, LIST_LIMIT + 1  # one more: whether a list goes on
    notes = [
        note
        for period in ("monthly", "weekly", "daily")
        for note in await list_notes(conn, period, tenant_id=tenant, user_id=user_id, limit=20)
    ]
    return (
        await KeyQueries.user_items(conn, scope, limit),
        await KeyQueries.user_conversations(conn, scope, limit),
        notes,
        await KeyQueries.user_spend(conn, scope, limit),
    )


def _item_row(user_id: str, item: Row) -> tuple[tuple[str, ...], str]:
    kind = esc(item["item_type"]) + (" " + tag("cluster summary") if item["is_summary"] else "")
    cells = (
        esc(item["item_id"]),
        kind,
        esc(item["key"]),
        esc(item["content"]),
        esc(item["valid_from"]),
        esc(item["valid_to"]) or tag("current", "completed"),
        sources_cell(item),
        erase_button(href("users", user_id, "items", item["item_id"], "forget")),
    )
    return cells, "past" if item["valid_to"] else ""


@router.get("/users/{user_id:path}")
async def user(request: Request, user_id: str) -> Response:
    who = await seen(request)
    if who is None:
        return login()
    found = await in_tenant(request, who, lambda conn: _user_rows(conn, who.tenant, user_id))
    if found is None:
        return not_found(who, f"No user {user_id!r} in this tenant.")
    items, conversations, notes, spend = found
    sections = [
        "<h2>Items</h2>",
        table(
            ("id", "type", "key", "content", "valid from", "valid to", "from", ""),
            (_item_row(user_id, item) for item in items[:LIST_LIMIT]),
            "No long-term items.",
        ),
        more(items, "items (current ones first)"),
        "<h2>Conversations</h2>",
        table(
            ("conversation", "rounds", "started", "last round"),
            (
                (
                    (
                        link(c["conversation_id"], "conversations", c["conversation_id"]),
                        esc(c["round_count"]),
                        esc(c["created_at"]),
                        esc(c["updated_at"]),
                    ),
                    "",
                )
                for c in conversations[:LIST_LIMIT]
            ),
            "No conversations.",
        ),
        more(conversations, "conversations (the latest first)"),
        "<h2>Consolidation notes</h2>",
        table(
            ("period", "from", "to", "key insights"),
            (
                (
                    (esc(n["period"]), esc(n["period_start"]), esc(n["period_end"]), esc("; ".join(n["key_insights"]))),
                    "",
                )
                for n in notes
            ),
            "No notes.",
        ),
        "<h2>Spend</h2>",
        table(
            ("purpose", "calls", "input tokens", "output tokens", "cost (USD)"),
            (
                (tuple(esc(s[k]) for k in ("purpose", "calls", "input_tokens", "output_tokens", "cost")), "")
                for s in spend
            ),
            "No model calls recorded.",
        ),
        "<h2>Erase</h2><p>" + erase_button(href("users", user_id, "forget"), "forget this user…") + "</p>",
    ]
    return html(page(f"User {user_id}", "".join(sections), tenant=who.tenant, crumbs=crumbs()))
