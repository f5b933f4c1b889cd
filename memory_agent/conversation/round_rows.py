"""The round_metrics row of a round (the design's per-request retrieval metrics beside the round's own), and which of a state's messages
the conversation does not hold yet."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import BaseMessage

from memory_agent.schemas import RoundInfo, RoundSaved, SummaryClaim, TriggerResult
from memory_agent.schemas.recall import absent_recall_metrics


def round_metrics_row(
    info: RoundInfo,
    saved: RoundSaved | None,
    trigger: TriggerResult | SummaryClaim | None,
    graph_ended: float | None = None,
) -> dict[str, Any]:
    """The round_metrics row for a round (saved and trigger are None when it failed before being stored). A
    SummaryClaim's outcome is recorded by the statement that claims it (end_round)."""
    if isinstance(trigger, SummaryClaim):
        trigger = None
    ended = time.perf_counter() if graph_ended is None else graph_ended
    recall = {**absent_recall_metrics(), **info.recall}
    return {
        **recall,
        "latency_llm_ms": (ended - info.prepared) * 1000 if info.prepared is not None else None,
        "conversation_id": info.conversation_id,
        "round_number": saved.round_number if saved else None,
        "first_sequence": saved.first_sequence if saved else None,
        "last_sequence": saved.last_sequence if saved else None,
        "memory_id": info.memory_id,
        "memory_end_sequence": info.memory_end_sequence,
        "gap_start_sequence": info.gap_start_sequence,
        "gap_end_sequence": info.gap_end_sequence,
        "gap_size": info.gap_size,
        "context_messages": info.context_messages,
        "context_tokens": info.context_tokens,
        "truncated": info.truncated,
        "truncation": info.truncation,
        "retrieval_path": info.retrieval_path,
        "latency_load_ms": info.load_ms,
        "latency_round_ms": (time.perf_counter() - info.started) * 1000,
        "summary_triggered": bool(trigger and trigger.started),
        "trigger_outcome": trigger.outcome if trigger else None,
        "triggered_memory_id": trigger.memory_id if trigger and trigger.started else None,
        # A failed recall does not fail the round: the stored round says so.
        "error_stage": "retrieval" if info.recall_error else None,
        "error": info.recall_error,
    }


def not_stored(messages: Sequence[BaseMessage], stored_ids: set[str]) -> list[BaseMessage]:
    """The messages of `messages` the conversation does not hold yet (a message without an id is new)."""
    return [m for m in messages if not m.id or m.id not in stored_ids]
