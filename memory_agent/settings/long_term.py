"""The settings of the long-term tier: recall at round start (read by long_term/recall and conversation/recalled)
and what the summary job writes to the tier (read by summarize/ and long_term/)."""

from __future__ import annotations

from typing import Annotated, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import Field, field_validator
from pydantic_settings import SettingsConfigDict

from memory_agent.settings.base import CASE_INSENSITIVE, ENV_PREFIX, SettingsGroup


class RecallSettings(SettingsGroup):
    """`settings.recall`: the guardrails and knobs of recall, each read from MEMORY_AGENT_RECALL_<FIELD>; the
    defaults are the design's (block, turns) or measured (the rest: docs/measurements/recall.md)."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX + "RECALL_")

    max_tokens: int = Field(
        default=2000, ge=1, description="Token budget of the recalled block (count_tokens_approximately)."
    )
    max_turns: int = Field(default=5, ge=1, description="Most earlier turns in the recalled block.")
    max_turn_chars: int = Field(
        default=600, ge=1, description="A recalled turn longer than this is cut (ends with '…')."
    )
    text_search_config: str = Field(
        default="english",
        pattern=r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?$",
        description="PostgreSQL text-search configuration of recall's full-text path ('english' measured best; "
        "'simple' is language-neutral; CJK is found through trigrams either way).",
    )
    trgm_threshold: float = Field(
        default=0.3, ge=0, le=1, description="Word similarity a trigram hit needs (the short-query and CJK path)."
    )
    max_query_chars: int = Field(
        default=2_000,
        ge=16,
        le=100_000,
        description="Recall searches with at most this many characters of the message (its start, cut at a word "
        "boundary): a 100 KB message would otherwise cost seconds of matching at every round.",
    )
    max_embedded_chars: int = Field(
        default=300,
        ge=16,
        le=100_000,
        description="With an embedder, at most this many characters of the query (its start, cut at a word "
        "boundary) are embedded at round start: a local model's time grows with the text (the bundled e5's "
        "figures: docs/measurements/code.md).",
    )
    embedding_timeout_s: float = Field(
        default=1.0,
        gt=0,
        le=60,
        description="Hybrid: the longest recall waits for the query's embedding (beside full text); past it, what "
        "full text found is returned without vectors (a WARNING).",
    )
    or_terms: bool = Field(
        default=True, description="OR the query's lexemes in full-text search (AND-ed terms match almost no question)."
    )
    min_hits: int = Field(
        default=2,
        ge=0,
        description="Fewer full-text hits than this: trigrams too; fewer in this conversation: user-wide.",
    )
    vectors_always: bool = Field(
        default=True,
        description="With an embedder, use vectors on every recall (hybrid: the user's nearest vectors are fused with "
        "full text's hits re-ranked by their own, so a turn that shares no word with the query is found); off: only "
        "when full text finds too little.",
    )
    vector_min_similarity: float = Field(
        default=0.15,
        ge=-1,
        le=1,
        description="Cosine similarity a vector hit needs (the nearest are not always near).",
    )
    vector_weight: float = Field(
        default=0.5,
        ge=0,
        le=1,
        description="Hybrid: the vectors' share of a hit's score beside full text's (a convex combination of the two "
        "normalized scores); in the fallback's fusion of ranks, a vector rank's weight against full text's 1; measured.",
    )
    vector_min_spread: float = Field(
        default=0.12,
        ge=0,
        le=2,
        description="Hybrid: the least range of cosine similarity the re-ranked hits' vectors are placed over (0 to "
        "1 of the vectors' share): hits whose vectors lie closer together than this score as close as they are "
        "(0: min-max over whatever range they span); measured.",
    )
    rerank_hits: int = Field(
        default=40,
        ge=1,
        description="Hybrid: how many of full text's and trigrams' fused hits the query's vector re-ranks.",
    )
    speaker_boost: float = Field(
        default=1.3,
        ge=1,
        le=10,
        description="Where turns of several named speakers (a message's `name`) match and the query names one of "
        "them, that speaker's turns' full-text score is multiplied by this (1: off); measured.",
    )
    candidates: int = Field(default=50, ge=1, description="Hits per search path, before fusion.")
    rrf_k: int = Field(default=60, ge=1, description="The k of reciprocal rank fusion.")
    recent_turns: int = Field(
        default=2, ge=0, description="When nothing matched: the latest turns of other conversations recalled."
    )
    neighbours_before: int = Field(
        default=2,
        ge=0,
        le=5,
        description="Turns shown before a recalled turn (its context), counted in the token budget.",
    )
    neighbours_after: int = Field(
        default=4,
        ge=0,
        le=5,
        description="Turns shown after a recalled turn (the answer follows what matched more often than it precedes it).",
    )
    max_neighbour_chars: int = Field(default=400, ge=1, description="A neighbour turn longer than this is cut.")
    time_zone: str | None = Field(
        default=None,
        description="The users' time zone (an IANA name such as 'Europe/Paris') when a round or a recall names "
        "none: recall reads date expressions ('yesterday', 'last week') and dates the turns it shows in it. None: "
        "the service clock's zone (UTC by default). A round names its user's in config['configurable']['time_zone'] "
        "(or the run's context).",
    )

    @field_validator("time_zone")
    @classmethod
    def _known_zone(cls, value: str | None) -> str | None:
        try:
            return value if value is None else str(ZoneInfo(value))
        except (ZoneInfoNotFoundError, ValueError, OSError):  # OSError: a folder of the zone database ("Europe")
            raise ValueError(
                f"{value!r:.80} is no time zone this machine knows: give an IANA name such as 'Europe/Paris' or 'UTC'"
            ) from None


class LongTermSettings(SettingsGroup):
    """`settings.long_term`: whether and where completed memories are written to the user's long-term tier, and
    the embedder of its vectors."""

    long_term: bool = Field(
        default=True,
        description="Write every completed memory version's structured items to the user's long-term tier (in "
        "the summary job, never in the round) and keep its cluster summaries.",
    )
    project: str = Field(
        default="",
        max_length=256,
        description="The project long-term items are written under (one per service).",
    )
    environment: str = Field(
        default="",
        max_length=256,
        description="The environment long-term items are written under (one per service).",
    )
    embeddings: Annotated[Literal["none", "hashing", "e5"], CASE_INSENSITIVE] = Field(
        default="none",
        description="Embedder of long-term items and cluster summaries (the summary job embeds them; recall's "
        "vector fallback embeds the query): none (vectors off), hashing (offline, deterministic n-grams), e5 "
        "(bundled multilingual-e5-small, the `embeddings` extra). An `embeddings=` object given to the service wins.",
    )
