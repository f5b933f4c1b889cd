"""GET /users/{user_id}/export: everything stored of a user of the key's tenant as one JSON document (the right of
access), as memory.transfers.export_user writes it: the same bytes for the same rows. A user the tenant does not hold
answers 404, as on the other user routes."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from memory_agent.api.deps import (
    NOT_FOUND,
    UNAUTHORIZED,
    Tenant,
    UserId,
    checked_user,
    memory_of,
    require_user,
)
from memory_agent.transfer import FORMAT, SCHEMA_VERSION, dumps

router = APIRouter(tags=["users"])

DOCUMENT = {
    "description": f"The user's memory: a JSON object of format {FORMAT!r}, schema_version {SCHEMA_VERSION} "
    "(docs/concepts/privacy.md describes its fields).",
    "content": {"application/json": {"schema": {"type": "object"}}},
}


@router.get(
    "/users/{user_id}/export",
    response_class=Response,
    responses={200: DOCUMENT, **UNAUTHORIZED, **NOT_FOUND},
)
async def export_route(user_id: UserId, tenant: Tenant, request: Request) -> Response:
    """Everything stored of the user in the key's tenant: conversations with their messages and memory versions,
    items with their validity and sources, consolidation notes, batch summaries, each with its times."""
    checked_user(user_id)
    memory = memory_of(request)
    await require_user(memory, tenant, user_id)
    document = await memory.transfers.export_user(user_id, tenant_id=tenant)
    return Response(content=dumps(document), media_type="application/json")
