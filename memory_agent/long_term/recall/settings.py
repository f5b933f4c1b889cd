"""Recall's knobs are the `settings.recall` group (memory_agent.settings.RecallSettings, read from the
MEMORY_AGENT_RECALL_* settings); here: the check at open that the server has the text-search configuration."""

from __future__ import annotations

from typing import TYPE_CHECKING

import psycopg

from memory_agent.errors import ConfigurationError
from memory_agent.settings import RecallSettings

if TYPE_CHECKING:  # query_text.py, imported early by long_term/, brings this package in before db/ is ready
    from memory_agent.long_term.queries import LongTermQueries

__all__ = ["RecallSettings", "check_recall_settings"]


async def check_recall_settings(queries: LongTermQueries, settings: RecallSettings) -> None:
    """At open: the text-search configuration exists on the server (a typo would otherwise fail every recall)."""
    try:
        await queries.check_text_search_config(settings.text_search_config)
    except psycopg.errors.UndefinedObject as exc:
        raise ConfigurationError(
            f"MEMORY_AGENT_RECALL_TEXT_SEARCH_CONFIG (got {settings.text_search_config!r}): the server has no such "
            f"text search configuration ({exc.diag.message_primary}); use one such as 'english' or 'simple'"
        ) from None
