"""The offline model: one deterministic, network-free chat model for every call memory_agent makes, used when no
OpenAI key or base URL is configured (the demo, tests, deployments without a model).

It answers the tool it is bound to. MemorySummaryOutput (the summarizer): one short line per user/assistant
message inside the window, carrying forward the previous memory's lines whose sequence is still inside it, and
structured items from llm.extract over the window's user lines (`[seq N] user: text`), read in full (a line
the previous memory shortened is left out of extraction rather than read cut). ConsolidationOutput or
BatchSummaryOutput (consolidation): the material's '- ' lines merged, one per key (the latest value wins) and one
per distinct text, importance scored by kind, with its token usage. Its name (model_name) is what the cost ledger
records: OFFLINE_SUMMARIZER, or OFFLINE_CONSOLIDATOR for OfflineConsolidationModel.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult

from memory_agent.llm.extract import Statement, extract_items
from memory_agent.schemas.items import normalize_content
from memory_agent.tokens import count_tokens

OFFLINE_SUMMARIZER = "offline-extractive-summarizer"
OFFLINE_CONSOLIDATOR = "offline-consolidator"
SUMMARY_TOOL = "MemorySummaryOutput"

_WINDOW = re.compile(r"^Window: sequences (\d+)-(\d+)\.$", re.MULTILINE)
_MAX_WORDS = re.compile(r"At most (\d+) words")
_MIN_WIDTH = 20  # the narrowest line: a few words of each message
_LINE = re.compile(r"^(?:- )?\[seq (\d+)\] (user|assistant): (.*)$", re.MULTILINE)


def offline_summary(prompt_text: str, *, width: int = 90) -> str:
    """One line per message of the window, each cut at `width` characters, narrower while the lines exceed the
    length the prompt asks for ("At most N words", as a model asked for it keeps to it); when even the narrowest
    lines exceed it, the oldest lines go (the newest line is always kept)."""
    window = _WINDOW.search(prompt_text)
    window_start = int(window.group(1)) if window else 0
    messages: dict[int, tuple[str, str]] = {}
    for match in _LINE.finditer(prompt_text):
        sequence = int(match.group(1))
        if sequence >= window_start:  # before the sliding window: dropped
            messages[sequence] = (match.group(2), match.group(3).strip())
    asked = _MAX_WORDS.search(prompt_text)
    budget = int(asked.group(1)) if asked else None
    while True:
        lines = [f"- [seq {s}] {role}: {_cut(text, width)}" for s, (role, text) in sorted(messages.items())]
        if budget is None or width <= _MIN_WIDTH or len(" ".join(lines).split()) <= budget:
            break
        width -= 5
    while budget is not None and len(lines) > 1 and len(" ".join(lines).split()) > budget:
        lines.pop(0)
    return "\n".join(lines) or "- (nothing to remember)"


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1].rstrip() + "…"


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


_NOTE = re.compile(r"^- (?:\((?P<importance>[01](?:\.\d+)?)\) )?(?P<text>.+)$", re.MULTILINE)
_KEYED = re.compile(r"^(?:item )?(?P<kind>fact|preference|decision|todo|entity) (?P<key>[^:\s]+): (?P<content>.+)$")
KIND_IMPORTANCE = {"decision": 0.9, "preference": 0.8, "fact": 0.7, "todo": 0.6, "entity": 0.3}
UNKEYED_IMPORTANCE = 0.4


def offline_consolidation(material: str) -> dict[str, Any]:
    """Merge the material's '- ' lines: one per key (the latest wins), one per distinct text; the arguments of a
    ConsolidationOutput call (summary, insights with their importance)."""
    kept: dict[str, dict[str, Any]] = {}
    for match in _NOTE.finditer(material):
        text = match["text"].strip()
        keyed = _KEYED.match(text)
        if keyed:
            slot = f"{keyed['kind']}:{keyed['key']}"
            importance = KIND_IMPORTANCE[keyed["kind"]]
        else:
            slot = normalize_content(text)
            importance = UNKEYED_IMPORTANCE
        if match["importance"] is not None:
            importance = float(match["importance"])
        kept.pop(slot, None)  # a later note of the same key replaces the earlier value, and moves last
        kept[slot] = {"text": text, "importance": importance}
    insights = list(kept.values())
    summary = "\n".join(f"- {insight['text']}" for insight in insights) or "(nothing to consolidate)"
    return {"summary": summary, "insights": insights}


def _tool_name(tool: Any) -> str | None:
    """A bound tool's name: a pydantic model's class name, or an OpenAI-format function's `name`."""
    if isinstance(tool, dict):
        return (tool.get("function") or tool).get("name")
    return getattr(tool, "__name__", None)


def counted_tool_call(
    messages: list[BaseMessage], tool_name: str, args: dict[str, Any], call_id: str | None = None
) -> ChatResult:
    """The answer to `messages`: one call of `tool_name` with `args`, with the usage a provider reports for it
    (the prompt's tokens in, the call's JSON arguments out), so that the cost ledger records it as it would a
    real model's call."""
    tokens_in = count_tokens(messages)
    tokens_out = count_tokens([AIMessage(json.dumps(args))])
    message = AIMessage(
        content="",
        tool_calls=[{"name": tool_name, "args": args, "id": call_id or f"call_{uuid.uuid4().hex[:12]}"}],
        usage_metadata={"input_tokens": tokens_in, "output_tokens": tokens_out, "total_tokens": tokens_in + tokens_out},
    )
    return ChatResult(generations=[ChatGeneration(message=message)])


class OfflineModel(BaseChatModel):
    """Answers every call with a call of the tool it is bound to, its arguments built as the module says."""

    model_name: str = OFFLINE_SUMMARIZER
    tool_name: str = SUMMARY_TOOL

    @property
    def _llm_type(self) -> str:
        return "memory-agent-offline"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> OfflineModel:
        # The same instance when it already answers that tool: a subclass keeping state sees every call.
        name = _tool_name(tools[0]) if tools else None
        return self if name is None or name == self.tool_name else self.model_copy(update={"tool_name": name})

    def answer(self, material: str) -> dict[str, Any]:
        """The arguments of a consolidation call (ConsolidationOutput or BatchSummaryOutput) over `material`."""
        consolidated = offline_consolidation(material)
        if self.tool_name == "BatchSummaryOutput":
            return {"summary": consolidated["summary"]}
        return consolidated

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        call_id = f"call_{uuid.uuid4().hex[:12]}"
        if self.tool_name == SUMMARY_TOOL:
            prompt_text = "\n".join(str(m.text) for m in messages)
            args = {"summary": offline_summary(prompt_text), **offline_items(prompt_text)}
            message = AIMessage(content="", tool_calls=[{"name": SUMMARY_TOOL, "args": args, "id": call_id}])
            return ChatResult(generations=[ChatGeneration(message=message)])
        return counted_tool_call(messages, self.tool_name, self.answer(str(messages[-1].text)), call_id)


# The summarizer's name for it (the package's public name since the start).
OfflineSummaryModel = OfflineModel


class OfflineConsolidationModel(OfflineModel):
    """The offline model in its consolidation role: recorded as OFFLINE_CONSOLIDATOR."""

    model_name: str = OFFLINE_CONSOLIDATOR
    tool_name: str = "ConsolidationOutput"
