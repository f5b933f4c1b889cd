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

from psycopg import AsyncConnection

from memory_agent.long_term.recall.block import RecallHit, hit_from_row
from memory_agent.long_term.recall.settings import RecallSettings
from memory_agent.long_term.recall.transaction import in_recall_transaction

# A sentence: text up to its closing punctuation (CJK writes no space after it).
_SENTENCE = re.compile(r"[^.!?…。！？]+[.!?…。！？]*")
_QUESTION_MARKS = ("?", "？")
# What a turn may say besides its questions and still be a question: a greeting or an acknowledgement ("Wow,
# that's great, Caroline!"). 80 and 100 characters measured the same; 160 moved the turns that tell something and
# ask back, and lost more than it gained.
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


async def with_replies(
    conn: AsyncConnection[Any], hits: Sequence[RecallHit], params: dict[str, Any], settings: RecallSettings
) -> list[RecallHit]:
    """`hits` with each turn hit that asks a question (`asks`; not one cut at `max_turn_chars`: its end is not
    read) replaced by the next turn of its conversation when the other side said it (`recall_replies`: one lookup
    of the questions' replies and their neighbours, only when a hit asks), in the question's place, with its score
    and paths (the question is what the paths found). A reply shown twice (it was a hit too) is left to
    without_repeats. `params`: recall's (user, tenant, as_of, neighbours, text lengths)."""
    questions = [
        hit
        for hit in hits
        if hit.kind == "turn" and hit.conversation_id is not None and not hit.truncated and asks(hit.text)
    ]
    if not questions:
        return list(hits)
    rows = await in_recall_transaction(
        conn,
        settings,
        "recall_replies",
        {
            "tenant_id": params["tenant_id"],
            "user_id": params["user_id"],
            "conversation_ids": [hit.conversation_id for hit in questions],
            "sequences": [hit.sequences[0] for hit in questions],
            "roles": [hit.role for hit in questions],
            "as_of": params["as_of"],
            "neighbours_before": params["neighbours_before"],
            "neighbours_after": params["neighbours_after"],
            "text_chars": params["text_chars"],
            "neighbour_chars": params["neighbour_chars"],
        },
    )
    replies = {(row["conversation_id"], row["question_sequence"]): row for row in rows}
    answered = []
    for hit in hits:
        reply = replies.get((hit.conversation_id, hit.sequences[0])) if hit.kind == "turn" and hit.sequences else None
        if reply is None:
            answered.append(hit)
            continue
        row = {**reply, "kind": "turn", "score": hit.score, "paths": hit.paths}
        answered.append(hit_from_row(row, settings.max_turn_chars, settings.max_neighbour_chars))
    return answered
