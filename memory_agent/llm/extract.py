"""Deterministic extraction of structured items from plain statements, for the offline summarizer.

No model, no network: the demo and the tests get real items ("I'm allergic to peanuts", "I prefer dark mode",
"my name is Ana", "I moved to Lisbon", "remind me to call mom", "we decided to use Postgres", "my sister is
Marta") from the user's own words. Only user messages are read: an assistant repeating a fact is not a source.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from memory_agent.schemas.items import StructuredItems, SummaryItem, normalize_content, normalize_key


@dataclass(frozen=True)
class Statement:
    """One message as the extractor reads it."""

    sequence: int
    role: str
    text: str


@dataclass(frozen=True)
class _Rule:
    field: str  # the StructuredItems list
    pattern: re.Pattern[str]
    key: str  # a fixed key, or "{0}" for a key made from the first captured group
    content: str  # format string over the captured groups
    importance: float
    single_valued: bool
    # Every match contains one of these (lower case): a statement holding none of them is not searched with
    # `pattern`. Most statements state nothing, and a substring test costs a fraction of a case-insensitive search.
    needles: tuple[str, ...]

    def may_match(self, folded: str) -> bool:
        """False when `pattern` cannot match the statement whose `folded` text this is."""
        return any(needle in folded for needle in self.needles)


def _rule(
    field: str, needles: str, pattern: str, key: str, content: str, importance: float, *, one: bool = True
) -> _Rule:
    compiled = re.compile(pattern, re.IGNORECASE)
    return _Rule(field, compiled, key, content, importance, one, tuple(needles.split("|")))


def folded(text: str) -> str:
    """`text` as the needles are compared with: every character a case-insensitive match of an ASCII letter becomes
    that letter (casefold, then the two it leaves apart: dotless i, and the dot of a dotted capital I)."""
    return text.casefold().replace("\u0131", "i").replace("\u0307", "")


# What ends a captured value: sentence punctuation, or a clause joined by "and"/"but"/"so".
_VALUE = r"([^.,;!?\n]+?)(?=\s+(?:and|but|so|because)\s|[.,;!?\n]|$)"
# A proper name: capitalized words ("New York", "Rio de Janeiro"), whatever the rule's case-insensitivity.
_NAME = r"((?-i:[A-Z][\w'-]*(?:\s+(?:de |da |do |of |la )?[A-Z][\w'-]*)*))"
_THEMES = {"dark mode": "dark", "light mode": "light", "dark theme": "dark", "light theme": "light"}

RULES: tuple[_Rule, ...] = (
    _rule("facts", "name is", rf"\bmy name is {_VALUE}", "name", "The user's name is {0}", 0.8),
    _rule("facts", "called", rf"\b(?:i'm|i am|call me) called {_VALUE}", "name", "The user's name is {0}", 0.8),
    _rule(
        "facts",
        "allergic to",
        rf"\b(?:i'm|i am|i've been) (?:severely |very |badly )?allergic to {_VALUE}",
        "allergies",
        "The user is allergic to {0}",
        0.95,
        one=False,
    ),
    _rule(
        "facts",
        "allergic to",
        rf"\b{_NAME} is (?:severely |very |badly )?allergic to {_VALUE}",
        "allergies",
        "{0} is allergic to {1}",
        0.95,
        one=False,
    ),
    _rule(
        "facts",
        "moved to|relocated to",
        rf"\bi (?:just |recently )?(?:moved|relocated) to {_NAME}",
        "home_city",
        "The user lives in {0}",
        0.7,
    ),
    _rule("facts", "live in", rf"\bi live in {_NAME}", "home_city", "The user lives in {0}", 0.7),
    _rule("facts", "work ", rf"\bi work (?:at|for) {_NAME}", "employer", "The user works at {0}", 0.6),
    _rule("facts", "vegetarian", r"\bi(?:'m| am) (?:a |an )?vegetarian\b()", "diet", "The user is vegetarian", 0.8),
    _rule(
        "preferences",
        "prefer|like|love",
        rf"\bi (?:prefer|like|love) {_VALUE}",
        "likes",
        "The user likes {0}",
        0.6,
        one=False,
    ),
    _rule(
        "decisions",
        "decided|agreed|chose",
        rf"\b(?:we|i) (?:decided|agreed|chose) (?:to |on )?{_VALUE}",
        "decisions",
        "Decided: {0}",
        0.7,
        one=False,
    ),
    _rule("decisions", "let's go with", rf"\blet's go with {_VALUE}", "decisions", "Decided: {0}", 0.7, one=False),
    _rule("todos", "remind me to", rf"\bremind me to {_VALUE}", "todo_{0}", "Remind the user to {0}", 0.6, one=False),
    # A todo is done when the user says so in the todo's own words: the same key closes it (long_term.writer).
    _rule("todos", "done:", rf"\bdone:\s*{_VALUE}", "todo_{0}", "Done: {0}", 0.6, one=False),
    _rule("todos", " as done", r"\bmark ([^.,;!?\n]+?) as done\b", "todo_{0}", "Done: {0}", 0.6, one=False),
    _rule(
        "entities",
        "my ",
        r"\bmy (wife|husband|partner|sister|brother|mother|father|mom|dad|boss|friend|son|daughter)"
        r"(?:'s name)? is ([A-Z][\w'-]*)",
        "{0}",
        "The user's {0} is {1}",
        0.5,
    ),
)


def _theme(value: str) -> str | None:
    """'dark mode' is a value of ui_theme: a later 'light mode' must replace it, not sit beside it."""
    lowered = value.strip().lower()
    return next((theme for phrase, theme in _THEMES.items() if lowered.startswith(phrase)), None)


def extract_items(statements: Iterable[Statement]) -> StructuredItems:
    """Items stated by the user in `statements`. Within the window a later value of a single-valued key replaces
    an earlier one; sources accumulate when the same content is said twice."""
    found: dict[tuple[str, str, str], SummaryItem] = {}
    for statement in statements:
        if statement.role != "user":
            continue
        text = folded(statement.text)
        for rule in RULES:
            if not rule.may_match(text):
                continue
            for match in rule.pattern.finditer(statement.text):
                groups = [g.strip() for g in match.groups()]
                key, content, one = rule.key.format(*(normalize_key(g) for g in groups)), "", rule.single_valued
                theme = _theme(groups[0]) if rule.field == "preferences" else None
                if theme is not None:
                    key, content, one = "ui_theme", f"The user prefers the {theme} theme", True
                if not normalize_key(key):
                    continue
                item = SummaryItem(
                    key=key,
                    content=content or rule.content.format(*groups),
                    importance=rule.importance,
                    source_sequences=[statement.sequence],
                    single_valued=one,
                )
                # One item per (list, key) when single-valued, per (list, key, content) otherwise.
                slot = (rule.field, item.key, "" if one else normalize_content(item.content))
                earlier = found.get(slot)
                if earlier is not None and earlier.content == item.content:
                    item = item.model_copy(
                        update={"source_sequences": sorted({*earlier.source_sequences, statement.sequence})}
                    )
                found[slot] = item
    lists: dict[str, list[SummaryItem]] = {}
    for (field, _, _), item in found.items():
        lists.setdefault(field, []).append(item)
    return StructuredItems(**lists)
