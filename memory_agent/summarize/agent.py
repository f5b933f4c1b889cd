"""MemoryAgent: the incremental sliding-window summarizer (prompt + model call, no SQL)."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from pydantic import ValidationError

from memory_agent import resources
from memory_agent.errors import SummarizationError
from memory_agent.llm import model_name, note_answer, usage_of
from memory_agent.llm.calls import call_bound_s, reported_tokens, scrub, within_bound
from memory_agent.llm.structured import StructuredAnswer, StructuredCaller, terse_tool
from memory_agent.schemas import MemorySummaryOutput
from memory_agent.schemas.items import ITEM_LISTS, StructuredItems, SummaryItem
from memory_agent.settings.conversation import DEFAULT_SUMMARY_WORDS, SUMMARY_TOKENS_PER_WORD
from memory_agent.summarize.failures import describe, retry_after_s
from memory_agent.tokens import count_tokens

logger = logging.getLogger("memory_agent")

# The longest Retry-After a summary waits for its next attempt; a provider asking for more fails it at once.
RETRY_AFTER_WAIT_MAX_S = 10.0
# The summary's tool as sent to the model (benchmarks price this one).
SUMMARY_TOOL = terse_tool(MemorySummaryOutput, "The updated memory of the window and its items.")


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
    items: StructuredItems = field(default_factory=StructuredItems)
    # Items the model got wrong twice (the answer and its one retry): dropped, the text kept. Each entry says
    # which list and why; the runner records them on the memory row.
    dropped_items: tuple[str, ...] = ()


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


@dataclass(frozen=True)
class Retries:
    """How a summary is asked for: attempts, the timeout of each, the first backoff (doubled after each), and the
    time all of them may take (`budget_s`: the row is reclaimed as stale after processing_timeout_s, and a job
    still calling the model then runs beside the next summary of its conversation, its answer discarded)."""

    attempts: int
    timeout_s: float
    backoff_s: float
    budget_s: float | None = None


@dataclass(frozen=True)
class ParsedSummary:
    """A model's answer, item by item: the valid items kept, each invalid one described in `invalid`."""

    summary: str
    items: StructuredItems
    invalid: tuple[str, ...]


def parse_summary(args: dict[str, Any]) -> ParsedSummary:
    """The MemorySummaryOutput in a model's arguments (llm.StructuredCaller's). The text must be there
    (SummarizationError otherwise); the item lists are validated one item at a time, so one malformed item costs
    that item, never the summary."""
    summary = args.get("summary")
    if isinstance(summary, list) and summary and all(isinstance(line, str) for line in summary):
        # Bullet points as a list of strings (small models write them so): the same lines, one text.
        summary = "\n".join(line.strip() for line in summary if line.strip())
    if not isinstance(summary, str):
        raise SummarizationError(f"summarizer returned unparseable output: `summary` is {type(summary).__name__}")
    kept: dict[str, list[SummaryItem]] = {}
    invalid: list[str] = []
    for name in ITEM_LISTS:
        values = args.get(name)
        if values is None:
            continue
        if not isinstance(values, list):
            invalid.append(f"{name}: not a list ({type(values).__name__})")
            continue
        kept[name] = []
        for position, value in enumerate(values):
            try:
                kept[name].append(SummaryItem.model_validate(value))
            except ValidationError as exc:
                reasons = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'item'}: {e['msg']}" for e in exc.errors())
                invalid.append(f"{name}[{position}]: {reasons}"[:300])
    return ParsedSummary(summary.strip(), StructuredItems(**kept), tuple(invalid))


