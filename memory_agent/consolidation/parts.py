"""A period's material within the model's budget: one call when it fits, else parts that each fit, then their
insights consolidated together (again in parts while they do not fit), so a day of 100,000 items is consolidated
by a context-limited model instead of failing every night with `covered_until` stuck before it.

Sizes are estimated as memory_agent.tokens counts them (4 characters a token). A single line longer than a part
is cut to fit. The combining calls see the parts' insights as '- (importance) text' lines, which the
consolidation prompt reads as notes like any other; when they stop shrinking, the least important are left out
of the final call (a bounded number of calls, never a loop on a model that restates everything).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from memory_agent.consolidation.model import CONSOLIDATE_PROMPT, ConsolidationOutput
from memory_agent.llm import LLMCall
from memory_agent.tokens import CHARS_PER_TOKEN

# Room left in each call for the instructions, the message framing and the header (estimated generously).
OVERHEAD_TOKENS = 200 + len(CONSOLIDATE_PROMPT) // CHARS_PER_TOKEN
MAX_COMBINING_ROUNDS = 3


def _tokens(line: str) -> int:
    return (len(line) + 1) // CHARS_PER_TOKEN + 1  # the line and its newline


def split_material(lines: list[str], budget_tokens: int) -> list[list[str]]:
    """`lines` in order, in parts of at most `budget_tokens` each; a longer line is cut to fit a part alone."""
    cap_chars = max(budget_tokens - 1, 1) * CHARS_PER_TOKEN - 1
    parts: list[list[str]] = [[]]
    used = 0
    for line in lines:
        if _tokens(line) > budget_tokens:
            line = line[:cap_chars]
        cost = _tokens(line)
        if parts[-1] and used + cost > budget_tokens:
            parts.append([])
            used = 0
        parts[-1].append(line)
        used += cost
    return parts


def _insight_lines(outputs: list[ConsolidationOutput]) -> list[str]:
    lines = [f"- ({i.importance:.2f}) {' '.join(i.text.split())}" for o in outputs for i in o.insights]
    # A part the model answered without insights still counts through its text.
    lines += [f"- {' '.join(o.summary.split())}" for o in outputs if not o.insights and o.summary.strip()]
    return lines


def _most_important(lines: list[str], budget_tokens: int) -> list[str]:
    """The lines that fit `budget_tokens`, the most important first chosen (an '- (0.80) …' line's score), kept in
    their order."""

    def score(position: int) -> float:
        text = lines[position]
        try:
            return float(text[3 : text.index(")")]) if text.startswith("- (") else 0.0
        except ValueError:
            return 0.0

    chosen, used = set(), 0
    for position in sorted(range(len(lines)), key=lambda p: -score(p)):
        cost = _tokens(lines[position])
        if used + cost <= budget_tokens:
            chosen.add(position)
            used += cost
    return [line for position, line in enumerate(lines) if position in chosen]


Ask = Callable[[str], Awaitable[tuple[Any, LLMCall] | str]]


async def consolidate_in_parts(
    ask: Ask, header: str, lines: list[str], max_input_tokens: int
) -> tuple[ConsolidationOutput, list[LLMCall]] | str:
    """ConsolidationOutput of `header` + `lines`, every prompt `ask` is given within `max_input_tokens`, and every
    call made; or what `ask` answered instead of a call (a guard that stopped it: guards.call_within_budget)."""
    budget = max(max_input_tokens - OVERHEAD_TOKENS - _tokens(header), 1)
    calls: list[LLMCall] = []
    for combining_round in range(MAX_COMBINING_ROUNDS + 1):
        parts = split_material(lines, budget)
        if len(parts) > 1 and combining_round == MAX_COMBINING_ROUNDS:
            parts = [_most_important(lines, budget)]
        outputs = []
        for part in parts:
            answer = await ask(header + "\n".join(part))
            if isinstance(answer, str):
                return answer
            output, call = answer
            calls.append(call)
            outputs.append(output)
        if len(outputs) == 1:
            return outputs[0], calls
        lines = _insight_lines(outputs)
    raise AssertionError("unreachable: the last round makes one call")
