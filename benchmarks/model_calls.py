"""A model call as the model-side stage keeps it (the request's text in order: tools, then messages), the prefix
two calls share, and what a sequence of calls to one model costs at a price set (benchmarks/prices.py)."""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from langchain_core.messages.utils import count_tokens_approximately
from langchain_core.utils.function_calling import convert_to_openai_tool

from benchmarks.prices import PriceSet, dollars, openai_cached


@dataclass(frozen=True)
class Call:
    """One model call as sent: its text (tools, then messages, in order), tokens, and where breakpoints fall."""

    text: str
    tokens: int
    output_tokens: int
    last_user_at: int  # characters before the last user message (all of the text when there is none)
    app_end: int  # characters through the app's system prompt (0: none)

    def tokens_at(self, chars: int) -> int:
        return round(self.tokens * chars / len(self.text)) if self.text else 0


def _message_text(message: BaseMessage) -> str:
    calls = json.dumps(getattr(message, "tool_calls", None) or [], sort_keys=True)
    return (
        f"<{message.type}>{message.content if isinstance(message.content, str) else json.dumps(message.content)}"
        f"{calls}</{message.type}>"
    )


def call_of(messages: list[BaseMessage], tools: list[Any], output_tokens: int, app_prompt: str | None = None) -> Call:
    """The call of `messages` with `tools` (their schemas first: providers cache them with the prompt);
    `app_prompt`: the app's system prompt, whose end is a cache breakpoint."""
    schemas = [convert_to_openai_tool(t) for t in tools]
    text = json.dumps(schemas, sort_keys=True)
    last_user_at = app_end = 0
    for message in messages:
        if isinstance(message, HumanMessage):
            last_user_at = len(text)
        text += _message_text(message)
        if app_prompt is not None and isinstance(message, SystemMessage) and message.content == app_prompt:
            app_end = len(text)
    if not any(isinstance(m, HumanMessage) for m in messages):
        last_user_at = len(text)
    tokens = count_tokens_approximately(messages, tools=schemas or None)
    return Call(text, tokens, output_tokens, last_user_at, app_end)


def common_prefix(a: str, b: str) -> int:
    """Length of the common prefix of two strings (binary search over slices: C speed on long inputs)."""
    if b.startswith(a):
        return len(a)
    low, high = 0, min(len(a), len(b))
    while low < high:
        mid = (low + high + 1) // 2
        if a[:mid] == b[:mid]:
            low = mid
        else:
            high = mid - 1
    return low


def prefix_kept_share(calls: list[Call]) -> float:
    kept = sum(cur.text.startswith(prev.text[: prev.last_user_at]) for prev, cur in itertools.pairwise(calls))
    return kept / max(1, len(calls) - 1)


def price_calls(calls: list[Call], prices: PriceSet, chat: bool) -> dict[str, float]:
    """Dollars of a sequence of calls to one model; `chat`: the app's model (Anthropic breakpoints marked)."""
    price = prices.chat if chat else prices.summarizer
    total_in = total_out = 0.0
    read_tokens = 0
    previous: list[Call] = []
    for call in calls:
        read = written = 0
        if prices.caching == "openai" and previous:
            common = common_prefix(previous[-1].text, call.text)
            read = openai_cached(call.tokens_at(common), call.tokens, prices.min_cached_tokens)
        elif prices.caching == "anthropic" and chat:
            marks = [m for m in (call.app_end, call.last_user_at, len(call.text)) if m]
            cached = [
                earlier.tokens_at(mark)
                for earlier in previous[-2:]
                for mark in (earlier.app_end, earlier.last_user_at, len(earlier.text))
                if mark and call.text.startswith(earlier.text[:mark])
            ]
            read = max(cached, default=0)
            if call.tokens_at(marks[-1]) < prices.min_cached_tokens:
                read = 0
            else:
                written = call.tokens - read
        read_tokens += read
        cost = dollars(price, call.tokens, read, written, 0)
        total_in += cost
        total_out += dollars(price, 0, 0, 0, call.output_tokens)
        previous = [*previous[-1:], call]
    return {"input": total_in, "output": total_out, "read_tokens": read_tokens}
