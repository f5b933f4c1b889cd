"""The parameters and rows of a round's statements (conversation/queries.py runs them): the round as
end_round stores it, its JSON, a lease's and a claim's parameters, end_round's row as a RoundSaved."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any, NamedTuple

from memory_agent.errors import MemoryAgentError
from memory_agent.schemas import RoundSaved, SummaryClaim

Row = dict[str, Any]


def lease_params(conversation_id: str, holder: str, lease_s: float, tenant_id: str, user_id: str) -> dict[str, Any]:
    return {
        "conversation_id": conversation_id,
        "holder": holder,
        "lease_s": lease_s,
        "tenant_id": tenant_id,
        "user_id": user_id,
    }


def claim_params(conversation_id: str, claim: SummaryClaim | None) -> dict[str, Any]:
    return {
        "conversation_id": conversation_id,
        "start_sequence": claim.start_sequence if claim else None,
        "end_sequence": claim.end_sequence if claim else None,
        "base_memory_id": claim.base_memory_id if claim else None,
    }


class TriggerRule(NamedTuple):
    """The trigger rule's settings, as end_round applies them (sql/definitions: due_summary): the window
    (rolling_window_size), the threshold (summarize_after_seq), the new messages a summary needs after the latest
    one (summary_cadence), the quiet time after which a `processing` row is stale, and whether the claim picks the
    row up (the inline executor)."""

    window: int
    summarize_after: int
    min_new: int
    timeout_s: float
    pick_up: bool


class StoredRound(NamedTuple):
    """A round as end_round stores it: serialize_round's roles, contents and message JSON texts, in order,
    `after` (see round_json) and `started_on`: the created_at of the conversation row the round started on
    (RoundInfo.conversation_created_at; None: nothing stored then). When that row was erased since, nothing is
    stored and end_round's row says `erased`. `metrics`: the round's metrics row (round_metrics_row; None: none),
    whose sequences and trigger outcome end_round fills in."""

    roles: Sequence[str]
    contents: Sequence[str]
    messages: Sequence[str]
    after: int | None = None
    started_on: datetime | None = None
    metrics: dict[str, Any] | None = None


def round_json(stored: StoredRound) -> str:
    """end_round's `round`: a JSON array of {role, content, message, after}, built from serialize_round's output.
    The message texts are JSON already (json.dumps), so they are placed as they are, not encoded again. `after`:
    the last sequence stored when the round started (-1: none), so only a copy stored since (the same round stored
    twice) keeps a message from being stored; None (a round stored without its start): each message is looked for
    in the whole conversation."""
    roles, contents, messages, after, *_ = stored
    tail = "}" if after is None else f',"after":{int(after)}}}'
    items = (
        f'{{"role":{json.dumps(role)},"content":{json.dumps(content, ensure_ascii=False)},"message":{message}' + tail
        for role, content, message in zip(roles, contents, messages, strict=True)
    )
    return "[" + ",".join(items) + "]"


def timestamp_text(at: datetime | None) -> str | None:
    """A timestamp sent as ISO text (the statement casts it): the same parameter type whether given or None, so a
    connection keeps one prepared statement, not one per type."""
    return at.isoformat() if at is not None else None


def saved_round(conversation_id: str, row: Row | None) -> RoundSaved | None:
    """end_round's row as a RoundSaved; None when nothing was new."""
    if row is None:  # pragma: no cover - the statement always returns one row
        raise MemoryAgentError(f"storing the round of {conversation_id!r} returned no row")
    if not row["stored"]:
        return None
    return RoundSaved(
        conversation_id=conversation_id,
        round_number=row["round_number"],
        first_sequence=row["first_sequence"],
        last_sequence=row["last_sequence"],
        stored_positions=[position - 1 for position in row["stored_positions"]],
    )
