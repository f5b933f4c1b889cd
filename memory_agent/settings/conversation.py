"""The settings of the conversation tier: the sliding window and its summarizer (read by conversation/ and
summarize/), and what a round gives the model (read by conversation/round_start)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator
from pydantic_settings import SettingsConfigDict

from memory_agent.settings.base import CASE_INSENSITIVE, ENV_PREFIX, MAX_SECONDS, SettingsGroup

# New messages per summary by default: chosen in `make bench` (benchmarks/README.md, Model side) as the most
# frequent cadence at which summaries cost at most twice SummarizationMiddleware's and 5 rounds in 6 reuse the
# previous round's input as their prefix.
DEFAULT_SUMMARY_CADENCE = 12
# The summary's length asked for, in words, chosen in the same stage: a memory of this length, plus the gap of a
# 12-message cadence, keeps a round's conversation tokens under half of SummarizationMiddleware's.
DEFAULT_SUMMARY_WORDS = 150
# The cap on a stored memory, per word asked for: English prose is about 1.4 tokens a word (count_tokens_
# approximately), so 3 catches a summary about twice the length asked for, not one a little over.
SUMMARY_TOKENS_PER_WORD = 3


class MemoryWindowSettings(SettingsGroup):
    """`settings.memory`: the sliding window and the memory a summary makes of it (the design's names and
    defaults), each read from MEMORY_AGENT_MEMORY_<FIELD>."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX + "MEMORY_")

    rolling_window_size: int = Field(default=14, ge=2, description="Messages a memory covers.")
    summarize_after_seq: int = Field(
        default=5, ge=0, description="Summarize once the last saved sequence number reaches this."
    )
    min_new_messages: int | None = Field(
        default=None,
        ge=1,
        description="The summary cadence: new messages since the latest memory needed before another summary is "
        "started. Between two summaries each round's model input extends the previous round's (the memory "
        "unchanged, the gap grown at its end), which a provider's prompt cache serves. None: 12 (every 6 "
        "user/assistant rounds, measured in `make bench`: benchmarks/README.md, Model side), or the window size "
        "or max_gap_messages when smaller. 1: after every round (the design's tables). At most "
        "rolling_window_size and max_gap_messages.",
    )
    model: str = Field(
        default="gpt-4.1-mini",
        description="Chat model of the summarizer: `provider:model` as LangChain's init_chat_model reads it "
        "(openai:..., anthropic:..., ollama:...), a bare name for OpenAI, or `offline` (the deterministic offline "
        "summarizer, only when named). The provider's own variables configure its client (docs: Models and "
        "providers).",
    )
    max_words: int = Field(
        default=DEFAULT_SUMMARY_WORDS,
        ge=20,
        description="Length limit given to the summarizer; the memory is injected into every round. 150: the "
        "longest at which a round's conversation tokens stay within half of SummarizationMiddleware's (measured "
        "in `make bench`: benchmarks/README.md, Model side).",
    )
    max_tokens: int | None = Field(
        default=None,
        ge=1,
        description="Hard cap on a stored memory, in tokens (count_tokens_approximately): a longer summary is "
        "asked again, shorter, once, then fails (the previous memory stays served) instead of being injected into "
        "every later round. None: 3 x memory_max_words.",
    )

    @property
    def summary_cadence(self) -> int:
        """min_new_messages as applied: the default cadence, or the window when that is smaller."""
        if self.min_new_messages is not None:
            return self.min_new_messages
        return min(DEFAULT_SUMMARY_CADENCE, self.rolling_window_size)

    @property
    def max_tokens_cap(self) -> int:
        return self.max_tokens if self.max_tokens is not None else SUMMARY_TOKENS_PER_WORD * self.max_words

    @model_validator(mode="after")
    def _first_summary_covers_round_one(self) -> MemoryWindowSettings:
        window, after = self.rolling_window_size, self.summarize_after_seq
        if window < after + 1:
            # The first summary (at seq `after`) would start past seq 0: round 1 would slide out unsummarized.
            raise ValueError(
                f"MEMORY_AGENT_MEMORY_ROLLING_WINDOW_SIZE ({window}) must be at least "
                f"MEMORY_AGENT_MEMORY_SUMMARIZE_AFTER_SEQ + 1 ({after + 1}), or the first summary would skip "
                "the first messages"
            )
        if self.max_tokens is not None and self.max_tokens < 2 * self.max_words:
            # count_tokens_approximately gives written summaries 1.45-1.8 tokens a word (LoCoMo's session
            # summaries): a lower cap refuses the summaries that keep to the words asked, every one of them.
            raise ValueError(
                f"MEMORY_AGENT_MEMORY_MAX_TOKENS ({self.max_tokens}) must be at least 2 x "
                f"MEMORY_AGENT_MEMORY_MAX_WORDS ({2 * self.max_words}): a summary of {self.max_words} words is "
                "about 1.5-1.8 tokens a word, and a lower cap fails summaries that keep to the length asked"
            )
        if self.min_new_messages is not None and self.min_new_messages > window:
            # A summary would start past the end of the one before: the messages between would never be summarized.
            raise ValueError(
                f"MEMORY_AGENT_MEMORY_MIN_NEW_MESSAGES ({self.min_new_messages}) must be at most "
                f"MEMORY_AGENT_MEMORY_ROLLING_WINDOW_SIZE ({window}), or each summary's window would start after "
                "the previous memory ends and the messages between would never be summarized"
            )
        return self


