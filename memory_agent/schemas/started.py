"""A summary picked up: the `processing` row with what its summary reads, whether a summary job read it
(summarize/queries.py, start_memory) or the round that claimed the row did (picked_up_by_claim)."""

from __future__ import annotations

from typing import Any

Row = dict[str, Any]

# A `processing` row picked up and what its summary reads: (the row with its base memory's text and end, the
# messages it summarizes, oldest first). start_memory's answer, or the claiming round's (picked_up_by_claim).
StartedSummary = tuple[Row, list[Row]]


def picked_up_by_claim(
    claimed: Row,
    *,
    memory_id: int,
    tenant_id: str,
    user_id: str,
    conversation_id: str,
    start_sequence: int,
    end_sequence: int,
    base_memory_id: int | None,
) -> StartedSummary:
    """What start_memory would have answered, from the round's metrics statement that claimed the row with
    `pick_up` (end_round: base_memory_text, base_end_sequence, picked_sequences, picked_messages)."""
    row = {
        "memory_id": memory_id,
        "user_id": user_id,
        "tenant_id": tenant_id,
        "conversation_id": conversation_id,
        "start_sequence": start_sequence,
        "end_sequence": end_sequence,
        "base_memory_id": base_memory_id,
        "attempts": 1,
        "base_memory_text": claimed["base_memory_text"],
        "base_end_sequence": claimed["base_end_sequence"],
    }
    sequences, messages = claimed["picked_sequences"] or [], claimed["picked_messages"] or []
    return row, [{"sequence_number": n, "message": m} for n, m in zip(sequences, messages, strict=True)]
