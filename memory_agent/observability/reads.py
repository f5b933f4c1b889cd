"""The read side of observability: version chain, what the model was given at a round, memory health.

Every statement is a method of ObservabilityQueries (queries.py); nothing here writes. The coroutines take the backend of an open
MemoryService and run on its memory loop:

    with MemoryService.from_settings() as memory:
        versions = memory.call_sync(version_chain(memory.backend, "conv_123"))
"""

from __future__ import annotations

import asyncio
import datetime as dt
from dataclasses import dataclass, field
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from langchain_core.messages import BaseMessage, messages_from_dict

from memory_agent.conversation.context import inject_context
from memory_agent.db.backend import MemoryBackend
from memory_agent.errors import InvalidInputError
from memory_agent.observability.queries import ObservabilityQueries
from memory_agent.schemas.keys import default_user_id
from memory_agent.settings import DEFAULT_PROCESSING_TIMEOUT_S

Row = dict[str, Any]

DEFAULT_STUCK_AFTER_S = DEFAULT_PROCESSING_TIMEOUT_S
DEFAULT_HEALTH_LIMIT = 20  # conversations health() lists, the most lagging first
# memory_health_totals' columns, in its order: the totals row of health() and of `stats --json`.
HEALTH_TOTALS = (
    "conversations",
    "rounds",
    "completed",
    "failed",
    "processing",
    "failure_rate",
    "max_summary_lag",
    "avg_summary_lag",
    "fallback_share",
    "truncation_share",
    "generation_p50_ms",
    "generation_p95_ms",
    "input_tokens",
    "output_tokens",
    "compression_ratio",
    "context_tokens",
    "summary_token_share",
    "stuck",
    "structured_rate",
)


class UnknownConversationError(InvalidInputError):
    """No round of this thread id is stored (check the id, and the database and schema you point at)."""


class UnknownRoundError(InvalidInputError):
    """The conversation exists but has no stored round with this number."""


@dataclass(frozen=True)
class ContextAtRound:
    """What the model was given at one round, rebuilt from stored rows."""

    conversation_id: str
    round_number: int
    round: Row  # the round_context row: ranges, path, tokens, truncation, trigger outcome
    memory: Row | None  # memory_id, memory_text, start/end sequence of the version served; None on the raw path
    gap: list[Row] = field(default_factory=list)  # stored messages after the memory, oldest first
    input: list[Row] = field(default_factory=list)  # the round's own input messages
    # The long-term block recall gave the round: block (as injected), hits (each one's provenance), path, items,
    # tokens, truncated; None when the round recalled nothing (no user, recall off or failed, nothing found).
    recall: Row | None = None

    @property
    def messages(self) -> list[Row]:
        return [*self.gap, *self.input]

    def model_input(self, injection_mode: str = "prefix") -> list[BaseMessage]:
        """The messages the wrapped graph received, with the memory and the recalled block injected as at run
        time."""
        messages = messages_from_dict([row["message"] for row in self.messages])
        memory_text = self.memory["memory_text"] if self.memory else None
        block = self.recall["block"] if self.recall else ""
        return inject_context(memory_text, block, messages, injection_mode)


@dataclass(frozen=True)
class MemoryHealth:
    """The columns of memory_health_totals, memory_health (the most lagging conversations only) and
    summary_model_stats, and the stuck rows; `stuck` counts follow `stuck_after_s`."""

    totals: Row
    conversations: list[Row]  # at most the `limit` given to health(), the most lagging first
    models: list[Row]
    stuck: list[Row]
    stuck_after_s: float
    # The hour before `now`: summaries finished (completed, failed, failure_rate), rounds and their summary lag.
    last_hour: Row = field(default_factory=dict)


async def _keyed(backend: MemoryBackend, conversation_id: str) -> dict[str, Any]:
    """The conversation's key: its recorded owner, else its own scope (the rule of conversation_user)."""
    owner = await backend.conversation_owner(conversation_id)
    return {"conversation_id": conversation_id, "user_id": owner[1] if owner else default_user_id(conversation_id)}


async def conversation(backend: MemoryBackend, conversation_id: str) -> Row:
    """The conversation's memory_health row; UnknownConversationError when no round of it is stored."""
    row = await ObservabilityQueries(backend).conversation(await _keyed(backend, conversation_id))
    if row is None:
        raise UnknownConversationError(
            f"no conversation {conversation_id!r} is stored; check the thread id and MEMORY_AGENT_DATABASE_URL"
        )
    return row


async def version_chain(backend: MemoryBackend, conversation_id: str) -> list[Row]:
    """Every memory version of a conversation, oldest first, with its base and the rounds it covers."""
    await conversation(backend, conversation_id)
    return await ObservabilityQueries(backend).version_chain(await _keyed(backend, conversation_id))


