"""The FastAPI app: routes, the key check and the mapping of bad input to 4xx.

Every route runs its statements on the service's memory loop and pool (MemoryService.loop.arun), so the app can
share a service with a graph in the same process. A key sees its tenant only: a user or conversation of another
tenant answers 404, exactly like one that does not exist, so a key cannot learn what other tenants hold.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Annotated, Any

import psycopg
from fastapi import FastAPI, HTTPException, Query, Request
from fastapi.exceptions import RequestValidationError
from langchain_core.language_models import BaseChatModel
from pydantic import BaseModel

from memory_agent.api.deps import (
    NOT_FOUND,
    UNAUTHORIZED,
    ConversationId,
    Tenant,
    UserId,
    checked,
    checked_user,
    memory_of,
    no_such_user,
    on_pool,
    unprocessable,
    user_known,
)
from memory_agent.api.export import router as export_router
from memory_agent.api.inspector import router as inspector_router
from memory_agent.api.limits import BodyGuard, validation_error
from memory_agent.api.probes import router as probes_router
from memory_agent.api.recall import router as recall_router
from memory_agent.api.summaries import router as summaries_router
from memory_agent.consolidation.clock import Clock, system_clock
from memory_agent.conversation.messages import validate_conversation_id
from memory_agent.db.tenancy import tenant_scope
from memory_agent.llm import default_chat_model
from memory_agent.long_term import (
    ItemFilter,
    LongTermItem,
    forget_user,
    list_items,
    release_threads,
    tenant_transaction,
)
from memory_agent.schemas import MemoryRecord
from memory_agent.schemas.keys import UserKey, default_user_id
from memory_agent.service import MemoryService
from memory_agent.settings import MemorySettings


class ForgetUserResult(BaseModel):
    """What DELETE /users/{user_id} erased."""

    user_id: str
    items_deleted: int
    conversations_deleted: int


def create_app(
    memory: MemoryService | None = None,
    *,
    settings: MemorySettings | None = None,
    clock: Clock | None = None,
    consolidation_model: BaseChatModel | None = None,
) -> FastAPI:
    """The HTTP API over `memory` (an open MemoryService the caller owns), or over a service the app opens
    from `settings` (default: the environment) at startup and closes at shutdown.

    `clock` is the time POST /memory/summarize consolidates at (default: UTC now); `consolidation_model` the
    model it calls (default: the one MEMORY_AGENT_CONSOLIDATION_MODEL names, else MEMORY_AGENT_MEMORY_MODEL's;
    made at startup when the app opens its own service, so that an unusable one stops the start)."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if memory is not None:
            app.state.memory = memory
            yield
            return
        own = settings or MemorySettings()
        if app.state.consolidation_model is None:
            app.state.consolidation_model = default_chat_model(own, "consolidation")
        async with MemoryService.from_settings(own) as opened:
            app.state.memory = opened
            yield

    app = FastAPI(
        title="memory_agent",
        summary="Conversation memory and long-term items, per tenant.",
        lifespan=lifespan,
    )
    app.add_middleware(BodyGuard)
    app.add_exception_handler(RequestValidationError, validation_error)
    app.state.clock = clock or system_clock
    app.state.consolidation_model = consolidation_model
    app.include_router(summaries_router)
    app.include_router(probes_router)
    app.include_router(recall_router)
    app.include_router(export_router)
    app.include_router(inspector_router)

    @app.get(
        "/conversations/{conversation_id}/memory",
        response_model=list[MemoryRecord],
        responses={**UNAUTHORIZED, **NOT_FOUND},
    )
    async def conversation_memory(conversation_id: ConversationId, tenant: Tenant, request: Request) -> Any:
        """Every memory version of a conversation of the key's tenant, oldest first."""
        checked("conversation_id", validate_conversation_id, conversation_id)
        service = memory_of(request)
        with tenant_scope(tenant):  # another tenant's conversation is invisible to a role bound by the policies
            owner = await service.loop.arun(service.backend.conversations.conversation_owner(conversation_id))
        if owner is None or owner[0] != tenant:
            raise HTTPException(404, "no such conversation")
        # A conversation run without a user is its own scope: named by its tenant alone (the scope's id is reserved).
        user_id = None if owner[1] == default_user_id(conversation_id) else owner[1]
        return await service.conversations.get_memory_history(conversation_id, user_id=user_id, tenant_id=owner[0])

    @app.get("/users/{user_id}/items", response_model=list[LongTermItem], responses={**UNAUTHORIZED, **NOT_FOUND})
    async def user_items(
        user_id: UserId,
        tenant: Tenant,
        request: Request,
        as_of: Annotated[
            datetime | None,
            Query(description="ISO 8601 with a time zone: the items held then (default: the current ones)."),
        ] = None,
    ) -> Any:
        """The user's current long-term items (with cluster summaries), or those held at `as_of`; a user the key's
        tenant holds nothing of answers 404."""
        key = UserKey(tenant, checked_user(user_id))  # the tenant is the API key's, checked when it was made
        if as_of is not None and as_of.utcoffset() is None:
            raise unprocessable("query", "as_of", "as_of needs a time zone (e.g. 2026-01-31T12:00:00Z)")

        async def read(conn: psycopg.AsyncConnection[Any]) -> list[LongTermItem] | None:
            async with tenant_transaction(conn, tenant):
                if not await user_known(conn, tenant, user_id):
                    return None
                return await list_items(conn, key, where=ItemFilter(as_of=as_of))

        found = await on_pool(memory_of(request), read, tenant)
        if found is None:
            raise no_such_user()
        return found

    @app.delete("/users/{user_id}", response_model=ForgetUserResult, responses={**UNAUTHORIZED, **NOT_FOUND})
    async def delete_user(user_id: UserId, tenant: Tenant, request: Request) -> ForgetUserResult:
        """Forget the user in the key's tenant: every long-term item with its lineage, and every conversation."""
        key = UserKey(tenant, checked_user(user_id))  # the tenant is the API key's, checked when it was made

        async def forget(conn: psycopg.AsyncConnection[Any]) -> tuple[ForgetUserResult, int]:
            async with tenant_transaction(conn, key):
                report = await forget_user(conn, key)
            result = ForgetUserResult(
                user_id=user_id,
                items_deleted=len(report.items_deleted),
                conversations_deleted=len(report.conversations_deleted),
            )
            return result, len(report.notes_deleted)

        memory = memory_of(request)
        result, notes_deleted = await on_pool(memory, forget, tenant)
        # After the erasure committed, each in a transaction of its own (forget.release_threads says why).
        with tenant_scope(tenant):
            await memory.loop.arun(release_threads(memory.backend.session, key))
        if not (result.items_deleted or result.conversations_deleted or notes_deleted):
            raise no_such_user()
        return result

    return app
