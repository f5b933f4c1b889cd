"""Published prices of two provider pairs (an app's chat model + a summarizer) and how each provider bills cached
input, for the model-side stage's dollars per 1,000 rounds.

USD per million tokens, as the providers publish them; read on PRICES_READ_ON from the pages in `source`.
- OpenAI caches automatically: a prompt of 1,024 tokens or more has its longest prefix seen in a recent request
  read from cache, in steps of 128 tokens from 1,024, at the cached-input price; writing costs nothing extra (for
  the models before the GPT-5.6 family, these among them).
- Anthropic caches only up to the breakpoints a request marks (`cache_control`): a hit is an earlier request's
  breakpoint prefix, read at the cache-hit price; what follows it up to the request's last breakpoint is written
  at the 5-minute cache-write price (1.25x input). Sonnet 4.5 caches prefixes of 1,024 tokens or more. The app
  marks its breakpoints (the end of its system prompt, the end of the messages before the round's last user
  message, the end of the request); neither summarizer marks any, so theirs is billed as plain input.
- memory_agent's summarizer sends the same prefix every call (its tool schema and instructions, about 750 tokens):
  under OpenAI's 1,024 tokens and under Anthropic's minimum (1,024 for Sonnet 4.5, 4,096 for Haiku 4.5), so
  neither provider caches it and a breakpoint would buy nothing; it is priced as plain input.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

PRICES_READ_ON = "2026-11-27"


@dataclass(frozen=True)
class TokenPrice:
    """One model's prices, USD per million tokens. cache_write None: writing the cache costs nothing extra."""

    model: str
    input: float
    cached_input: float
    output: float
    cache_write: float | None = None


@dataclass(frozen=True)
class PriceSet:
    """A provider's chat model and summarizer, and how that provider caches (`openai` or `anthropic`)."""

    name: str
    caching: str
    chat: TokenPrice
    summarizer: TokenPrice
    source: str
    min_cached_tokens: int = 1024

    def describe(self) -> dict[str, Any]:
        return {**asdict(self), "read_on": PRICES_READ_ON}


PRICE_SETS = (
    PriceSet(
        name="openai",
        caching="openai",
        chat=TokenPrice("gpt-4.1", input=2.00, cached_input=0.50, output=8.00),
        summarizer=TokenPrice("gpt-4.1-mini", input=0.40, cached_input=0.10, output=1.60),
        source="https://platform.openai.com/docs/pricing ; https://platform.openai.com/docs/guides/prompt-caching",
    ),
    PriceSet(
        name="anthropic",
        caching="anthropic",
        chat=TokenPrice("claude-sonnet-4-5", input=3.00, cached_input=0.30, output=15.00, cache_write=3.75),
        summarizer=TokenPrice("claude-haiku-4-5", input=1.00, cached_input=0.10, output=5.00, cache_write=1.25),
        source="https://docs.claude.com/en/docs/build-with-claude/prompt-caching (pricing table) ; "
        "https://docs.claude.com/en/docs/about-claude/pricing",
    ),
)

OPENAI_CACHE_STEP = 128


def openai_cached(common_prefix_tokens: int, prompt_tokens: int, minimum: int = 1024) -> int:
    """Tokens OpenAI reads from cache: the common prefix with a recent request, from `minimum` tokens on, in
    steps of 128 (none below `minimum`, or in a prompt shorter than it)."""
    if prompt_tokens < minimum or common_prefix_tokens < minimum:
        return 0
    return minimum + (common_prefix_tokens - minimum) // OPENAI_CACHE_STEP * OPENAI_CACHE_STEP


def dollars(price: TokenPrice, input_tokens: int, read: int, written: int, output_tokens: int) -> float:
    """One call's cost: `read` input tokens from cache, `written` into it, the rest at the input price."""
    plain = input_tokens - read - written
    write_price = price.cache_write if price.cache_write is not None else price.input
    return (
        plain * price.input + read * price.cached_input + written * write_price + output_tokens * price.output
    ) / 1_000_000
