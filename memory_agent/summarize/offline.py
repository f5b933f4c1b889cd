"""OfflineSummaryModel: a deterministic, network-free stand-in for the summarizer model.

It reads the prompt MemoryAgent builds and keeps one short line per user/assistant message inside the
window, carrying forward the previous memory's lines whose sequence is still inside it. Its structured items
come from long_term.extract.extract_items over the window's user lines (`[seq N] user: text`), read in full:
a line the previous memory shortened is left out of extraction rather than read cut. Used by the demo
when no OpenAI key or base URL is configured, and by tests that need a real summarizer shape.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult

from memory_agent.long_term.extract import Statement, extract_items

_WINDOW = re.compile(r"^Window: sequences (\d+)-(\d+)\.$", re.MULTILINE)
_LINE = re.compile(r"^(?:- )?\[seq (\d+)\] (user|assistant): (.*)$", re.MULTILINE)


def offline_summary(prompt_text: str, *, width: int = 90) -> str:
    window = _WINDOW.search(prompt_text)
    window_start = int(window.group(1)) if window else 0
    kept: dict[int, str] = {}
    for match in _LINE.finditer(prompt_text):
        sequence = int(match.group(1))
        if sequence < window_start:
            continue  # outside the sliding window: dropped
        text = match.group(3).strip()
        if len(text) > width:
            text = text[: width - 1].rstrip() + "…"
        kept[sequence] = f"- [seq {sequence}] {match.group(2)}: {text}"
    return "\n".join(kept[s] for s in sorted(kept)) or "- (nothing to remember)"


def offline_items(prompt_text: str) -> dict[str, Any]:
    """The five item lists of the window's user messages, deterministically, as tool-call arguments."""
    window = _WINDOW.search(prompt_text)
    window_start = int(window.group(1)) if window else 0
    statements: dict[int, Statement] = {}
    for match in _LINE.finditer(prompt_text):
        sequence, role, text = int(match.group(1)), match.group(2), match.group(3).strip()
        # A previous memory's line that ends in "…" was cut by offline_summary: read when it was new, in full.
        shortened = match.group(0).startswith("- ") and text.endswith("…")
        if sequence >= window_start and not shortened:
            statements[sequence] = Statement(sequence, role, text)
    items = extract_items(statements[s] for s in sorted(statements))
    return items.model_dump(mode="json")


class OfflineSummaryModel(BaseChatModel):
    """Answers every call with a MemorySummaryOutput tool call built by `offline_summary`."""

    model_name: str = "offline-extractive-summarizer"

    @property
    def _llm_type(self) -> str:
        return "memory-agent-offline"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> OfflineSummaryModel:
        return self

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        prompt_text = "\n".join(str(m.text) for m in messages)
        summary = offline_summary(prompt_text)
        items = offline_items(prompt_text)
        message = AIMessage(
            content="",
            tool_calls=[
                {
                    "name": "MemorySummaryOutput",
                    "args": {"summary": summary, **items},
                    "id": f"call_{uuid.uuid4().hex[:12]}",
                }
            ],
        )
        return ChatResult(generations=[ChatGeneration(message=message)])
