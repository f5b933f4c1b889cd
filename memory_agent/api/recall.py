"""GET /users/{user_id}/recall: recall over HTTP, for applications that are not in Python.

The same recall a round starts with (memory.long_term.recall: the service's MEMORY_AGENT_RECALL_* settings
and embedder), for a user of the key's tenant: the ranked memories with their provenance, and the block as a
round would inject it. A user the tenant does not hold answers 404, as on the other user routes.
"""

from __future__ import annotations

import dataclasses
from datetime import date, datetime
from typing import Annotated

from fastapi import APIRouter, Query, Request
from pydantic import BaseModel, Field

from memory_agent.api.deps import (
    NOT_FOUND,
    UNAUTHORIZED,
    Tenant,
    UserId,
    checked_user,
    memory_of,
    require_user,
    unprocessable,
)
from memory_agent.errors import InvalidInputError
from memory_agent.long_term.recall.block import RecallHit
from memory_agent.schemas.keys import zone_named

router = APIRouter(tags=["recall"])
MAX_QUERY_CHARS = 4000


class RecalledMemory(BaseModel):
    """One recalled memory and where it came from (the fields that apply to its kind are set)."""

    kind: str = Field(description="turn | item | summary (cluster, batch or consolidation summary)")
    is_summary: bool
    text: str = Field(description="As the block shows it (a long turn cut at MEMORY_AGENT_RECALL_MAX_TURN_CHARS).")
    score: float = Field(description="Reciprocal-rank fusion of the paths that found it.")
    paths: list[str] = Field(
        description="The retrieval paths that found it: fts, trgm, vector, recent; date: a turn of the time the "
        "query names."
    )
    role: str = Field(description="user | assistant for a turn; the item type, summary, weekly/monthly insight, ...")
    conversation_id: str | None = Field(default=None, description="A turn's conversation.")
    sequences: list[int] = Field(default_factory=list, description="A turn's sequence; an insight's place.")
    item_ids: list[int] = Field(default_factory=list, description="An item's or cluster summary's id.")
    source_item_ids: list[int] = Field(
        default_factory=list, description="The items a cluster or batch summary stands for (forgotten or not)."
    )
    sources: list[tuple[str, int]] = Field(
        default_factory=list, description="Every stored (conversation_id, sequence) behind it."
    )
    key: str | None = None
    note_id: int | None = Field(default=None, description="A key insight's consolidation note.")
    period: str | None = None
    period_start: date | None = None
    batch_summary_id: int | None = None
    summarized_from: datetime | None = None
    summarized_until: datetime | None = None
    created_at: datetime | None = None
    truncated: bool = False
    context: list[tuple[int, str, str]] = Field(
        default_factory=list, description="A turn's neighbours shown with it: (sequence, role, text)."
    )
    cut_sequences: list[int] = Field(
        default_factory=list,
        description="The neighbours whose text is shown cut (longer than MEMORY_AGENT_RECALL_MAX_NEIGHBOUR_CHARS).",
    )

    @classmethod
    def of(cls, hit: RecallHit) -> RecalledMemory:
        return cls(**dataclasses.asdict(hit), is_summary=hit.is_summary)


class RecallAnswer(BaseModel):
    """What recall found for the query, best first, and the block a round would inject."""

    user_id: str
    query: str
    results: list[RecalledMemory]
    block: str
    retrieval_path: str = Field(description="fts | trgm | vector | date | summaries_only | window")
    estimated_tokens: int
    truncated: bool = Field(description="A guardrail (block tokens, turns, turn length) cut the results.")


@router.get("/users/{user_id}/recall", response_model=RecallAnswer, responses={**UNAUTHORIZED, **NOT_FOUND})
async def recall_route(
    user_id: UserId,
    tenant: Tenant,
    request: Request,
    q: Annotated[str, Query(min_length=1, max_length=MAX_QUERY_CHARS, description="What to recall.")],
    limit: Annotated[int, Query(ge=1, le=50, description="At most this many memories.")] = 10,
    as_of: Annotated[
        datetime | None,
        Query(description="ISO 8601 with a time zone: the items valid then, turns and summaries written by then."),
    ] = None,
    time_zone: Annotated[
        str | None,
        Query(
            max_length=64,
            description="The user's time zone (IANA, e.g. Europe/Paris): 'yesterday' or 'last week' in q and the "
            "turns' dates are read in it. Absent: MEMORY_AGENT_RECALL_TIME_ZONE, else as_of's offset, else the "
            "service clock's zone.",
        ),
    ] = None,
) -> RecallAnswer:
    """Recall the user's memories for `q` across their conversations, items and summaries, as a round does."""
    checked_user(user_id)
    if not q.strip() or "\x00" in q:
        raise unprocessable("query", "q", "q must hold text (not only spaces, no NUL character)")
    if as_of is not None and as_of.utcoffset() is None:
        raise unprocessable("query", "as_of", "as_of needs a time zone (e.g. 2026-01-31T12:00:00Z)")
    memory = memory_of(request)
    if time_zone is not None:  # the user's: as_of (default now) read in it
        try:
            as_of = (as_of or memory.long_term.clock()).astimezone(zone_named(time_zone, "time_zone"))
        except InvalidInputError as exc:
            raise unprocessable("query", "time_zone", str(exc)) from None
    elif as_of is not None and memory.long_term.recall_settings.time_zone is not None:
        # An offset names no zone: without time_zone, as_of is read in MEMORY_AGENT_RECALL_TIME_ZONE, as now is.
        setting = memory.long_term.recall_settings.time_zone
        as_of = as_of.astimezone(zone_named(setting, "MEMORY_AGENT_RECALL_TIME_ZONE"))
    await require_user(memory, tenant, user_id)
    found = await memory.long_term.recall(user_id, q, tenant_id=tenant, limit=limit, as_of=as_of)
    return RecallAnswer(
        user_id=user_id,
        query=found.query,
        results=[RecalledMemory.of(hit) for hit in found.results],
        block=found.block,
        retrieval_path=found.retrieval_path,
        estimated_tokens=found.estimated_tokens,
        truncated=found.truncated,
    )
