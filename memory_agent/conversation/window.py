"""The design's window maths and trigger rule, as pure functions of sequence numbers.

Sequence numbers count a conversation's stored messages from 0; with user/assistant pairs round 1 is
seq 0-1, round 2 is seq 2-3, and so on. The database side of the trigger rule (what is in `processing`,
which row is stale) is in trigger.py and decides through `summary_due` below; a round end applies the same rule
in its statement (sql/definitions: due_summary, held to these functions' answers by tests).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from memory_agent.schemas import TriggerOutcome


@dataclass(frozen=True)
class TriggerOptions:
    """What the trigger rule reads of the settings, as one value (built where the settings are read: the
    service's wiring): MEMORY_AGENT_MEMORY_SUMMARIZE_AFTER_SEQ, the window (MEMORY_AGENT_MEMORY_ROLLING_WINDOW_SIZE),
    the summary cadence (MemorySettings.summary_cadence) and MEMORY_AGENT_PROCESSING_TIMEOUT_S."""

    summarize_after_seq: int
    window_size: int
    min_new_messages: int
    processing_timeout_s: float


def calculate_summary_range(
    last_saved_seq: int, window_size: int = 14, round_starts: Sequence[int] | None = None
) -> tuple[int, int]:
    """The sliding window (start_seq, end_seq) ending at `last_saved_seq`.

    Without `round_starts` this is the design's rule for user/assistant pairs: the start is rounded up to
    an even sequence. With `round_starts` (first sequence of each round) the start moves up to the first
    round that begins inside the window, so a round (tool calls included) is never split; when the last
    round alone is longer than the window, the window starts at that round.
    """
    if last_saved_seq < 0:
        raise ValueError(f"last_saved_seq must be >= 0, got {last_saved_seq}")
    if window_size < 1:
        raise ValueError(f"window_size must be >= 1, got {window_size}")
    end_seq = last_saved_seq
    start_seq = max(0, end_seq - window_size + 1)
    if round_starts is None:
        if start_seq % 2 != 0:
            start_seq += 1
        return (start_seq, end_seq)
    inside = [s for s in round_starts if start_seq <= s <= end_seq]
    if inside:
        return (min(inside), end_seq)
    earlier = [s for s in round_starts if s <= end_seq]
    if not earlier:
        raise ValueError(f"no round starts at or before sequence {end_seq}: {list(round_starts)}")
    return (max(earlier), end_seq)


def passes_trigger_rule(last_saved_seq: int, summarize_after_seq: int = 5, already_processing: bool = False) -> bool:
    """The design's two checks as a pure function of what was read; `memory.conversations.should_trigger_summary`
    (the design's name) reads them from the database for a conversation."""
    return last_saved_seq >= summarize_after_seq and not already_processing


def processing_is_stuck(quiet_s: float, timeout_s: float) -> bool:
    """Whether a `processing` row quiet for `quiet_s` is stuck: quiet for longer than the timeout (at exactly the
    timeout, not yet). The rule the reclaimer applies in SQL (memory_is_stuck, sql/definitions/rules.sql) to the
    age trigger_state reports here: both must say the same, or a round would wait on a row the reclaimer keeps."""
    return quiet_s > timeout_s


def summary_due(
    last_saved_seq: int,
    *,
    summarize_after_seq: int,
    min_new_messages: int,
    processing_age_s: float | None,
    processing_timeout_s: float,
    base_end_sequence: int | None,
) -> TriggerOutcome | None:
    """The whole trigger rule on what the database holds: None when a summary is due, else why not.

    `processing_age_s` is how long the conversation's `processing` row has been quiet (None: there is none).
    A row quiet for longer than `processing_timeout_s` is stale (processing_is_stuck): it is reclaimed, so it
    does not count as "already processing". Past the design's two checks, a summary needs `min_new_messages` messages after
    the latest completed memory (`base_end_sequence`).
    """
    processing = processing_age_s is not None and not processing_is_stuck(processing_age_s, processing_timeout_s)
    if not passes_trigger_rule(last_saved_seq, summarize_after_seq, already_processing=processing):
        return "already_processing" if processing and last_saved_seq >= summarize_after_seq else "below_threshold"
    if base_end_sequence is not None and last_saved_seq - base_end_sequence < min_new_messages:
        return "no_new_messages"
    return None
