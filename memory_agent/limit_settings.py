"""The settings that bound what memory_agent accepts from callers and models (docs/limits.md), as a base class of
MemorySettings under consolidation's: each field is a MEMORY_AGENT_* variable like every other setting."""

from __future__ import annotations

from pydantic import Field

from memory_agent.consolidation_settings import ConsolidationSettings


class LimitSettings(ConsolidationSettings):
    # --- bounds on untrusted input (callers' requests and messages, models' answers) ---
    api_max_body_bytes: int = Field(
        default=1_048_576,
        ge=1_024,
        le=1_073_741_824,
        description="HTTP API: largest request body, in bytes; a larger one is answered 413 without being read "
        "(and a body from a request without a live key is never read: 401 first).",
    )
    recall_max_query_chars: int = Field(
        default=2_000,
        ge=16,
        le=100_000,
        description="Recall searches with at most this many characters of the message (its start, cut at a word "
        "boundary): a 100 KB message would otherwise cost seconds of matching at every round.",
    )
    summary_max_items: int = Field(
        default=100,
        ge=1,
        le=10_000,
        description="Most structured items one memory version writes to the long-term tier (the most important "
        "kept); the rest are recorded as dropped on the version.",
    )
    summary_max_cluster_members: int = Field(
        default=50,
        ge=1,
        le=10_000,
        description="Most members one cluster summary call is given (the most important, newest first among "
        "equals); the summary still stands for every member.",
    )
    consolidation_max_input_tokens: int = Field(
        default=100_000,
        ge=1_000,
        le=10_000_000,
        description="Largest consolidation prompt, in tokens (count_tokens_approximately): a period with more "
        "material is consolidated in parts of at most this size, then the parts' insights together.",
    )
