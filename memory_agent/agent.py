"""MemoryAgent: the incremental sliding-window summarizer (prompt + model call, no SQL)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.exceptions import OutputParserException
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.messages.utils import count_tokens_approximately

from pydantic import ValidationError

from memory_agent import resources
from memory_agent.errors import SummarizationError
from memory_agent.schemas import MemorySummaryOutput


@dataclass(frozen=True)
class SequencedMessage:
    """A stored message with its place in the conversation."""

    sequence_number: int
    message: BaseMessage


@dataclass(frozen=True)
class SummaryResult:
    text: str
    input_tokens: int
    output_tokens: int
    model_name: str


def model_name_of(model: BaseChatModel) -> str:
    for attribute in ("model_name", "model", "model_id"):
        value = getattr(model, attribute, None)
        if isinstance(value, str) and value:
            return value
    return type(model).__name__


def render_message(item: SequencedMessage) -> str:
    """One line per message, `[seq N] role: text`, tool calls and results spelled out."""
    message = item.message
    text = str(message.text).strip()
    if isinstance(message, HumanMessage):
        line = f"user: {text}"
    elif isinstance(message, AIMessage):
        calls = "; ".join(
            f"called {call['name']}({json.dumps(call.get('args', {}), ensure_ascii=False, default=str)})"
            for call in message.tool_calls
        )
        line = "assistant: " + " | ".join(part for part in (text, calls) if part)
    elif isinstance(message, ToolMessage):
        line = f"tool {message.name or ''} result: {text}".replace("tool  result", "tool result")
    elif isinstance(message, SystemMessage):
        line = f"system: {text}"
    else:
        line = f"{message.type}: {text}"
    return f"[seq {item.sequence_number}] {line}"


class MemoryAgent:
    """Turns a base memory plus the messages after it into the memory of a sliding window."""

    def __init__(self, model: BaseChatModel, *, max_words: int = 250) -> None:
        self.model = model
        self.model_name = model_name_of(model)
        self.max_words = max_words
        self._structured = model.with_structured_output(MemorySummaryOutput, include_raw=True)

    def build_prompt(
        self,
        *,
        previous_summary: str | None,
        base_end_sequence: int | None,
        new_messages: Sequence[SequencedMessage],
        window_start_seq: int,
        window_end_seq: int,
    ) -> list[BaseMessage]:
        system = resources.prompt("summarize_system").format(
            window_start=window_start_seq, max_words=self.max_words
        )
        user = resources.prompt("summarize_user").format(
            window_start=window_start_seq,
            window_end=window_end_seq,
            base_end="-" if base_end_sequence is None else base_end_sequence,
            previous_summary=previous_summary if previous_summary else "(none: this is the first memory)",
            new_start=new_messages[0].sequence_number if new_messages else window_end_seq,
            new_messages="\n".join(render_message(item) for item in new_messages),
        )
        return [SystemMessage(system), HumanMessage(user)]

    async def summarize(self, **window: Any) -> SummaryResult:
        """Call the model once with `build_prompt(**window)`; raises SummarizationError on an unusable answer."""
        prompt = self.build_prompt(**window)
        try:
            # No callbacks of any caller's run (an empty list replaces inherited ones; None would not), and the
            # background task starts from a fresh context: summarizer tokens never reach a user's stream.
            answer: dict[str, Any] = await self._structured.ainvoke(prompt, config={"callbacks": []})
        except (ValidationError, OutputParserException, ValueError) as exc:
            # Some providers' structured-output paths raise on a bad answer instead of reporting it.
            raise SummarizationError(f"summarizer returned unparseable output: {exc}") from exc
        parsed = answer.get("parsed")
        if answer.get("parsing_error") is not None or not isinstance(parsed, MemorySummaryOutput):
            raw = answer.get("raw")
            shown = str(getattr(raw, "content", raw))[:200]
            raise SummarizationError(
                f"summarizer returned unparseable output ({answer.get('parsing_error')!r}); raw: {shown!r}"
            )
        text = parsed.summary.strip()
        if not text:
            raise SummarizationError("summarizer returned an empty summary")
        usage = getattr(answer.get("raw"), "usage_metadata", None) or {}
        return SummaryResult(
            text=text,
            input_tokens=usage.get("input_tokens") or count_tokens_approximately(prompt),
            output_tokens=usage.get("output_tokens") or count_tokens_approximately([AIMessage(text)]),
            model_name=self.model_name,
        )
