"""The design's window-calculation table and trigger rule, as pure functions."""

from __future__ import annotations

import pytest

from memory_agent import calculate_summary_range
from memory_agent.conversation.window import passes_trigger_rule


@pytest.mark.parametrize(
    ("last_saved_seq", "expected"),
    [(5, (0, 5)), (13, (0, 13)), (15, (2, 15)), (19, (6, 19))],
)
def test_window_calculation_table(last_saved_seq, expected):
    assert calculate_summary_range(last_saved_seq, 14) == expected


def test_window_start_is_never_odd_for_pairs():
    for last in range(1, 200, 2):
        start, end = calculate_summary_range(last, 14)
        assert start % 2 == 0 and end == last and end - start + 1 <= 14


def test_round_starts_align_window_to_a_round():
    # rounds: 0-1, 2-6 (tool calls), 7-8, 9-12, 13-14
    starts = [0, 2, 7, 9, 13]
    assert calculate_summary_range(14, 10, starts) == (7, 14)
    assert calculate_summary_range(12, 10, starts) == (7, 12)
    assert calculate_summary_range(8, 14, starts) == (0, 8)


def test_round_longer_than_window_starts_at_that_round():
    assert calculate_summary_range(30, 5, [0, 2, 4]) == (4, 30)


def test_plain_pairs_with_round_starts_match_the_even_rule():
    for last in range(1, 101, 2):
        starts = list(range(0, last + 1, 2))
        assert calculate_summary_range(last, 14, starts) == calculate_summary_range(last, 14)


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="last_saved_seq"):
        calculate_summary_range(-1)
    with pytest.raises(ValueError, match="window_size"):
        calculate_summary_range(3, 0)


def test_trigger_rule():
    assert not passes_trigger_rule(4, 5)
    assert passes_trigger_rule(5, 5)
    assert not passes_trigger_rule(9, 5, already_processing=True)
