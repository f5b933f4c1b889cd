"""What a completed version records of its items: those inside its window, at most MEMORY_AGENT_SUMMARY_MAX_ITEMS
(the most important kept), and what was dropped and why, listed on the row, bounded (a model can answer thousands
of bad items)."""

from __future__ import annotations

import logging
from typing import Any

from memory_agent.schemas.items import StructuredItems
from memory_agent.summarize.agent import SummaryResult

logger = logging.getLogger("memory_agent")
# Dropped items listed on a memory row; the rest are counted.
DROPPED_SHOWN = 20


def recorded_items(
    result: SummaryResult, memory_id: int, start: int, end: int, max_items: int
) -> tuple[StructuredItems, dict[str, Any]]:
    """The version's items (inside `start`-`end`, capped at `max_items`) and the `items` column's JSON, with the
    dropped ones listed under "dropped"."""
    items, over_cap = result.items.within(start, end).capped(max_items)
    stored = items.model_dump(mode="json")
    dropped = list(result.dropped_items)
    if dropped:
        logger.warning("Memory %s: invalid items dropped after the retry: %s", memory_id, dropped[:DROPPED_SHOWN])
    if over_cap:
        logger.warning("Memory %s: %s items over the cap dropped", memory_id, over_cap)
        dropped.insert(
            0,
            f"{over_cap} items over the cap of {max_items} per version "
            "(MEMORY_AGENT_SUMMARY_MAX_ITEMS): the most important were kept",
        )
    if dropped:
        more = len(dropped) - DROPPED_SHOWN
        stored["dropped"] = dropped[:DROPPED_SHOWN] + ([f"... and {more} more"] if more > 0 else [])
    return items, stored
