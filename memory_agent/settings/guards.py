"""The settings of the tenant guards and the cost ledger (docs/concepts/consolidation.md), read by consolidation/,
the ledger and the rounds that price their model calls."""

from __future__ import annotations

import json
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic_settings import NoDecode

from memory_agent.settings.base import SettingsGroup

MAX_COOLDOWN_S = 24 * 3600


class ModelPrice(BaseModel):
    """A model's price per 1M tokens (one currency for the whole table: the ceiling is in it too)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    input: float = Field(ge=0)
    output: float = Field(ge=0)


class GuardSettings(SettingsGroup):
    """`settings.guards`: per-tenant limits of scheduled work and the price table of the cost ledger."""

    tenant_cooldown_s: float = Field(
        default=120.0,
        ge=0,
        le=MAX_COOLDOWN_S,
        description="Cooldown between two scheduler runs of one tenant (the design's 2 minutes); 0: none.",
    )
    max_summary_jobs_per_run: int = Field(
        default=20,
        ge=1,
        le=10_000,
        description="Most summary jobs (model calls writing a summary) per user+project in one scheduler run.",
    )
    max_concurrent_jobs_per_tenant: int = Field(
        default=3, ge=1, le=1000, description="Most consolidation jobs of one tenant running at once, all workers."
    )
    tenant_slot_retry_s: float = Field(
        default=30.0,
        gt=0,
        le=MAX_COOLDOWN_S,
        description="A job that finds every slot of its tenant taken is deferred again this many seconds later.",
    )
    monthly_cost_ceiling: float | None = Field(
        default=None,
        ge=0,
        description="Per tenant and calendar month (UTC), in the price table's currency; None: no ceiling.",
    )
    llm_prices: Annotated[dict[str, ModelPrice], NoDecode] = Field(
        default_factory=dict,
        description='JSON: {"model": {"input": price per 1M tokens, "output": price per 1M tokens}}.',
    )
    app_model: str | None = Field(
        default=None,
        description="The app's chat model, for its rounds whose answers name none (priced in the ledger).",
    )

    @field_validator("llm_prices", mode="before")
    @classmethod
    def _parse_prices(cls, value: Any) -> Any:
        if isinstance(value, str):
            try:
                value = json.loads(value) if value.strip() else {}
            except ValueError as exc:
                raise ValueError(
                    f'must be JSON such as {{"gpt-4.1-mini": {{"input": 0.4, "output": 1.6}}}} ({exc})'
                ) from None
        if not isinstance(value, dict):
            raise ValueError("must be a JSON object mapping model names to {input, output} prices")
        return value
