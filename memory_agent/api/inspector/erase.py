"""The inspector's erasures: an item, a conversation or a user, each behind a confirmation page (GET shows what
will go; only the page's POST, carrying the key's form token, erases) and answered with what was erased — the
same report as the API's."""

from __future__ import annotations

import dataclasses

from fastapi import Request
from fastapi.responses import Response

from memory_agent.api.deps import memory_of, user_known
from memory_agent.api.inspector.auth import (
    Seen,
    crumbs,
    html,
    in_tenant,
    login,
    not_found,
    owner_of,
    posted_form,
    router,
    seen,
)
from memory_agent.api.inspector.html import confirm_form, href, page, report
from memory_agent.api.queries import KeyQueries


def _confirm(who: Seen, title: str, what: str, action: str, back: str) -> Response:
    body = confirm_form(action, what, who.csrf, back)
    return html(page(title, body, tenant=who.tenant, crumbs=crumbs()))


def _erased(who: Seen, title: str, rows: dict[str, object]) -> Response:
    return html(page(title, "<p>Erased:</p>" + report(rows), tenant=who.tenant, crumbs=crumbs()))


def _refused(who: Seen) -> Response:
    body = "<p>This form did not come from your inspector page: nothing erased.</p>"
    return html(page("Not erased", body, tenant=who.tenant, crumbs=crumbs()), 403)


async def _poster(request: Request) -> Seen | Response:
    """Who posted an erasure form: a live key, checked again once the body arrived, and a form from its own page;
    otherwise the answer to give (the login form, or 403)."""
    who = await seen(request)
    if who is None:
        return login()
    fields = await posted_form(request, who)
    if fields is None:
        return login()
    return who if who.posted_by_page(fields) else _refused(who)


async def _known(request: Request, who: Seen, user_id: str) -> bool:
    return bool(await in_tenant(request, who, lambda conn: user_known(conn, who.tenant, user_id)))


@router.get("/users/{user_id:path}/items/{item_id}/forget")
async def confirm_item(request: Request, user_id: str, item_id: int) -> Response:
    who = await seen(request)
    if who is None:
        return login()
    scope = {"tenant_id": who.tenant, "user_id": user_id}
    items = await in_tenant(request, who, lambda conn: KeyQueries.user_items(conn, scope, 100_000))
    item = next((i for i in items if i["item_id"] == item_id), None)
    if item is None:
        return not_found(who, f"No item {item_id} of user {user_id!r} in this tenant.")
    action, back = href("users", user_id, "items", item_id, "forget"), href("users", user_id)
    return _confirm(who, f"Forget item {item_id}?", f"item {item_id} ({item['content']!r})", action, back)


@router.post("/users/{user_id:path}/items/{item_id}/forget")
async def forget_item(request: Request, user_id: str, item_id: int) -> Response:
    who = await _poster(request)
    if not isinstance(who, Seen):
        return who
    report_ = await memory_of(request).long_term.forget_item(user_id, item_id, tenant_id=who.tenant)
    if not report_.items_deleted:
        return not_found(who, f"No item {item_id} of user {user_id!r} in this tenant: nothing erased.")
    return _erased(who, f"Item {item_id} forgotten", dataclasses.asdict(report_))


@router.get("/conversations/{conversation_id:path}/forget")
async def confirm_conversation(request: Request, conversation_id: str) -> Response:
    who = await seen(request)
    if who is None:
        return login()
    if await owner_of(request, who, conversation_id) is None:
        return not_found(who, f"No conversation {conversation_id!r} in this tenant.")
    action, back = href("conversations", conversation_id, "forget"), href("conversations", conversation_id)
    what = f"conversation {conversation_id!r}: its messages, memory versions, metrics and the items only it sourced"
    return _confirm(who, "Forget this conversation?", what, action, back)


@router.post("/conversations/{conversation_id:path}/forget")
async def forget_conversation(request: Request, conversation_id: str) -> Response:
    who = await _poster(request)
    if not isinstance(who, Seen):
        return who
    user_id = await owner_of(request, who, conversation_id)
    if user_id is None:
        return not_found(who, f"No conversation {conversation_id!r} in this tenant: nothing erased.")
    erased = await memory_of(request).delete_conversation(conversation_id, user_id=user_id, tenant_id=who.tenant)
    return _erased(who, "Conversation forgotten", {"conversation_id": conversation_id, "deleted": erased})


@router.get("/users/{user_id:path}/forget")
async def confirm_user(request: Request, user_id: str) -> Response:
    who = await seen(request)
    if who is None:
        return login()
    if not await _known(request, who, user_id):
        return not_found(who, f"No user {user_id!r} in this tenant.")
    what = f"user {user_id!r}: every long-term item with its lineage, notes, batch summaries and every conversation"
    return _confirm(who, f"Forget {user_id}?", what, href("users", user_id, "forget"), href("users", user_id))


@router.post("/users/{user_id:path}/forget")
async def forget_user(request: Request, user_id: str) -> Response:
    who = await _poster(request)
    if not isinstance(who, Seen):
        return who
    if not await _known(request, who, user_id):
        return not_found(who, f"No user {user_id!r} in this tenant: nothing erased.")
    report_ = await memory_of(request).long_term.forget_user(user_id, tenant_id=who.tenant)
    rows = {
        "user_id": user_id,
        "items_deleted": len(report_.items_deleted),
        "conversations_deleted": len(report_.conversations_deleted),
    }
    return _erased(who, f"User {user_id} forgotten", rows)
