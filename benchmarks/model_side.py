"""The model-side stage of `make bench`: what each system sends its models, and what that costs.

An app as apps are built: a system prompt of about 2,000 tokens and 4 tools, the same for the three systems;
memory_agent's rounds name a user, so recall runs. Every chat-model call and every summarizer call is kept, then:
- summarizer calls and input tokens per 1,000 rounds (memory_agent's include its tool schema, sent every call);
- prompt tokens per round, whole (app prompt and tools included) and the conversation's part alone;
- the prefix kept: the share of rounds whose input starts with the previous round's whole input except its last
  user message (the part a provider's prompt cache can serve);
- dollars per 1,000 rounds at two published price sets (benchmarks/prices.py), cached input priced as each
  provider bills it.
`python -m benchmarks.run --only model_side` runs it alone (results in results/model_side.{json,md}).
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.messages.utils import count_tokens_approximately
from langchain_core.tools import tool
from langchain_core.utils.function_calling import convert_to_openai_tool

from benchmarks.fakes import _WORDS, assistant_reply
from benchmarks.prices import PRICE_SETS, PriceSet, dollars, openai_cached
from benchmarks.systems import App, FullHistorySystem, MemoryAgentSystem, MiddlewareSystem, System


def app_system_prompt(tokens: int = 2000) -> str:
    """A support assistant's instructions, about `tokens` tokens (count_tokens_approximately), deterministic."""
    lines = ["You are the support assistant of an online shop. Follow these rules in every answer."]
    n = 0
    while count_tokens_approximately([SystemMessage("\n".join(lines))]) < tokens:
        n += 1
        words = [_WORDS[(n * 7 + k * 3) % len(_WORDS)] for k in range(14)]
        lines.append(f"{n}. When the customer asks about the {words[0]} or the {words[1]}, " + " ".join(words[2:]) + ".")
    return "\n".join(lines)


@tool
def lookup_order(order_id: str) -> str:
    """Look up an order by its id: status, items, shipping address and tracking number."""
    return order_id


@tool
def refund_order(order_id: str, amount: float, reason: str) -> str:
    """Refund part or all of an order; the reason is shown to the customer."""
    return order_id


@tool
def update_address(customer_id: str, address: str) -> str:
    """Change a customer's default shipping address."""
    return customer_id


@tool
def schedule_callback(customer_id: str, when: str, topic: str) -> str:
    """Schedule a phone call from a human agent at an ISO 8601 time."""
    return customer_id


APP = App(system_prompt=app_system_prompt(), tools=(lookup_order, refund_order, update_address, schedule_callback))
USER = "model-side-user"


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
    return f"<{message.type}>{message.content if isinstance(message.content, str) else json.dumps(message.content)}"\
        f"{calls}</{message.type}>"


def call_of(messages: list[BaseMessage], tools: list[Any], output_tokens: int, extra_tokens: int = 0) -> Call:
    schemas = [convert_to_openai_tool(t) for t in tools]
    text = json.dumps(schemas, sort_keys=True)
    last_user_at = app_end = 0
    for message in messages:
        if isinstance(message, HumanMessage):
            last_user_at = len(text)
        text += _message_text(message)
        if isinstance(message, SystemMessage) and message.content == APP.system_prompt:
            app_end = len(text)
    if not any(isinstance(m, HumanMessage) for m in messages):
        last_user_at = len(text)
    tokens = count_tokens_approximately(messages, tools=schemas or None) + extra_tokens
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
    kept = sum(cur.text.startswith(prev.text[: prev.last_user_at]) for prev, cur in zip(calls, calls[1:]))
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


def _summary_schema_tokens() -> int:
    """Tokens of the MemorySummaryOutput schema memory_agent's summarizer is given with every call."""
    from memory_agent.schemas import MemorySummaryOutput

    return count_tokens_approximately([], tools=[convert_to_openai_tool(MemorySummaryOutput)])


def model_side_systems(memory_settings: dict[str, Any] | None = None) -> list[System]:
    """memory_agent as the other stages run it (no user: conversation memory alone, as (b) has), memory_agent
    with a user (recall on: its block in every round), (a) and (b)."""
    recalling = MemoryAgentSystem(app=APP, user_id=USER, **(memory_settings or {}))
    recalling.name = "memory_agent_recall"
    return [MemoryAgentSystem(app=APP, **(memory_settings or {})), recalling, FullHistorySystem(APP), MiddlewareSystem(APP)]


