"""OfflineSummaryModel: a deterministic, network-free stand-in for the summarizer model.

It reads the prompt MemoryAgent builds and keeps one short line per user/assistant message inside the
window, carrying forward the previous memory's lines whose sequence is still inside it. Used by the demo
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
        message = AIMessage(
            content="",
            tool_calls=[
                {"name": "MemorySummaryOutput", "args": {"summary": summary}, "id": f"call_{uuid.uuid4().hex[:12]}"}
            ],
        )
        return ChatResult(generations=[ChatGeneration(message=message)])
