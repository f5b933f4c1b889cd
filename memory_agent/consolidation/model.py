"""The consolidation model: one call per period or batch, through call_consolidation_model only.

That function is the hook a cost ledger wraps: it returns what the model answered and a ModelCall with the
model's name and its input and output tokens (the provider's usage when it reports one, else an estimate).
OfflineConsolidationModel is a deterministic, network-free stand-in used by tests and the demo: it merges
lines that say the same thing, keeps the most recent value of a key, and scores importance by kind.
"""

from __future__ import annotations

import logging
import os
import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.messages.utils import count_tokens_approximately
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import AfterValidator, BaseModel, Field

from memory_agent.errors import SummarizationError
from memory_agent.schemas.items import normalize_content
from memory_agent.settings import MemorySettings

logger = logging.getLogger("memory_agent.consolidation")

CONSOLIDATE_PROMPT = (
    "You consolidate a user's notes into long-term memory. Merge redundant information; when notes contradict "
    "each other keep the most recent value (notes are oldest first); keep every distinct fact. Answer with a "
    "condensed text and a list of insights, each one short sentence with an importance from 0 to 1 (how much it "
    "matters in the long run)."
)
BATCH_PROMPT = (
    "Summarize the following set of a user's long-term memories into a concise long-term summary. Preserve "
    "important facts, preferences and decisions; drop trivial chitchat and one-off questions."
)


def _storable(text: str) -> str:
    # Model output is untrusted: a NUL (which PostgreSQL text refuses) or a lone surrogate (which UTF-8 cannot
    # encode) failed the note's insert at every nightly run. Replaced as conversation.messages.storable_text does
    # (that layer is not importable from here).
    return text.replace("\x00", "\ufffd").encode("utf-8", "replace").decode("utf-8")


StorableText = Annotated[str, AfterValidator(_storable)]


class ScoredInsight(BaseModel):
    text: StorableText = Field(description="One insight in one short sentence.")
    importance: float = Field(ge=0.0, le=1.0, description="0-1: how much it matters in the long run.")


class ConsolidationOutput(BaseModel):
    """The consolidated notes: a condensed text and its scored insights."""

    summary: StorableText = Field(description="The condensed text, every distinct fact kept.")
    insights: list[ScoredInsight] = Field(default_factory=list)


class BatchSummaryOutput(BaseModel):
    """The summary of a batch of memories."""

    summary: StorableText = Field(description="The long-term summary of the batch.")


@dataclass(frozen=True)
class Insight:
    text: str
    importance: float


@dataclass(frozen=True)
class ModelCall:
    """One model call, for a cost ledger: which model, and its tokens."""

    model: str
    input_tokens: int
    output_tokens: int


def model_name(model: BaseChatModel) -> str:
    return str(getattr(model, "model_name", None) or getattr(model, "model", None) or type(model).__name__)


def consolidation_prompt(instructions: str, material: str) -> list[BaseMessage]:
    """The messages a consolidation call sends (what its cost is estimated from before it is made)."""
    return [SystemMessage(instructions), HumanMessage(material)]


async def call_consolidation_model(
    model: BaseChatModel, instructions: str, material: str, schema: type[BaseModel]
) -> tuple[Any, ModelCall]:
    """The one place consolidation calls a model: `schema` parsed from the answer, and the call's tokens."""
    messages = consolidation_prompt(instructions, material)
    try:
        answer = await model.with_structured_output(schema, include_raw=True).ainvoke(messages)
    except Exception as exc:
        raise SummarizationError(f"consolidation model {model_name(model)!r} failed: {exc}") from exc
    result: dict[str, Any] = answer if isinstance(answer, dict) else {}
    parsed = result.get("parsed")
    if not isinstance(parsed, schema):
        raise SummarizationError(
            f"consolidation model {model_name(model)!r} gave no {schema.__name__}: {result.get('parsing_error')}"
        )
    raw = result.get("raw")
    usage = getattr(raw, "usage_metadata", None) or {}
    call = ModelCall(
        model_name(model),
        int(usage.get("input_tokens") or count_tokens_approximately(messages)),
        int(usage.get("output_tokens") or count_tokens_approximately([AIMessage(parsed.model_dump_json())])),
    )
    return parsed, call


def default_consolidation_model(settings: MemorySettings) -> BaseChatModel:
    """ChatOpenAI(consolidation_model, default the summarizer's memory_model) with an OpenAI key or base URL,
    else the offline consolidator."""
    if os.environ.get("OPENAI_API_KEY") or os.environ.get("OPENAI_BASE_URL"):
        from memory_agent.summarize.models import openai_chat_model

        name = settings.consolidation.consolidation_model or settings.memory.model
        return openai_chat_model(name, timeout=settings.summary.timeout_s, max_retries=1)
    logger.warning("No OPENAI_API_KEY or OPENAI_BASE_URL: using the offline consolidator (no network)")
    return OfflineConsolidationModel()


# --- the offline consolidator ---

_NOTE = re.compile(r"^- (?:\((?P<importance>[01](?:\.\d+)?)\) )?(?P<text>.+)$", re.MULTILINE)
_KEYED = re.compile(r"^(?:item )?(?P<kind>fact|preference|decision|todo|entity) (?P<key>[^:\s]+): (?P<content>.+)$")
KIND_IMPORTANCE = {"decision": 0.9, "preference": 0.8, "fact": 0.7, "todo": 0.6, "entity": 0.3}
UNKEYED_IMPORTANCE = 0.4


def offline_consolidation(material: str) -> ConsolidationOutput:
    """Merge the material's '- ' lines: one per key (the latest wins), one per distinct text."""
    kept: dict[str, ScoredInsight] = {}
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
        kept[slot] = ScoredInsight(text=text, importance=importance)
    insights = list(kept.values())
    summary = "\n".join(f"- {insight.text}" for insight in insights) or "(nothing to consolidate)"
    return ConsolidationOutput(summary=summary, insights=insights)


class OfflineConsolidationModel(BaseChatModel):
    """Answers ConsolidationOutput or BatchSummaryOutput tool calls built by offline_consolidation."""

    model_name: str = "offline-consolidator"
    tool_name: str = "ConsolidationOutput"

    @property
    def _llm_type(self) -> str:
        return "memory-agent-offline-consolidator"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> OfflineConsolidationModel:
        name = getattr(tools[0], "__name__", None) if tools else None
        return self.model_copy(update={"tool_name": name or self.tool_name})

    def answer(self, material: str) -> dict[str, Any]:
        consolidated = offline_consolidation(material)
        if self.tool_name == "BatchSummaryOutput":
            return {"summary": consolidated.summary}
        return consolidated.model_dump()

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        material = str(messages[-1].text)
        args = self.answer(material)
        tokens_in = count_tokens_approximately(messages)
        tokens_out = count_tokens_approximately([AIMessage(str(args))])
        message = AIMessage(
            content="",
            tool_calls=[{"name": self.tool_name, "args": args, "id": f"call_{uuid.uuid4().hex[:12]}"}],
            usage_metadata={
                "input_tokens": tokens_in,
                "output_tokens": tokens_out,
                "total_tokens": tokens_in + tokens_out,
            },
        )
        return ChatResult(generations=[ChatGeneration(message=message)])