async def run_system(system: System, server_url: str, rounds: int, block_rounds: int = 50) -> dict[str, Any]:
    """`rounds` rounds of one conversation; every chat and summarizer call kept and priced."""
    await system.open(server_url)
    try:
        system.set_latency(0.0)
        system.summarizer_stats.keep_prompts = True
        chat_calls: list[Call] = []
        for n in range(1, rounds + 1):
            await system.round("model-side", n)
            given = system.chat.last_input
            last_user = next(m for m in reversed(given) if isinstance(m, HumanMessage))
            answer = count_tokens_approximately([AIMessage(assistant_reply(str(last_user.text)))])
            chat_calls.append(call_of(given, system.chat.tools, answer))
            if isinstance(system, MemoryAgentSystem) and n % block_rounds == 0:
                await system.drain()
        if isinstance(system, MemoryAgentSystem):
            await system.drain()
        stats = system.summarizer_stats
        schema = _summary_schema_tokens() if isinstance(system, MemoryAgentSystem) else 0
        summary_calls = [call_of(p, [], out, schema) for p, out in zip(stats.prompts, stats.output_tokens)]
    finally:
        await system.close()
    app_tokens = count_tokens_approximately([SystemMessage(APP.system_prompt or "")], tools=[
        convert_to_openai_tool(t) for t in APP.tools
    ])
    per_1000 = 1000 / rounds
    result: dict[str, Any] = {
        "rounds": rounds,
        "summarizer_calls_per_1000_rounds": len(summary_calls) * per_1000,
        "summarizer_input_tokens_per_1000_rounds": sum(c.tokens for c in summary_calls) * per_1000,
        "summarizer_output_tokens_per_1000_rounds": sum(c.output_tokens for c in summary_calls) * per_1000,
        "prompt_tokens_per_round": statistics.fmean(c.tokens for c in chat_calls),
        "conversation_prompt_tokens_per_round": statistics.fmean(c.tokens for c in chat_calls) - app_tokens,
        "app_prompt_tokens": app_tokens,
        "prefix_kept_share": prefix_kept_share(chat_calls),
        "cached_input_share": {},
        "dollars_per_1000_rounds": {},
    }
    chat_tokens = sum(c.tokens for c in chat_calls)
    for prices in PRICE_SETS:
        chat = price_calls(chat_calls, prices, chat=True)
        summarizer = price_calls(summary_calls, prices, chat=False)
        result["cached_input_share"][prices.name] = chat["read_tokens"] / chat_tokens
        parts = {
            "chat_input": chat["input"] * per_1000,
            "chat_output": chat["output"] * per_1000,
            "summarizer": (summarizer["input"] + summarizer["output"]) * per_1000,
        }
        result["dollars_per_1000_rounds"][prices.name] = {"total": sum(parts.values()), **parts}
    return result


MODEL_SIDE_SYSTEMS = ("memory_agent", "memory_agent_recall", "full_history", "summarization_middleware")


async def model_side_stage(
    server_url: str,
    rounds: int = 1000,
    memory_settings: dict[str, Any] | None = None,
    only: tuple[str, ...] = MODEL_SIDE_SYSTEMS,
) -> dict[str, Any]:
    """The stage: each system in turn (fresh database each), then the ratios to (b) and the targets."""
    results: dict[str, Any] = {
        "rounds": rounds,
        "app": {"system_prompt_tokens": count_tokens_approximately([SystemMessage(APP.system_prompt or "")]),
                "tools": [t.name for t in APP.tools]},
        "price_sets": {p.name: p.describe() for p in PRICE_SETS},
    }
    for system in model_side_systems(memory_settings):
        if system.name in only:
            results[system.name] = await run_system(system, server_url, rounds)
    if "memory_agent" in results and "summarization_middleware" in results:
        results["targets"] = model_side_targets(results)
    return results


def model_side_targets(results: dict[str, Any]) -> list[dict[str, Any]]:
    ours, theirs = results["memory_agent"], results["summarization_middleware"]

    def ratio(path: str) -> float:
        return ours[path] / theirs[path] if theirs[path] else float("nan")

    checks = [
        ("summarizer calls per 1,000 rounds <= 2x (b)'s", ratio("summarizer_calls_per_1000_rounds"), 2.0),
        ("summarizer input tokens per 1,000 rounds <= 2x (b)'s", ratio("summarizer_input_tokens_per_1000_rounds"), 2.0),
        (
            "chat prompt tokens per round, the conversation's part (app prompt and tools aside), <= 0.5x (b)'s",
            ratio("conversation_prompt_tokens_per_round"),
            0.5,
        ),
        ("rounds whose input extends the previous round's (all but its last user message) >= 0.8",
         ours["prefix_kept_share"], 0.8),
    ]
    targets = [{"target": n, "value": v, "limit": lim, "holds": v <= lim} for n, v, lim in checks[:3]]
    name, value, limit = checks[3]
    targets.append({"target": name, "value": value, "limit": limit, "holds": value >= limit})
    for prices in PRICE_SETS:
        a = ours["dollars_per_1000_rounds"][prices.name]["total"]
        b = theirs["dollars_per_1000_rounds"][prices.name]["total"]
        targets.append(
            {"target": f"dollars per 1,000 rounds at {prices.name} prices <= 0.5x (b)'s", "value": a / b,
             "limit": 0.5, "holds": a / b <= 0.5}
        )
    return targets
