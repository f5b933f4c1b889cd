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

import statistics
import sys
import time
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.messages.utils import count_tokens_approximately
from langchain_core.tools import tool
from langchain_core.utils.function_calling import convert_to_openai_tool

from benchmarks.fakes import _WORDS, assistant_reply, user_message
from benchmarks.model_calls import Call, call_of, prefix_kept_share, price_calls
from benchmarks.prices import PRICE_SETS
from benchmarks.systems import App, FullHistorySystem, MemoryAgentSystem, MiddlewareSystem, System


def log(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def app_system_prompt(tokens: int = 2000) -> str:
    """A support assistant's instructions, about `tokens` tokens (count_tokens_approximately), deterministic."""
    lines = ["You are the support assistant of an online shop. Follow these rules in every answer."]
    n = 0
    while count_tokens_approximately([SystemMessage("\n".join(lines))]) < tokens:
        n += 1
        words = [_WORDS[(n * 7 + k * 3) % len(_WORDS)] for k in range(14)]
        lines.append(
            f"{n}. When the customer asks about the {words[0]} or the {words[1]}, " + " ".join(words[2:]) + "."
        )
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


def _summary_tools(system: System) -> list[Any]:
    """The tool memory_agent's summarizer is given with every call, as sent (its schema is input too); (b)'s has
    none."""
    from memory_agent.summarize.agent import SUMMARY_TOOL

    return [SUMMARY_TOOL] if isinstance(system, MemoryAgentSystem) else []


async def run_system(system: System, server_url: str, rounds: int) -> dict[str, Any]:
    """`rounds` rounds of one conversation; every chat and summarizer call kept, then priced."""
    await system.open(server_url)
    try:
        system.set_latency(0.0)
        system.summarizer_stats.keep_prompts = True
        chat_calls: list[Call] = []
        for n in range(1, rounds + 1):
            await system.round("model-side", n)
            chat_calls.append(chat_call(system.chat.last_input, system.chat.tools))
            if isinstance(system, MemoryAgentSystem):
                # A user's next message comes after a summary is done (seconds with a real model): the figures
                # do not depend on how this machine schedules the background summary against the next round.
                await system.drain()
        stats, tools = system.summarizer_stats, _summary_tools(system)
        summary_calls = [call_of(p, tools, out) for p, out in zip(stats.prompts, stats.output_tokens)]
    finally:
        await system.close()
    schema = count_tokens_approximately([], tools=[convert_to_openai_tool(t) for t in tools]) if tools else 0
    return priced(rounds, chat_calls, summary_calls, schema)


def chat_call(given: list[BaseMessage], tools: list[Any]) -> Call:
    """A chat-model call and its answer (the fake model's: the same length in every system)."""
    last_user = next(m for m in reversed(given) if isinstance(m, HumanMessage))
    answer = count_tokens_approximately([AIMessage(assistant_reply(str(last_user.text)))])
    return call_of(given, tools, answer, app_prompt=APP.system_prompt)


def floor_calls(rounds: int) -> list[Call]:
    """What no system goes below: the app's prompt, its tools and the round's question, nothing of the past."""
    head = [SystemMessage(APP.system_prompt or "")]
    return [chat_call([*head, HumanMessage(user_message(n))], list(APP.tools)) for n in range(1, rounds + 1)]


def priced(rounds: int, chat_calls: list[Call], summary_calls: list[Call], schema: int = 0) -> dict[str, Any]:
    """One system's figures from its calls, per 1,000 rounds where counted."""
    schemas = [convert_to_openai_tool(t) for t in APP.tools]
    app_tokens = count_tokens_approximately([SystemMessage(APP.system_prompt or "")], tools=schemas)
    per_1000 = 1000 / rounds
    prompt = statistics.fmean(c.tokens for c in chat_calls)
    result: dict[str, Any] = {
        "rounds": rounds,
        "summarizer_calls_per_1000_rounds": len(summary_calls) * per_1000,
        # as billed: the prompt's messages and the tool schema the summarizer is given (memory_agent's)
        "summarizer_input_tokens_per_1000_rounds": sum(c.tokens for c in summary_calls) * per_1000,
        "summarizer_tool_schema_tokens_per_1000_rounds": schema * len(summary_calls) * per_1000,
        "summarizer_output_tokens_per_1000_rounds": sum(c.output_tokens for c in summary_calls) * per_1000,
        "prompt_tokens_per_round": prompt,
        "conversation_prompt_tokens_per_round": prompt - app_tokens,
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


def model_side_systems(memory_settings: dict[str, Any] | None = None) -> list[System]:
    """memory_agent as the other stages run it (no user: conversation memory alone, as (b) has), memory_agent
    with a user (recall on: its block in every round), (a) and (b)."""
    settings = memory_settings or {}
    recalling = MemoryAgentSystem(app=APP, user_id=USER, **settings)
    recalling.name = "memory_agent_recall"
    return [MemoryAgentSystem(app=APP, **settings), recalling, FullHistorySystem(APP), MiddlewareSystem(APP)]


MODEL_SIDE_SYSTEMS = ("memory_agent", "memory_agent_recall", "full_history", "summarization_middleware")


async def model_side_stage(
    server_url: str,
    rounds: int = 1000,
    memory_settings: dict[str, Any] | None = None,
    only: tuple[str, ...] = MODEL_SIDE_SYSTEMS,
) -> dict[str, Any]:
    """The stage: each system in turn (a fresh database each), the floor, then the targets against (b)."""
    results: dict[str, Any] = {
        "rounds": rounds,
        "app": {
            "system_prompt_tokens": count_tokens_approximately([SystemMessage(APP.system_prompt or "")]),
            "tools": [t.name for t in APP.tools],
        },
        "price_sets": {p.name: p.describe() for p in PRICE_SETS},
    }
    for system in model_side_systems(memory_settings):
        if system.name in only:
            log(f"  model side: {system.name}, {rounds} rounds")
            results[system.name] = await run_system(system, server_url, rounds)
    results["no_history_floor"] = priced(rounds, floor_calls(rounds), [])
    if "memory_agent" in results and "summarization_middleware" in results:
        results["targets"] = model_side_targets(results)
    return results


def model_side_targets(results: dict[str, Any]) -> list[dict[str, Any]]:
    """The issue's goals as ratios to (b) in the same run (the share as it is)."""
    ours, theirs = results["memory_agent"], results["summarization_middleware"]

    def ratio(key: str) -> float:
        return ours[key] / theirs[key] if theirs[key] else float("nan")

    checks: list[tuple[str, float, float, bool]] = [
        ("summarizer calls per 1,000 rounds <= 2x (b)'s", ratio("summarizer_calls_per_1000_rounds"), 2.0, False),
        (
            "summarizer input tokens per 1,000 rounds (tool schema included) <= 2x (b)'s",
            ratio("summarizer_input_tokens_per_1000_rounds"),
            2.0,
            False,
        ),
        (
            "chat prompt tokens per round, the conversation's part (app prompt and tools aside) <= 0.5x (b)'s",
            ratio("conversation_prompt_tokens_per_round"),
            0.5,
            False,
        ),
        (
            "share of rounds whose input extends the previous round's but its last user message >= 0.8",
            ours["prefix_kept_share"],
            0.8,
            True,
        ),
    ]
    for prices in PRICE_SETS:
        mine = ours["dollars_per_1000_rounds"][prices.name]["total"]
        base = theirs["dollars_per_1000_rounds"][prices.name]["total"]
        checks.append((f"dollars per 1,000 rounds at the {prices.name} prices <= 0.5x (b)'s", mine / base, 0.5, False))
    return [
        {"target": name, "value": value, "limit": limit, "holds": value >= limit if at_least else value <= limit}
        for name, value, limit, at_least in checks
    ]