class SummarySettings(SettingsGroup):
    """`settings.summary`: the summary job (its model calls, and what it writes to the long-term tier), each
    read from MEMORY_AGENT_SUMMARY_<FIELD>."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX + "SUMMARY_")

    timeout_s: float = Field(default=120.0, gt=0, le=MAX_SECONDS, description="Limit for one summarizer model call.")
    max_attempts: int = Field(default=3, ge=1, description="Model calls per summary before it fails.")
    retry_backoff_s: float = Field(
        default=1.0, ge=0, le=MAX_SECONDS, description="First retry delay; doubles each retry."
    )
    min_cluster_items: int = Field(
        default=3,
        ge=2,
        description="Current items of one (user, project, environment, type, key) from which a cluster summary "
        "stands for them; below it the summary is deleted.",
    )
    max_items: int = Field(
        default=100,
        ge=1,
        le=10_000,
        description="Most structured items one memory version writes to the long-term tier (the most important "
        "kept); the rest are recorded as dropped on the version.",
    )
    max_cluster_members: int = Field(
        default=50,
        ge=1,
        le=10_000,
        description="Most members one cluster summary call is given (the most important, newest first among "
        "equals); the summary still stands for every member.",
    )


class RoundSettings(SettingsGroup):
    """`settings.rounds`: what a round gives the model (context assembly, recall on or off), whose round it is,
    and what happens when two rounds of one conversation overlap."""

    recall: bool = Field(
        default=True,
        description="A round with a user (config user_id) gets that user's relevant long-term items, cluster "
        "summaries and earlier turns as a block of its own. Off, or a round without a user: no recall.",
    )
    injection_mode: Annotated[Literal["prefix", "system"], CASE_INSENSITIVE] = Field(
        default="prefix",
        description="prefix: '[Previous context: …]' before the first user message; system: a SystemMessage.",
    )
    max_gap_messages: int | None = Field(
        default=None,
        ge=1,
        description="Most stored messages given to the model after the memory (the gap, or every message on "
        "the raw fallback), whole rounds dropped from the front: keeps rounds bounded while summaries fail or "
        "lag. None: 2 x memory_rolling_window_size. At least memory_min_new_messages.",
    )
    max_context_tokens: int | None = Field(
        default=None,
        ge=1,
        description="Token budget of the model's context (memory + gap + input, count_tokens_approximately). "
        "Above it the gap is trimmed from its oldest round, never splitting a round nor dropping the "
        "current input. None: no budget.",
    )
    max_message_tokens: int | None = Field(
        default=None,
        ge=1,
        description="Longest single message given to the model, in tokens; a longer one is cut and ends with "
        "'… [truncated by memory_agent: N tokens over the cap]'. Stored messages stay whole. None: no cap.",
    )
    user_id_key: str = Field(
        default="user_id",
        min_length=1,
        description="The key of config['configurable'] naming a round's user. Absent from a run's config: the "
        "conversation is its own user scope ('conversation:<thread id>').",
    )
    tenant_id_key: str = Field(
        default="tenant_id",
        min_length=1,
        description="The key of config['configurable'] naming a round's tenant. Absent: tenant 'default'.",
    )
    multitask_strategy: Annotated[Literal["enqueue", "reject"], CASE_INSENSITIVE] = Field(
        default="enqueue",
        description="A round started while another round of the same conversation runs (any process): "
        "enqueue: it waits for that round to end, then sees its messages; reject: RoundInProgressError.",
    )
    multitask_timeout_s: float = Field(
        default=600.0, gt=0, le=MAX_SECONDS, description="enqueue: longest wait for the conversation's lease."
    )
    round_lease_s: float = Field(
        default=600.0,
        gt=0,
        le=MAX_SECONDS,
        description="A round's hold on its conversation expires after this (a process that died mid-round "
        "blocks the conversation no longer).",
    )
