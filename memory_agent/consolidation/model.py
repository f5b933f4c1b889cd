"""The consolidation model: one call per period or batch, through call_consolidation_model only (tool calling,
else the provider's JSON-schema format, else JSON in text: llm.StructuredCaller).

That function is the hook a cost ledger wraps: it returns what the model answered and the call as an
llm.LLMCall (the model's name and its input and output tokens: the provider's usage when it reports one, else
an estimate). The prompts are prompts/consolidate.txt and prompts/batch_summary.txt; the offline model
(llm.OfflineConsolidationModel) answers them without a network.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Annotated, Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from pydantic import AfterValidator, BaseModel, Field, ValidationError

from memory_agent import resources
from memory_agent.errors import SummarizationError
from memory_agent.llm import LLMCall, Purpose, StructuredCaller, model_name, usage_of
from memory_agent.llm.calls import call_bound_s
from memory_agent.summarize.failures import describe

logger = logging.getLogger("memory_agent.consolidation")

# The instructions, as sent (a file's final newline is not part of them).
CONSOLIDATE_PROMPT = resources.prompt("consolidate").rstrip("\n")
BATCH_PROMPT = resources.prompt("batch_summary").rstrip("\n")


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


def consolidation_prompt(instructions: str, material: str) -> list[BaseMessage]:
    """The messages a consolidation call sends (what its cost is estimated from before it is made)."""
    return [SystemMessage(instructions), HumanMessage(material)]


async def call_consolidation_model(
    model: BaseChatModel, instructions: str, material: str, schema: type[BaseModel], purpose: Purpose = "consolidation"
) -> tuple[Any, LLMCall]:
    """The one place consolidation calls a model: `schema` parsed from the answer, and the call."""
    messages = consolidation_prompt(instructions, material)
    name = model_name(model)
    try:
        # Bounded by the client's own timeout, whole: that timeout is per read, and a server that trickles its
        # answer held the call (a database connection and the tenant's slot with it) for as long as it went on.
        answer = await StructuredCaller(model, schema, timeout_s=call_bound_s(model)).ainvoke(messages)
    except Exception as exc:
        # Named as a summary row names it (describe: the error's kind and the provider's HTTP status before its
        # message; a bare "Connection error." or "Error code: 500 - ..." says neither what failed nor how).
        said = exc if isinstance(exc, SummarizationError) else describe(exc)
        raise SummarizationError(f"consolidation model {name!r} failed: {said}") from exc
    try:
        parsed = schema.model_validate(answer.args)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'answer'}: {e['msg']}" for e in exc.errors()[:5])
        raise SummarizationError(f"consolidation model {name!r} gave no valid {schema.__name__}: {problems}") from None
    return parsed, LLMCall(purpose, name, *usage_of(answer.raw, messages))
