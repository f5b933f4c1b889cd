"""The WARNINGs of failed summaries: one per conversation every LOG_INTERVAL_S, and a bound for all of them."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

from memory_agent.summarize.failures import LOG_INTERVAL_S, MAX_WARNINGS_PER_INTERVAL, FailingConversations


def test_a_provider_down_for_every_conversation_does_not_flood_the_log(caplog):
    """50 conversations fail at once (the provider is down): MAX_WARNINGS_PER_INTERVAL lines, and the next one
    allowed counts those held back (before: one line per conversation, 50 here, thousands in a real outage)."""
    now = [datetime(2026, 3, 2, 9, tzinfo=UTC)]
    failing = FailingConversations(lambda: now[0])
    caplog.set_level(logging.WARNING, "memory_agent")
    for n in range(50):
        failing.failed(("t", "u", f"c{n}"), "m", "OpenAIAPIError (HTTP 503): down", memory_id=n)
    assert len(caplog.records) == MAX_WARNINGS_PER_INTERVAL
    caplog.clear()
    now[0] += timedelta(seconds=LOG_INTERVAL_S)
    failing.failed(("t", "u", "c49"), "m", "OpenAIAPIError (HTTP 503): down", memory_id=99)
    (line,) = [record.getMessage() for record in caplog.records]
    held = 50 - MAX_WARNINGS_PER_INTERVAL
    assert "Summary of conversation 'c49'" in line and "(1 more failed since the last warning)" in line
    assert f"({held} warnings about failed summaries held back" in line
    # c0, warned about a whole interval ago, is warned about again, and nothing was held back since.
    caplog.clear()
    failing.failed(("t", "u", "c0"), "m", "OpenAIAPIError (HTTP 503): down", memory_id=100)
    assert len(caplog.records) == 1 and "held back" not in caplog.records[0].getMessage()
