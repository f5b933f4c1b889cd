"""The context budget: the evolution plan's guardrails on what a round gives the model.

Two limits besides the message window, both off by default (MemorySettings):
- `max_message_tokens`: a single message longer than this is cut, with a visible marker saying so;
- `max_context_tokens`: the gap is trimmed from its oldest round until the context fits. A round (the user
  message and every AI and tool message up to the final answer) is dropped whole, so an AI tool call never
  loses its results nor a tool result its call; the current input is never dropped.

Pure functions over LangChain messages; tokens are `memory_agent.tokens.count_tokens`. Round start (round_start.py)
applies them and records what was cut in the round's metrics.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from memory_agent.tokens import CHARS_PER_TOKEN, count_tokens

TRUNCATION_MARKER = "… [truncated by memory_agent: {over} tokens over the cap]"
UNANSWERED_TOOL_CALL = "No result: the round ended before this tool call was answered."


def split_rounds(messages: Sequence[BaseMessage]) -> list[list[BaseMessage]]:
    """Consecutive stored messages grouped into rounds.

    A round starts at a user (or system) message that follows an AI or tool message, and never while a
    tool call of the round before is still unanswered.
    """
    rounds: list[list[BaseMessage]] = []
    pending: set[str] = set()
    for message in messages:
        starts = (
            isinstance(message, (HumanMessage, SystemMessage))
            and bool(rounds)
            and isinstance(rounds[-1][-1], (AIMessage, ToolMessage))
            and not pending
        )
        if starts or not rounds:
            rounds.append([])
        rounds[-1].append(message)
        if isinstance(message, AIMessage):
            pending.update(call["id"] for call in message.tool_calls if call["id"])
        elif isinstance(message, ToolMessage):
            pending.discard(message.tool_call_id)
    return rounds


def close_unanswered_tool_calls(
    messages: Sequence[BaseMessage], *, keep_open_at_end: bool = False
) -> tuple[list[BaseMessage], list[str]]:
    """`messages` where every AI tool call without a result gets one (a ToolMessage saying the round ended
    before an answer), placed after the call's other results; and the ids of the calls so closed.

    Chat APIs reject a history with an unanswered call. Only the model's view changes: stored messages stay as
    they happened. With `keep_open_at_end`, the calls of a final AI message stay open (the graph may be about
    to run them).
    """
    result: list[BaseMessage] = []
    closed: list[str] = []
    pending: list[str] = []

    def close_pending() -> None:
        for call_id in pending:
            result.append(ToolMessage(UNANSWERED_TOOL_CALL, tool_call_id=call_id, id=f"memory_agent:closed:{call_id}"))
            closed.append(call_id)
        pending.clear()

    for message in messages:
        if isinstance(message, ToolMessage):
            if message.tool_call_id in pending:
                pending.remove(message.tool_call_id)
        else:
            close_pending()
        result.append(message)
        if isinstance(message, AIMessage):
            pending.extend(call["id"] for call in message.tool_calls if call["id"])
    if not (keep_open_at_end and messages and isinstance(messages[-1], AIMessage)):
        close_pending()
    return result, closed


def _cut_text(content: Any, keep_chars: int, marker: str) -> Any:
    """`content` with at most `keep_chars` characters of text, then `marker`; other blocks are kept."""
    if isinstance(content, str):
        return content[: max(0, keep_chars)] + marker
    blocks: list[Any] = []
    left = max(0, keep_chars)
    for block in content:
        text = block if isinstance(block, str) else block.get("text") if block.get("type") == "text" else None
        if not isinstance(text, str):
            blocks.append(block)
            continue
        kept = text[:left]
        left -= len(kept)
        if kept:
            blocks.append(kept if isinstance(block, str) else {**block, "text": kept})
    blocks.append({"type": "text", "text": marker})
    return blocks


def truncate_message(message: BaseMessage, max_tokens: int) -> tuple[BaseMessage, int]:
    """(message cut to at most `max_tokens` with a marker, tokens it was over); over is 0 when it fits.

    Only text is cut: tool calls, ids and non-text blocks stay, so a message made of those may stay over
    (and a message without text is returned as it is, with 0).
    """
    tokens = count_tokens([message])
    over = tokens - max_tokens
    if over <= 0 or not str(message.text):
        return message, 0  # nothing to cut: only the context budget can drop it (with its round)
    marker = TRUNCATION_MARKER.format(over=over)
    text_chars = len(str(message.text))
    keep = text_chars - over * CHARS_PER_TOKEN - len(marker)
    while True:
        candidate = message.model_copy(update={"content": _cut_text(message.content, keep, marker)})
        still_over = count_tokens([candidate]) - max_tokens
        if still_over <= 0 or keep <= 0:
            return candidate, over
        keep -= max(1, still_over * CHARS_PER_TOKEN)


@dataclass
class BudgetResult:
    """What fits: the kept gap and current messages (possibly cut), the context built from them, and what was cut."""

    gap: list[BaseMessage]
    current: list[BaseMessage]
    context: list[BaseMessage]
    tokens_before: int
    tokens_after: int
    dropped_rounds: int = 0
    dropped_messages: int = 0
    truncated_messages: list[dict[str, Any]] = field(default_factory=list)
    over_budget: bool = False

    @property
    def applied(self) -> bool:
        return bool(self.dropped_rounds or self.truncated_messages or self.over_budget)

    def record(self) -> dict[str, Any]:
        """The round_metrics `truncation` document."""
        return {
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
            "dropped_rounds": self.dropped_rounds,
            "dropped_messages": self.dropped_messages,
            "truncated_messages": self.truncated_messages,
            "over_budget": self.over_budget,
        }


def apply_budget(
    gap: Sequence[BaseMessage],
    current: Sequence[BaseMessage],
    build: Callable[[list[BaseMessage]], list[BaseMessage]],
    *,
    max_context_tokens: int | None = None,
    max_message_tokens: int | None = None,
) -> BudgetResult:
    """Fit `build(gap + current)` (the model's context) into the budget.

    First every message above `max_message_tokens` is cut; then, while the context is above
    `max_context_tokens`, the oldest round of the gap is dropped. `over_budget` says the context is still
    too long once the gap is empty (the current input is never dropped).
    """
    gap, current = list(gap), list(current)
    context = build([*gap, *current])
    tokens = tokens_before = count_tokens(context)  # counted once when no limit applies (every round)
    truncated: list[dict[str, Any]] = []
    if max_message_tokens is not None:
        cut: list[list[BaseMessage]] = [[], []]
        for part, messages in enumerate((gap, current)):
            for message in messages:
                kept, over = truncate_message(message, max_message_tokens)
                if over:
                    truncated.append(
                        {"id": message.id, "role": message.type, "part": ("gap", "current")[part], "tokens_over": over}
                    )
                cut[part].append(kept)
        gap, current = cut
        if truncated:
            context = build([*gap, *current])
            tokens = count_tokens(context)
    dropped_rounds = dropped_messages = 0
    if max_context_tokens is not None and tokens > max_context_tokens:
        rounds = split_rounds(gap)
        while rounds and tokens > max_context_tokens:
            dropped = rounds.pop(0)
            dropped_rounds += 1
            dropped_messages += len(dropped)
            gap = [m for r in rounds for m in r]
            context = build([*gap, *current])
            tokens = count_tokens(context)
    return BudgetResult(
        gap=gap,
        current=current,
        context=context,
        tokens_before=tokens_before,
        tokens_after=tokens,
        dropped_rounds=dropped_rounds,
        dropped_messages=dropped_messages,
        truncated_messages=truncated,
        over_budget=max_context_tokens is not None and tokens > max_context_tokens,
    )