class MemoryAgent:
    """Turns a base memory plus the messages after it into the memory of a sliding window."""

    def __init__(
        self, model: BaseChatModel, *, max_words: int = DEFAULT_SUMMARY_WORDS, max_tokens: int | None = None
    ) -> None:
        self.model = model
        self.model_name = model_name(model)
        self.max_words = max_words
        # The hard cap on a stored memory: the prompt asks for max_words, this refuses what ignores it (a
        # memory is injected into every later round).
        self.max_tokens = max_tokens if max_tokens is not None else SUMMARY_TOKENS_PER_WORD * max_words
        # One tool the model must call, else the provider's JSON-schema format, else JSON in text (StructuredCaller);
        # the arguments are parsed here. LangChain's with_structured_output chain does the tool call through a
        # parallel map, fallbacks and a parser: client CPU per summary (docs/measurements/code.md), paid by the
        # process serving the rounds.
        # The schema goes terse (types and bounds; the system prompt explains each field): sent with every call,
        # its descriptions were a large share of a summary's input tokens (docs/measurements/code.md).
        # parse_summary validates in full.
        self._caller = StructuredCaller(model, MemorySummaryOutput, tool=SUMMARY_TOOL)

    def build_prompt(
        self,
        *,
        previous_summary: str | None,
        base_end_sequence: int | None,
        new_messages: Sequence[SequencedMessage],
        window_start_seq: int,
        window_end_seq: int,
    ) -> list[BaseMessage]:
        # The system prompt is the same for every summary (the window is in the user message): with the tool
        # schema before it, a provider's prompt cache serves that prefix on every call.
        system = resources.prompt("summarize_system").format(max_words=self.max_words)
        user = resources.prompt("summarize_user").format(
            window_start=window_start_seq,
            window_end=window_end_seq,
            base_end="-" if base_end_sequence is None else base_end_sequence,
            previous_summary=previous_summary if previous_summary else "(none: this is the first memory)",
            new_start=new_messages[0].sequence_number if new_messages else window_end_seq,
            new_messages="\n".join(render_message(item) for item in new_messages),
        )
        return [SystemMessage(system), HumanMessage(user)]

    async def summarize_cluster(self, members: list[str]) -> str:
        """A long_term ClusterSummarizer through the summary model: one plain call per cluster (no tool), its
        text checked by the long-term tier before it is stored."""
        prompt = [
            HumanMessage(resources.prompt("cluster_summary").format(members="\n".join(f"- {m}" for m in members)))
        ]
        # Bounded whole: the client's timeout is per read (a trickling server never trips it), and the call is
        # made holding the cluster's lock.
        call = self.model.ainvoke(prompt, config={"callbacks": []})
        try:
            answer = await within_bound(call, call_bound_s(self.model), self.model_name)
        except Exception as exc:
            # Not asked through the StructuredCaller, which keeps the key out of its errors: a provider quoting the
            # key it refused (a key revoked after the summaries completed) must not reach the log here either.
            scrub(exc, self._caller.secrets)
            raise
        note_answer("cluster_summary", self.model_name, answer, prompt)
        return str(answer.text).strip()

    def _note(self, answer: Any, prompt: Sequence[BaseMessage]) -> None:
        note_answer("conversation_summary", self.model_name, answer, prompt)

    async def _ask(self, prompt: list[BaseMessage]) -> tuple[StructuredAnswer, int]:
        """The model's arguments for `prompt` and its input tokens (the provider's count, else an estimate); every
        answered call is noted (the retry's, a method passed over)."""
        # No callbacks of any caller's run (an empty list replaces inherited ones; None would not), and the
        # background task starts from a fresh context: summarizer tokens never reach a user's stream.
        answer = await self._caller.ainvoke(prompt, config={"callbacks": []}, note=self._note)
        return answer, usage_of(answer.raw, prompt)[0]

    async def summarize(self, **window: Any) -> SummaryResult:
        """Call the model with `build_prompt(**window)`, once more when the answer does not validate or its text
        is over the cap (the errors are shown to it). After that retry an unusable text raises SummarizationError
        (over the cap: refused, not cut: a cut summary loses its end, the newest), while invalid
        items are dropped and reported in `dropped_items`: the text summary is never lost to a bad item."""
        prompt = self.build_prompt(**window)
        try:
            answer, input_tokens = await self._ask(prompt)
            parsed = parse_summary(answer.args)
            problems = list(parsed.invalid) + self._text_problems(parsed.summary)
        except SummarizationError as exc:  # no usable answer: asked again with the reason (a provider error raises)
            parsed, problems = None, [str(exc)]
        if problems:
            retry = resources.prompt("summarize_retry").format(problems="\n".join(f"- {p}" for p in problems[:20]))
            answer, input_tokens = await self._ask([*prompt, HumanMessage(retry)])
            parsed = parse_summary(answer.args)
        assert parsed is not None
        text = parsed.summary
        if not text:
            raise SummarizationError("summarizer returned an empty summary")
        tokens = count_tokens([AIMessage(text)])
        if tokens > self.max_tokens:
            raise SummarizationError(
                f"summarizer returned a summary of about {tokens} tokens ({len(text)} characters), over the hard "
                f"cap of {self.max_tokens} tokens (MEMORY_AGENT_MEMORY_MAX_TOKENS), also when asked again to "
                "shorten it; not stored"
            )
        usage = getattr(answer.raw, "usage_metadata", None) or {}
        return SummaryResult(
            text=text,
            input_tokens=input_tokens,
            output_tokens=reported_tokens(usage.get("output_tokens")) or tokens,
            model_name=self.model_name,
            items=parsed.items,
            dropped_items=parsed.invalid,
        )

    def _text_problems(self, text: str) -> list[str]:
        """What the retry asks the model to fix in the summary text: empty, or over the cap (the length asked for
        is named: a memory is injected into every later round, so it is shortened rather than stored long)."""
        if not text:
            return ["summary: empty"]
        tokens = count_tokens([AIMessage(text)])
        if tokens > self.max_tokens:
            return [
                f"summary: about {tokens} tokens, over the limit of {self.max_tokens}; write it again in at most "
                f"{self.max_words} words"
            ]
        return []

    async def summarize_with_retries(self, retries: Retries, what: str, **window: Any) -> SummaryResult:
        """`summarize(**window)`, each attempt within its timeout, again after a backoff while attempts remain;
        the last attempt's error is raised (a timeout as SummarizationError). `what` names it in the log."""
        delay = retries.backoff_s
        loop = asyncio.get_running_loop()
        ends = None if retries.budget_s is None else loop.time() + retries.budget_s
        for attempt in range(1, retries.attempts + 1):
            timeout = retries.timeout_s if ends is None else min(retries.timeout_s, ends - loop.time())
            try:
                return await asyncio.wait_for(self.summarize(**window), timeout=timeout)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if isinstance(exc, (TimeoutError, asyncio.TimeoutError)):
                    exc = SummarizationError(f"Timeout: summarizer did not answer within {timeout:.3g}s")
                if attempt == retries.attempts:
                    raise exc
                # A provider that says when to come back (429, 503 with Retry-After) is not asked sooner; one that
                # asks for longer than RETRY_AFTER_WAIT_MAX_S fails the summary at once (its row must not look in
                # progress meanwhile), and the conversation's next summary waits that long (failures.py).
                asked = retry_after_s(exc) or 0.0
                wait = max(delay, asked)
                if asked > RETRY_AFTER_WAIT_MAX_S:
                    logger.info(
                        "%s: attempt %s failed (%s); not waiting %.3g s for another",
                        what,
                        attempt,
                        describe(exc),
                        asked,
                    )
                    raise exc
                if ends is not None and ends - loop.time() - wait < min(1.0, retries.timeout_s / 4):
                    logger.info("%s: attempt %s failed (%s); no time left for another", what, attempt, describe(exc))
                    if isinstance(exc, SummarizationError) and str(exc).startswith("Timeout"):
                        exc = SummarizationError(
                            f"{exc} (attempt {attempt} of {retries.attempts}: no time left for another within "
                            f"{retries.budget_s:.3g}s, 0.8 x MEMORY_AGENT_PROCESSING_TIMEOUT_S)"
                        )
                    raise exc
                logger.info("%s: attempt %s failed (%s); retrying in %.1fs", what, attempt, describe(exc), wait)
                await asyncio.sleep(wait)
                delay *= 2
        raise AssertionError("unreachable")
