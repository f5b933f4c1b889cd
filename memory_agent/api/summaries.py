"""The consolidation endpoints of the design (docs/concepts/decisions.md): POST /memory/summarize (a manual run of one
user's period) and GET /memory/summaries (the notes of a period), in the key's tenant only.

The run happens in the request, at the app's clock (create_app(clock=...)), with consolidate_period's writes:
a repeat answers `exists` and writes nothing, `force` replaces the note, and concurrent identical requests
write one note because the database's unique key decides, not a check in Python.
"""

from __future__ import annotations

from typing import Annotated, Any

import psycopg
from fastapi import APIRouter, HTTPException, Query, Request
from langchain_core.language_models import BaseChatModel
from pydantic import BaseModel, ConfigDict, Field, StrictBool

from memory_agent.api.deps import (
    NOT_FOUND,
    UNAUTHORIZED,
    USER_ID_LIMITS,
    Tenant,
    checked_user,
    memory_of,
    no_such_user,
    on_pool,
    user_known,
)
from memory_agent.consolidation import ConsolidationRun, list_notes
from memory_agent.consolidation.clock import check_aware
from memory_agent.consolidation.periods import PeriodName
from memory_agent.consolidation.summaries import PeriodSummary, SummarizeResult, summarize_latest
from memory_agent.conversation.identity import MAX_IDENTITY_BYTES
from memory_agent.errors import ConfigurationError, SummarizationError
from memory_agent.llm import default_chat_model
from memory_agent.long_term import tenant_transaction

router = APIRouter(tags=["consolidation"])


class SummarizeRequest(BaseModel):
    """The body the design specifies: which user's latest complete period to consolidate, and whether to redo a done one."""

    model_config = ConfigDict(extra="forbid")

    user_id: str = Field(
        alias="userId", min_length=1, max_length=MAX_IDENTITY_BYTES, description=f"The user's id: {USER_ID_LIMITS}."
    )
    period: PeriodName = Field(description="daily (yesterday), weekly (the last Sunday..Saturday) or monthly.")
    force: StrictBool = Field(default=False, description="Write the note again even if this cycle's exists.")


MODEL_FAILED: dict[int | str, dict[str, Any]] = {
    502: {"description": "the consolidation model failed"},
    503: {"description": "the consolidation model cannot be made (its setting, or its provider's variables)"},
}


def _model(request: Request) -> BaseChatModel:
    if request.app.state.consolidation_model is None:
        try:
            request.app.state.consolidation_model = default_chat_model(memory_of(request).settings, "consolidation")
        except ConfigurationError as exc:  # an app over its own service: the model is made at the first request
            raise HTTPException(503, f"the consolidation model cannot be made: {exc}") from exc
    model: BaseChatModel = request.app.state.consolidation_model
    return model


@router.post(
    "/memory/summarize", response_model=SummarizeResult, responses={**UNAUTHORIZED, **NOT_FOUND, **MODEL_FAILED}
)
async def summarize(body: SummarizeRequest, tenant: Tenant, request: Request) -> SummarizeResult:
    """Consolidate the user's latest complete period now (a rollup's missing inputs first); a repeat is a no-op
    unless `force`. A user the key's tenant does not hold answers 404."""
    user_id = checked_user(body.user_id, location="body", field="userId")
    now = check_aware(request.app.state.clock())
    service = memory_of(request)
    model = _model(request)
    config = service.settings

    async def run(conn: psycopg.AsyncConnection[Any]) -> SummarizeResult | None:
        if not await user_known(conn, tenant, user_id):
            return None
        return await summarize_latest(
            conn, tenant, user_id, body.period, now, run=ConsolidationRun(model, config, force=body.force)
        )

    try:
        result = await on_pool(service, run, tenant)
    except SummarizationError as exc:
        raise HTTPException(502, str(exc)) from exc
    if result is None:
        raise no_such_user()
    return result


@router.get("/memory/summaries", response_model=list[PeriodSummary], responses={**UNAUTHORIZED, **NOT_FOUND})
async def summaries(
    tenant: Tenant,
    request: Request,
    period: Annotated[PeriodName, Query(description="daily, weekly or monthly.")],
    user_id: Annotated[
        str | None,
        Query(
            alias="userId",
            min_length=1,
            max_length=MAX_IDENTITY_BYTES,
            description=f"Only this user: {USER_ID_LIMITS}.",
        ),
    ] = None,
    limit: Annotated[int, Query(ge=1, le=500, description="Most summaries returned, newest first.")] = 50,
) -> Any:
    """The key's tenant's summaries of a period, newest first, in the design's JSON shape; a `userId` the tenant
    holds nothing of answers 404."""
    if user_id is not None:
        checked_user(user_id, location="query", field="userId")

    async def read(conn: psycopg.AsyncConnection[Any]) -> list[PeriodSummary] | None:
        async with tenant_transaction(conn, tenant):
            if user_id is not None and not await user_known(conn, tenant, user_id):
                return None
            rows = await list_notes(conn, period, tenant_id=tenant, user_id=user_id, limit=limit)
        return [PeriodSummary.from_row(row) for row in rows]

    found = await on_pool(memory_of(request), read, tenant)
    if found is None:
        raise no_such_user()
    return found
