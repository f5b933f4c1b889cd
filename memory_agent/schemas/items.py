"""The shape of a structured memory item and the rules that make two statements of one fact the same item.

A summary carries items in five lists (facts, preferences, decisions, todos, entities); each item names its
subject as a normalized `key` ("home_city", "ui_theme"), says it in `content`, rates it (`importance` 0-1) and
points at the messages it came from (`source_sequences`). Model output is untrusted: everything is validated
and normalized here, before it reaches the database.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Literal

from pydantic import BaseModel, Field, field_validator

ItemType = Literal["fact", "preference", "decision", "todo", "entity"]
ITEM_LISTS: dict[str, ItemType] = {
    "facts": "fact",
    "preferences": "preference",
    "decisions": "decision",
    "todos": "todo",
    "entities": "entity",
}
# By default one current value per (user, type, key) — a new value closes the previous one — except for
# decisions and todos, which accumulate. An item says otherwise with `single_valued` (allergies are facts with
# many current values).
SINGLE_VALUED_BY_DEFAULT: frozenset[ItemType] = frozenset({"fact", "preference", "entity"})

MAX_KEY_CHARS = 64
MAX_CONTENT_CHARS = 500


def normalize_key(text: str) -> str:
    """'Home City' → 'home_city'; letters of any script are kept (CJK keys stay CJK), the rest becomes '_'."""
    text = unicodedata.normalize("NFKC", text).casefold()
    text = re.sub(r"[^\w]+", "_", text, flags=re.UNICODE).strip("_")
    return text[:MAX_KEY_CHARS].rstrip("_")


def normalize_content(text: str) -> str:
    """What makes two statements of one fact equal: NFKC, case-folded, whitespace and end punctuation dropped."""
    text = unicodedata.normalize("NFKC", text).casefold()
    text = re.sub(r"\s+", " ", text).strip()
    return text.rstrip(".!?。！？ ")


class SummaryItem(BaseModel):
    """One structured item of a summary."""

    key: str = Field(description="The subject, normalized: lower case, words joined by '_' (e.g. home_city).")
    content: str = Field(description="The item in one short sentence.")
    importance: float = Field(default=0.5, ge=0.0, le=1.0, description="0-1: how much it matters later.")
    source_sequences: list[int] = Field(
        default_factory=list, description="Sequence numbers of the messages the item came from."
    )
    single_valued: bool | None = Field(
        default=None,
        description="True when a new value replaces the old one (home_city), false when values add up "
        "(allergies); unset: true for facts, preferences and entities.",
    )

    @field_validator("key")
    @classmethod
    def _key(cls, value: str) -> str:
        key = normalize_key(value)
        if not key:
            raise ValueError("key is empty after normalization")
        return key

    @field_validator("content")
    @classmethod
    def _content(cls, value: str) -> str:
        content = " ".join(value.replace("\x00", "").split())
        if not content:
            raise ValueError("content is empty")
        if not content.isascii():
            try:
                content.encode("utf-8")
            except UnicodeEncodeError as exc:  # the row's JSON and text columns would refuse the whole version
                raise ValueError(f"content holds a lone surrogate at character {exc.start}") from None
        return content[:MAX_CONTENT_CHARS]

    @field_validator("source_sequences")
    @classmethod
    def _sequences(cls, value: list[int]) -> list[int]:
        if any(s < 0 for s in value):
            raise ValueError("source_sequences must be >= 0")
        return sorted(set(value))


class StructuredItems(BaseModel):
    """The five item lists a summary carries beside its text."""

    facts: list[SummaryItem] = Field(default_factory=list)
    preferences: list[SummaryItem] = Field(default_factory=list)
    decisions: list[SummaryItem] = Field(default_factory=list)
    todos: list[SummaryItem] = Field(default_factory=list)
    entities: list[SummaryItem] = Field(default_factory=list)

    def typed(self) -> list[tuple[ItemType, SummaryItem]]:
        """Every item with its type, in list order."""
        return [(item_type, item) for field, item_type in ITEM_LISTS.items() for item in getattr(self, field)]

    def is_empty(self) -> bool:
        return not self.typed()

    def within(self, start_sequence: int, end_sequence: int) -> StructuredItems:
        """Only the sources inside the summarized range: a model may cite sequences it was never shown. An item
        whose every source is outside is dropped; an item that cites none keeps its conversation lineage only."""
        kept: dict[str, list[SummaryItem]] = {}
        for field in ITEM_LISTS:
            kept[field] = []
            for item in getattr(self, field):
                sources = [s for s in item.source_sequences if start_sequence <= s <= end_sequence]
                if sources or not item.source_sequences:
                    kept[field].append(item.model_copy(update={"source_sequences": sources}))
        return StructuredItems(**kept)

    def capped(self, limit: int) -> tuple[StructuredItems, int]:
        """At most `limit` items, the most important kept (list order among equals), and how many were left out."""
        typed = self.typed()
        if len(typed) <= limit:
            return self, 0
        ranked = sorted(range(len(typed)), key=lambda n: -typed[n][1].importance)
        kept_positions = set(ranked[:limit])
        kept: dict[str, list[SummaryItem]] = {field: [] for field in ITEM_LISTS}
        lists = {item_type: field for field, item_type in ITEM_LISTS.items()}
        for position, (item_type, item) in enumerate(typed):
            if position in kept_positions:
                kept[lists[item_type]].append(item)
        return StructuredItems(**kept), len(typed) - limit


def is_single_valued(item_type: ItemType, item: SummaryItem) -> bool:
    return item.single_valued if item.single_valued is not None else item_type in SINGLE_VALUED_BY_DEFAULT
