"""Recall's knobs: the guardrails of the block and the measured settings of each retrieval path, read from the
MEMORY_AGENT_RECALL_* settings, and the check at open that the server has the text-search configuration."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

import psycopg

from memory_agent.errors import ConfigurationError

if TYPE_CHECKING:  # query_text.py, imported early by long_term/, brings this package in before db/ is ready
    from memory_agent.db.backend import MemoryBackend
    from memory_agent.settings import MemorySettings

_ENV_SETTINGS = ("max_tokens", "max_turns", "max_turn_chars")
_CONFIG_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?$")


@dataclass(frozen=True)
class RecallSettings:
    """The guardrails and knobs of recall; the defaults are the design's (block, turns) or measured (the rest)."""

    text_search_config: str = "english"  # chosen by measurement: docs/recall.md
    or_terms: bool = True  # OR the query's lexemes: AND-ed terms match almost no question
    max_tokens: int = 2000  # the injected block, estimated with count_tokens_approximately
    max_turns: int = 6
    max_turn_chars: int = 600
    min_hits: int = 2  # fewer full-text hits than this → trigrams; fewer in this conversation → user-wide
    trgm_threshold: float = 0.3  # word_similarity a trigram hit needs (CJK bigram matches need none)
    vectors_always: bool = True  # hybrid: with an embedder, vectors on every recall; False: only as a fallback
    vector_min_similarity: float = 0.15  # cosine similarity a vector hit needs: the nearest are not always near
    vector_weight: float = 0.1  # a vector rank's weight in the fusion (full text's and trigrams' are 1): measured
    candidates: int = 50  # per path, before fusion
    rrf_k: int = 60
    recent_turns: int = 2  # when nothing matched: the latest turns of other conversations
    neighbours_before: int = 1  # turns shown before a recalled turn (its context), counted in the token budget
    neighbours_after: int = 1  # and after it
    max_neighbour_chars: int = 300  # a neighbour longer than this is cut
    # The message's start searched with (docs/limits.md): trigram similarity grows with the query's length times
    # each candidate's (a 100 KB message cost ~26 s a round against 2,000 stored turns).
    max_query_chars: int = 2000

    def __post_init__(self) -> None:
        if not _CONFIG_NAME.match(self.text_search_config):
            raise ConfigurationError(
                f"text search configuration {self.text_search_config!r} is not a configuration name; set "
                "MEMORY_AGENT_RECALL_TEXT_SEARCH_CONFIG to one such as 'english' or 'simple'"
            )
        for name in (
            "max_tokens",
            "max_turns",
            "max_turn_chars",
            "candidates",
            "rrf_k",
            "max_neighbour_chars",
            "max_query_chars",
        ):
            if getattr(self, name) < 1:
                env = f" (MEMORY_AGENT_RECALL_{name.upper()})" if name in _ENV_SETTINGS else ""
                raise ConfigurationError(f"recall setting {name} must be >= 1{env}")
        if self.vector_weight < 0:
            raise ConfigurationError(f"recall setting vector_weight must be >= 0, got {self.vector_weight}")
        for name in ("neighbours_before", "neighbours_after"):
            if not 0 <= getattr(self, name) <= 5:
                raise ConfigurationError(f"recall setting {name} must be within 0..5, got {getattr(self, name)}")
        if not 0.0 <= self.trgm_threshold <= 1.0:
            raise ConfigurationError(
                "recall setting trgm_threshold must be within 0..1 (MEMORY_AGENT_RECALL_TRGM_THRESHOLD)"
            )


def recall_settings(settings: MemorySettings) -> RecallSettings:
    """Recall's knobs from the MEMORY_AGENT_RECALL_* settings."""
    return RecallSettings(
        text_search_config=settings.recall_text_search_config,
        max_tokens=settings.recall_max_tokens,
        max_turns=settings.recall_max_turns,
        max_turn_chars=settings.recall_max_turn_chars,
        trgm_threshold=settings.recall_trgm_threshold,
        max_query_chars=settings.recall_max_query_chars,
    )


async def check_recall_settings(backend: MemoryBackend, settings: RecallSettings) -> None:
    """At open: the text-search configuration exists on the server (a typo would otherwise fail every recall)."""
    try:
        await backend.fetch_one("check_text_search_config", {"config": settings.text_search_config})
    except psycopg.errors.UndefinedObject as exc:
        raise ConfigurationError(
            f"MEMORY_AGENT_RECALL_TEXT_SEARCH_CONFIG (got {settings.text_search_config!r}): the server has no such "
            f"text search configuration ({exc.diag.message_primary}); use one such as 'english' or 'simple'"
        ) from None
