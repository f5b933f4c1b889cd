"""The text side of cluster summaries: when a summary is good enough to stand for its members, and a
deterministic offline summarizer for the demo and tests.

A summary is discarded (the cluster stays as it was) when it is
- empty;
- longer than its members joined with "; " (it summarizes nothing);
- missing a member: every member must be named by at least one of its own terms — the words (3+ letters) or
  CJK character pairs that not every member shares. "The user is allergic to peanuts / shellfish / penicillin"
  must mention peanuts, shellfish and penicillin; a summary that drops one would hide it from recall, which
  reads the summary in place of its members.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Awaitable, Callable, Sequence

from memory_agent.long_term.recall.query_text import CJK_RUN

ClusterSummarizer = Callable[[list[str]], Awaitable[str]]

_WORD = re.compile(r"[^\W\d_]{3,}|\d+", re.UNICODE)
MEMBER_SEPARATOR = "; "


def _fold(text: str) -> str:
    return unicodedata.normalize("NFKC", text).casefold()


def terms(text: str) -> set[str]:
    """Words of 3+ letters, numbers, and pairs of adjacent CJK characters (CJK has no spaces to split on)."""
    folded = _fold(text)
    found = {word for word in _WORD.findall(CJK_RUN.sub(" ", folded))}
    for run in CJK_RUN.findall(folded):
        found.update({run} if len(run) == 1 else {run[i : i + 2] for i in range(len(run) - 1)})
    return found


def summary_rejection(summary: str, members: Sequence[str]) -> str | None:
    """Why `summary` cannot stand for `members`, or None when it can."""
    text = summary.strip()
    if not text:
        return "empty summary"
    if len(text) > len(MEMBER_SEPARATOR.join(members)):
        return f"summary ({len(text)} chars) is longer than its members together"
    member_terms = [terms(member) for member in members]
    shared = set.intersection(*member_terms) if member_terms else set()
    folded = _fold(text)
    missing = [
        member
        for member, found in zip(members, member_terms)
        if (found - shared) and not any(term in folded for term in found - shared)
    ]
    if missing:
        return f"summary leaves out {len(missing)} of {len(members)} members (e.g. {missing[0]!r})"
    return None


def _common_prefix(split: list[list[str]]) -> list[str]:
    prefix: list[str] = []
    for words in zip(*split):
        if any(_fold(word) != _fold(words[0]) for word in words):
            break
        prefix.append(words[0])
    return prefix


def offline_cluster_summary_text(members: Sequence[str]) -> str:
    """'The user is allergic to peanuts', '… shellfish', '… penicillin' → 'The user is allergic to peanuts,
    shellfish and penicillin'. Members without a common opening are joined with '; '."""
    split = [member.split() for member in members]
    prefix = _common_prefix(split)
    rests = [" ".join(words[len(prefix) :]).rstrip(".") for words in split]
    if not prefix or any(not rest for rest in rests):
        return MEMBER_SEPARATOR.join(member.rstrip(".") for member in members)
    listed = ", ".join(rests[:-1]) + f" and {rests[-1]}" if len(rests) > 1 else rests[0]
    return f"{' '.join(prefix)} {listed}"


async def offline_cluster_summarizer(members: list[str]) -> str:
    """A ClusterSummarizer with no model and no network: deterministic, for the demo and tests."""
    return offline_cluster_summary_text(members)