async def context_at(backend: MemoryBackend, conversation_id: str, round_number: int) -> ContextAtRound:
    """What the model was given at `round_number`: the memory version served and the message range."""
    summary = await conversation(backend, conversation_id)
    queries, key = ObservabilityQueries(backend), await _keyed(backend, conversation_id)
    round_row = await queries.round_context(key, round_number)
    if round_row is None:
        raise UnknownRoundError(
            f"conversation {conversation_id!r} has {summary['rounds']} stored round(s); "
            f"round {round_number} has no metrics row (rounds are numbered from 1)"
        )
    parts = await queries.context_parts(key, round_number)
    by_part = {row["part"]: row for row in parts if row["part"] in ("memory", "recall")}
    memory = by_part.get("memory")
    recall = by_part.get("recall")
    return ContextAtRound(
        conversation_id=conversation_id,
        round_number=round_number,
        round=round_row,
        memory={
            "memory_id": memory["memory_id"],
            "memory_text": memory["content"],
            "start_sequence": round_row["memory_start_sequence"],
            "end_sequence": round_row["memory_end_sequence"],
        }
        if memory
        else None,
        gap=[row for row in parts if row["part"] == "gap"],
        input=[row for row in parts if row["part"] == "input"],
        recall={
            "block": recall["content"],
            "hits": recall["message"] or [],
            "path": round_row["recall_path"],
            "items": round_row["recall_items"],
            "tokens": round_row["recall_tokens"],
            "truncated": round_row["recall_truncated"],
        }
        if recall
        else None,
    )


async def message_visibility(
    backend: MemoryBackend, conversation_id: str, sequence_number: int, text: str | None = None
) -> list[Row]:
    """For each round from the message's own on: how the model saw it (input, gap, summarized, dropped…)."""
    await conversation(backend, conversation_id)
    return await ObservabilityQueries(backend).message_visibility(conversation_id, sequence_number, text)


async def stuck_processing(backend: MemoryBackend, older_than_s: float = DEFAULT_STUCK_AFTER_S) -> list[Row]:
    """`processing` rows quiet for longer than `older_than_s` (what the reclaimer will mark failed)."""
    return await ObservabilityQueries(backend).stuck_processing(older_than_s)


async def last_hour(backend: MemoryBackend, now: dt.datetime) -> Row:
    """The hour before `now` (the service's clock): summaries finished in it (completed, failed, failure_rate) and
    the rounds started in it with their summary lag (rounds, max_summary_lag, avg_summary_lag)."""
    return await ObservabilityQueries(backend).last_hour(now)


async def health(
    backend: MemoryBackend,
    stuck_after_s: float = DEFAULT_STUCK_AFTER_S,
    limit: int = DEFAULT_HEALTH_LIMIT,
    *,
    now: dt.datetime | None = None,
) -> MemoryHealth:
    """Summary lag, served memory age, compression, failure rate, per-model latency and stuck rows.

    The totals are three aggregate passes (round_metrics, memory, conversations); the conversations' pass
    also chooses the `limit` most lagging, and only those get the per-conversation details. The passes, the
    model stats and the stuck rows are independent reads, each on its own pooled connection at once: the
    answer takes about as long as the slowest of them, not their sum.
    """
    if limit < 1:
        raise InvalidInputError(f"limit must be at least 1 (got {limit})")
    queries = ObservabilityQueries(backend)
    rounds, summaries, lag, models, stuck, recent = await asyncio.gather(
        queries.round_totals(),
        queries.summary_totals(),
        queries.lag_totals(limit),
        queries.model_stats(),
        queries.stuck_processing(stuck_after_s),
        queries.last_hour(now or dt.datetime.now(dt.UTC)),
    )
    named = {"conversation_ids": lag.pop("most_lagging"), "user_ids": lag.pop("most_lagging_users")}
    # memory_health's stuck count with the timeout the stuck rows were listed with.
    conversations = await queries.conversations(named, stuck_after_s)
    parts = {**rounds, **summaries, **lag}
    spent = summaries["input_tokens"] + summaries["output_tokens"]
    parts["summary_token_share"] = _share(spent, spent + rounds["context_tokens"])
    parts["stuck"] = len(stuck)  # the rows of stuck_processing_after: one rule for the list and the count
    return MemoryHealth(
        totals={name: parts[name] for name in HEALTH_TOTALS},
        conversations=conversations,
        models=models,
        stuck=stuck,
        stuck_after_s=stuck_after_s,
        last_hour=recent,
    )


def _share(part: int, whole: int) -> Decimal | None:
    """round(part::numeric / NULLIF(whole, 0), 4), as memory_health_totals computes its shares."""
    if whole == 0:
        return None
    return (Decimal(part) / Decimal(whole)).quantize(Decimal("0.0001"), rounding=ROUND_HALF_UP)


async def generation_time(backend: MemoryBackend) -> Row:
    """Average, maximum, p50 and p95 summarization time over completed summaries."""
    return await ObservabilityQueries(backend).generation_time()


async def window_progression(backend: MemoryBackend, conversation_id: str | None = None, limit: int = 20) -> list[Row]:
    """The newest completed memory versions with their window, of one conversation or all."""
    key = await _keyed(backend, conversation_id) if conversation_id is not None else {"user_id": None}
    return await ObservabilityQueries(backend).window_progression({"conversation_id": conversation_id, **key}, limit)


async def weekly_report(backend: MemoryBackend) -> list[Row]:
    """One row per week: fallback share, truncation share, p95 latency, summary lag, summary cost."""
    return await ObservabilityQueries(backend).weekly_report()


def jsonable(value: Any) -> Any:
    """`value` with database types made JSON-friendly: numbers as floats, intervals in seconds, ISO times."""
    if isinstance(value, dict):
        return {key: jsonable(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(item) for item in value]
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    if isinstance(value, (dt.datetime, dt.date)):
        return value.isoformat()
    return value
