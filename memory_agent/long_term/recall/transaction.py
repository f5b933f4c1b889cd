"""How recall's statements run: in one pipeline with recall's settings for their transaction (the trigram
threshold, the plan cache mode, the tenant row-level security filters by)."""

from __future__ import annotations

from contextlib import AsyncExitStack
from typing import Any

import psycopg
from psycopg import AsyncConnection, sql

from memory_agent.errors import ConfigurationError
from memory_agent.long_term.queries import QUERIES as Q
from memory_agent.long_term.recall.settings import RecallSettings

_STORED_CONFIGS = ("english", "pg_catalog.english")


def stored_vectors(settings: RecallSettings) -> bool:
    """Whether the configuration is the one whose vectors are stored (0009): then the statement is the same for
    every call and runs on one generic plan per connection."""
    return settings.text_search_config.lower() in _STORED_CONFIGS


async def in_recall_transaction(
    conn: AsyncConnection[Any], settings: RecallSettings, statement: str | sql.Composed, params: dict[str, Any]
) -> list[dict[str, Any]]:
    """The rows of one of recall's statements, run with recall's settings (they hold for its transaction only).

    The settings and the statement go in one pipeline: on an autocommit connection they share the implicit
    transaction that the pipeline's Sync ends (the protocol's rule), so there is no BEGIN or COMMIT round trip
    (docs/measurements/code.md). Any other connection gets a transaction (or savepoint) of its own."""
    stored = stored_vectors(settings)
    settings_params = {
        "threshold": str(settings.trgm_threshold),
        "plan_cache_mode": "force_generic_plan" if stored else "force_custom_plan",
        "tenant_id": params["tenant_id"],
    }
    try:
        async with AsyncExitStack() as stack:
            await stack.enter_async_context(conn.pipeline())
            if not conn.autocommit:
                await stack.enter_async_context(conn.transaction())
            # Prepared at once: the generic plan is made once per connection and reused.
            return await Q.recall_rows(conn, settings_params, statement, params, stored)
    except psycopg.errors.UndefinedObject as exc:
        raise ConfigurationError(
            f"recall cannot use text search configuration {settings.text_search_config!r} "
            f"({exc.diag.message_primary}); set MEMORY_AGENT_RECALL_TEXT_SEARCH_CONFIG to one the server has "
            "('english', 'simple', ...)"
        ) from exc
