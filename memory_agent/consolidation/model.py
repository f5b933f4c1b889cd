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


class ConsolidationModelError(SummarizationError):
    """A consolidation call that failed. `call`: what the answers it got meanwhile cost (ways of asking that
    answered without a usable object, an answer that did not validate), for the ledger; None when none answered."""

    def __init__(self, message: str, call: LLMCall | None) -> None:
        super().__init__(message)
        self.call = call


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
    """The one place consolidation calls a model: `schema` parsed from the answer, and the call (the tokens of every
    answer it took: a way of asking passed over was billed too). ConsolidationModelError when it failed, with
    what the answers it got cost."""
    messages = consolidation_prompt(instructions, material)
    name = model_name(model)
    answered: list[tuple[int, int]] = []

    def made() -> LLMCall | None:
        if not answered:
            return None
        return LLMCall(purpose, name, sum(i for i, _ in answered), sum(o for _, o in answered))

    try:
        # Bounded by the client's own timeout, whole: that timeout is per read, and a server that trickles its
        # answer held the call (a database connection and the tenant's slot with it) for as long as it went on.
        answer = await StructuredCaller(model, schema, timeout_s=call_bound_s(model)).ainvoke(
            messages, note=lambda raw, prompt: answered.append(usage_of(raw, prompt))
        )
    except Exception as exc:
        # Named as a summary row names it (describe: the error's kind and the provider's HTTP status before its
        # message; a bare "Connection error." or "Error code: 500 - ..." says neither what failed nor how).
        said = exc if isinstance(exc, SummarizationError) else describe(exc)
        raise ConsolidationModelError(f"consolidation model {name!r} failed: {said}", made()) from exc
    args = _valid_insights(answer.args, name) if schema is ConsolidationOutput else answer.args
    try:
        parsed = schema.model_validate(args)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'answer'}: {e['msg']}" for e in exc.errors()[:5])
        raise ConsolidationModelError(
            f"consolidation model {name!r} gave no valid {schema.__name__}: {problems}", made()
        ) from None
    call = made()
    assert call is not None  # an answer was parsed: it was noted
    return parsed, call


def _valid_insights(args: dict[str, Any], name: str) -> dict[str, Any]:
    """`args` with each insight that does not validate left out (an importance of 8 on a scale the model made up,
    a missing text): one bad insight costs that insight, never the note, as one bad item never costs a summary.
    Insights that are not a list are left out whole (`null`: none)."""
    if "insights" not in args:
        return args
    insights = args["insights"]
    kept, dropped = [], []
    for position, value in enumerate(insights if isinstance(insights, list) else []):
        try:
            ScoredInsight.model_validate(value)
        except ValidationError as exc:
            dropped.append(f"insights[{position}]: {exc.errors()[0]['msg']}")
        else:
            kept.append(value)
    if not isinstance(insights, list) and insights is not None:
        dropped.append(f"insights: not a list ({type(insights).__name__})")
    if dropped:
        logger.info("Consolidation model %r: invalid insights left out: %s", name, "; ".join(dropped[:5]))
    return {**args, "insights": kept}
