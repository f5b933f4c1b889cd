"""GET /health (liveness: the process answers) and GET /ready (readiness: the database answers and its schema is
this code's), both without a key, for load balancers and orchestrators. They name no tenant, user or setting."""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg
from fastapi import APIRouter, HTTPException, Request
from pydantic import BaseModel

from memory_agent.api.deps import memory_of
from memory_agent.errors import ConfigurationError, MemoryAgentError

router = APIRouter(tags=["probes"])


class Status(BaseModel):
    status: str


NOT_READY: dict[int | str, dict[str, Any]] = {503: {"description": "database unreachable, or its schema is behind"}}


@router.get("/health", response_model=Status)
async def health() -> Status:
    """Liveness: the process serves requests (the database is not consulted)."""
    return Status(status="ok")


@router.get("/ready", response_model=Status, responses=NOT_READY)
async def ready(request: Request) -> Status:
    """Readiness: the database answers within the connect timeout and every migration of this code is applied."""
    service = memory_of(request)
    settings = service.settings
    check = service.backend.migrate(apply=False, procrastinate=settings.jobs.executor == "procrastinate")
    try:
        await service.loop.arun(asyncio.wait_for(check, timeout=settings.database.connect_timeout_s))
    except ConfigurationError as exc:
        raise HTTPException(503, "the database schema is behind this code: run `memory-agent migrate`") from exc
    except TimeoutError as exc:
        raise HTTPException(503, "the database did not answer in time (or a migration is running)") from exc
    except (MemoryAgentError, psycopg.Error, OSError) as exc:
        raise HTTPException(503, "the database is unreachable") from exc
    return Status(status="ready")
