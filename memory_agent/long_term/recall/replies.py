"""A recalled question shown as its answer: a turn hit that asks a question (and says little else) becomes the reply
that followed it, shown with its own neighbours (the question among them).

The words of a question ("What kind of counseling do you want to pursue?") are the words of a query about it,
so full text and vectors find the question; what the user was told is in the reply ("I'm thinking of working with
trans people, ..."), which shares few of them. The block showed the reply anyway, as the question's neighbour; the
hit's own turn, what the block and every read surface put first, was the question. A turn that says something and
asks back ("We adopted a puppy called Pixie! Isn't she cute?") keeps its place: what it says is what was found.
Measured on the LoCoMo development split: docs/measurements/recall.md, "A question's hit shown as its reply".
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from memory_agent.long_term.recall.block import RecallHit, hit_from_row
from memory_agent.settings import RecallSettings

# A sentence: text up to its closing punctuation (CJK writes no space after it).
_SENTENCE = re.compile(r"[^.!?…。！？]+[.!?…。！？]*")
_QUESTION_MARKS = ("?", "？")
# What a turn may say besides its questions and still be a question: a greeting or an acknowledgement ("Wow,
# that's great, Caroline!"). 80, 100 and 120 characters measured within 0.008 of each other; 160 moved more of the
# turns that tell something and ask back, and gained less.
LEAD_CHARS = 80


def asks(text: str) -> bool:
    """Whether a turn is a question: its last sentence asks (a `?`), and its other sentences that are not questions
    hold at most `LEAD_CHARS` characters. Sentences without a letter or digit (an emoji, a closing quote) count as
    neither."""
    sentences = [s.strip() for s in _SENTENCE.findall(text) if any(c.isalnum() for c in s)]
    if not sentences or not any(mark in sentences[-1] for mark in _QUESTION_MARKS):
        return False
    said = sum(len(s) for s in sentences if not any(mark in s for mark in _QUESTION_MARKS))
    return said <= LEAD_CHARS


def answered(rows: Sequence[dict[str, Any]], max_turn_chars: int) -> list[dict[str, Any]]:
    """`recall_search`'s rows with each turn that asks a question (`asks`; not one longer than `max_turn_chars`: its
    end is not read) replaced by its reply (the statement's `reply_*` columns: the next turn of its conversation,
    when the other side said it), in the question's place, with its score and paths (the question is what the
    paths found). A reply that is a hit of its own too is shown once (block.without_repeats)."""
    return [
        {
            **row,
            "sequence_number": row["reply_sequence"],
            "role": row["reply_role"],
            "text": row["reply_text"],
            "created_at": row["reply_created_at"],
            "neighbours": row["reply_neighbours"],
        }
        if row.get("reply_sequence") is not None and len(row["text"] or "") <= max_turn_chars and asks(row["text"])
        else row
        for row in rows
    ]


def shown_hits(rows: Sequence[dict[str, Any]], settings: RecallSettings) -> list[RecallHit]:
    """The hits of a recall statement's rows (`recall_search`, `recall_dated_turns`) as the block shows them: each
    question as its reply (`answered`), texts cut at the settings' caps; a row without a kind (the statement's
    counts alone) is no hit."""
    return [
        hit_from_row(row, settings.max_turn_chars, settings.max_neighbour_chars)
        for row in answered(rows, settings.max_turn_chars)
        if row["kind"]
    ]
