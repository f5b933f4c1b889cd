"""GET /health (liveness: the process answers) and GET /ready (readiness: the database answers and its schema is
this code's), both without a key, for load balancers and orchestrators. They name no tenant, user or setting.
/ready also reports how summaries went in the last hour (counts and shares only): a model that fails every
summary does not make the service unready (its rounds still work), but it shows there."""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg
from fastapi import APIRouter, HTTPException, Request
from pydantic import BaseModel

from memory_agent.api.deps import memory_of
from memory_agent.errors import ConfigurationError, MemoryAgentError
from memory_agent.observability.reads import last_hour

router = APIRouter(tags=["probes"])


class Status(BaseModel):
    status: str


class LastHour(BaseModel):
    """Summaries finished in the hour before the service's clock, and the summary lag of the rounds started in it."""

    completed: int
    failed: int
    failure_rate: float | None  # failed / (completed + failed); null with none finished
    rounds: int
    max_summary_lag: int | None  # messages after the served memory, at a round's start
    avg_summary_lag: float | None


class Ready(Status):
    last_hour: LastHour


NOT_READY: dict[int | str, dict[str, Any]] = {503: {"description": "database unreachable, or its schema is behind"}}


@router.get("/health", response_model=Status)
async def health() -> Status:
    """Liveness: the process serves requests (the database is not consulted)."""
    return Status(status="ok")


@router.get("/ready", response_model=Ready, responses=NOT_READY)
async def ready(request: Request) -> Ready:
    """Readiness: the database answers within the connect timeout and every migration of this code is applied;
    with the summaries' failure rate and the summary lag of the last hour (they do not decide readiness)."""
    service = memory_of(request)
    settings = service.settings
    backend = service.backend

    async def check() -> dict[str, Any]:
        await backend.migrate(apply=False, procrastinate=settings.jobs.executor == "procrastinate")
        return await last_hour(backend, service.clock())

    try:
        recent = await service.loop.arun(asyncio.wait_for(check(), timeout=settings.database.connect_timeout_s))
    except ConfigurationError as exc:
        raise HTTPException(503, "the database schema is behind this code: run `memory-agent migrate`") from exc
    except TimeoutError as exc:
        raise HTTPException(503, "the database did not answer in time (or a migration is running)") from exc
    except (MemoryAgentError, psycopg.Error, OSError) as exc:
        raise HTTPException(503, "the database is unreachable") from exc
    return Ready(status="ready", last_hour=LastHour.model_validate(recent))
