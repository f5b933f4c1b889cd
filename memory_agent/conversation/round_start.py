"""A round's start: its context (`prepare`), read-only context (`context`), and the lease given back (`release`).

`prepare` takes the conversation's lease, reads the latest *completed* memory and the gap after it in one
statement (and, beside it, recalls the user's long-term memory through the recaller the service hands it:
schemas/recall.py), and builds the
model's context (tool calls closed, memory and recalled block injected, token budget applied). The round's input
is every message the caller holds that is not stored yet: stored is a fact of the database (message ids), not a
guess from message shapes. The round's end is round_end.py.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, tzinfo

from langchain_core.messages import BaseMessage

from memory_agent.conversation.budget import apply_budget, close_unanswered_tool_calls
from memory_agent.conversation.context import (
    GapWarnings,
    context_from_rows,
    gap_cap_record,
    inject_context,
    load_context,
)
from memory_agent.conversation.leases import RoundLeases
from memory_agent.conversation.messages import (
    check_user_messages,
    serialize_round,
    validate_conversation_id,
    validate_round_input,
)
from memory_agent.conversation.queries import ConversationQueries
from memory_agent.conversation.round_rows import not_stored
from memory_agent.runtime import MemoryLoop
from memory_agent.schemas import ConversationContext, RoundInfo, lease_reference
from memory_agent.schemas.keys import ConversationKey, default_user_id
from memory_agent.schemas.recall import NothingRecalled, Recalled, RoundRecaller, recall_query
from memory_agent.settings import RoundSettings

logger = logging.getLogger("memory_agent")


@dataclass(frozen=True)
class StartOptions:
    """What a round start reads of the settings, as one value (built where the settings are read: the service's
    wiring): the rounds group and the gap cap (MemorySettings.gap_message_cap). Recall's settings are the
    recaller's, handed in beside them."""

    rounds: RoundSettings
    gap_cap: int
    # The users' time zone when a round names none (MEMORY_AGENT_RECALL_TIME_ZONE); None: the clock's.
    time_zone: tzinfo | None = None


@dataclass(frozen=True)
class StartRead:
    """What a round's start read: its lease, memory + gap (and which of the caller's messages are stored), the
    recalled block, and when the round started."""

    lease: str
    context: ConversationContext
    stored_ids: set[str]
    recalled: Recalled
    started: float
    conversation_created_at: datetime | None  # the stored conversation's row (None: nothing stored)


class RoundStart:
    """Round start over the database. Called from any event loop: the database work runs on the memory loop
    (`loop.arun`), the context building on the caller's."""

    def __init__(
        self,
        options: StartOptions,
        queries: ConversationQueries,
        loop: MemoryLoop,
        leases: RoundLeases,
        *,
        recall: RoundRecaller | None = None,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self.options = options
        # The service's clock: the month recall checks the cost ceiling against.
        self.clock = clock or (lambda: datetime.now(UTC))
        self.gap_warnings = GapWarnings(self.clock)
        self.recall = recall  # the service's (long-term memory's); None: the round never recalls
        self.queries = queries
        self.loop = loop
        self.leases = leases

    async def context(self, key: ConversationKey, current_messages: Sequence[BaseMessage]) -> ConversationContext:
        """Memory + gap as stored, and `current_messages` not stored yet as the round's input."""
        messages = validate_round_input(list(current_messages), need_user=False)
        context, stored_ids = await self.loop.arun(
            load_context(self.queries, key, [m.id for m in messages if m.id], self.options.gap_cap)
        )
        return context.model_copy(update={"current_messages": not_stored(messages, stored_ids)})

    async def prepare(
        self,
        key: ConversationKey,
        messages: Sequence[BaseMessage],
        lease: str | None = None,
        time_zone: tzinfo | None = None,
    ) -> tuple[list[BaseMessage], RoundInfo]:
        """`time_zone`: the user's (the round's config), else the settings', else the clock's: recall reads the
        query's date expressions and dates the turns it shows in it."""
        started = time.perf_counter()
        validate_conversation_id(key.conversation_id)
        checked = validate_round_input(messages, need_user=False)
        query = recall_query(checked)
        zone = time_zone or self.options.time_zone
        token, (context, stored_ids, created_at), recalled = await self.loop.arun(
            self._begin(key, checked, query, lease, zone)
        )
        try:
            recalled = recalled.without_window(key.conversation_id, context.gap_start_sequence)
            start = StartRead(token, context, stored_ids, recalled, started, created_at)
            return await self._prepare(key, checked, start, query)
        except BaseException:
            await self.leases.give_back(key, token)
            raise

    async def _begin(
        self, key: ConversationKey, messages: list[BaseMessage], query: str, lease: str | None, zone: tzinfo | None
    ) -> tuple[str, tuple[ConversationContext, set[str], datetime | None], Recalled]:
        """The lease, memory + gap read with it in one round trip, and recall beside them on a connection of
        its own: recall adds its excess over the round start, not its whole time. A failing start cancels
        recall."""
        message_ids = [m.id for m in messages if m.id]
        recalling: asyncio.Future[Recalled] | None = None
        recall = self.recall
        if recall is not None and recall.recalls(key, query):  # no task on the round path when nothing is recalled
            now = self.clock()
            recalling = asyncio.ensure_future(recall(key, query, now.astimezone(zone) if zone else now))

        async def attempt(token: str) -> tuple[ConversationContext, set[str], datetime | None] | None:
            rows = await self.queries.begin_round(
                key, token, self.options.rounds.round_lease_s, message_ids, self.options.gap_cap
            )
            if rows is None:
                return None
            return *context_from_rows(key.conversation_id, rows), rows[0]["conversation_created_at"]

        try:
            token, loaded = await self.leases.acquire(key, attempt, lease)
        except BaseException:
            if recalling is not None:
                recalling.cancel()
            raise
        return token, loaded, await recalling if recalling is not None else NothingRecalled()

    async def _prepare(
        self, key: ConversationKey, messages: list[BaseMessage], start: StartRead, query: str
    ) -> tuple[list[BaseMessage], RoundInfo]:
        rounds = self.options.rounds
        context, recalled, started = start.context, start.recalled, start.started
        conversation_id = key.conversation_id
        incoming = not_stored(messages, start.stored_ids)
        check_user_messages(incoming)
        serialize_round(incoming)  # refuse what cannot be stored before the model is called
        # The model never gets a tool call without a result (chat APIs reject that history).
        gap, closed_gap = close_unanswered_tool_calls(context.gap_messages)
        current, closed_input = close_unanswered_tool_calls(incoming, keep_open_at_end=True)
        closed = closed_gap + closed_input
        budget = apply_budget(
            gap,
            current,
            lambda messages: inject_context(context.memory_text, recalled.block, messages, rounds.injection_mode),
            max_context_tokens=rounds.max_context_tokens,
            max_message_tokens=rounds.max_message_tokens,
        )
        workflow = budget.context
        if budget.applied:
            logger.info(
                "Context budget for %s: dropped %d gap rounds (%d messages), cut %d messages, %d -> %d tokens%s",
                conversation_id,
                budget.dropped_rounds,
                budget.dropped_messages,
                len(budget.truncated_messages),
                budget.tokens_before,
                budget.tokens_after,
                " (still over budget)" if budget.over_budget else "",
            )
        truncation = budget.record() if budget.applied else None
        if closed:
            truncation = {**(truncation or {}), "closed_tool_calls": closed}
        if context.gap_capped_messages:
            cap = await self.loop.arun(
                gap_cap_record(self.queries, key, context, self.options.gap_cap, self.gap_warnings)
            )
            truncation = {**(truncation or {}), "gap_cap": cap}
        kept_gap = [m for m in budget.gap if not (m.id or "").startswith("memory_agent:closed:")]
        gap_end = context.gap_end_sequence
        info = RoundInfo(
            conversation_id=conversation_id,
            # None for the conversation's own scope: a resumed round names it again by the thread alone.
            user_id=None if key.user_id == default_user_id(conversation_id) else key.user_id,
            tenant_id=key.tenant_id,
            input_messages=incoming,
            lease=start.lease,
            stored_through=_last_stored(context),
            conversation_created_at=start.conversation_created_at,
            memory_id=context.memory_id,
            memory_end_sequence=context.memory_end_sequence,
            # Gap messages are consecutive sequences; trimming drops them from the front.
            gap_start_sequence=gap_end - len(kept_gap) + 1 if gap_end is not None and kept_gap else None,
            gap_end_sequence=gap_end if kept_gap else None,
            gap_size=len(kept_gap),
            context_messages=len(workflow),
            context_tokens=budget.tokens_after,
            truncated=budget.applied or bool(closed) or bool(context.gap_capped_messages),
            truncation=truncation,
            load_ms=(time.perf_counter() - started) * 1000,
            started=started,
            prepared=time.perf_counter(),
            recall=recalled.metrics(query),
            recall_error=recalled.error,
        )
        return workflow, info

    async def held_lease(self, key: ConversationKey, reference: str) -> str | None:
        """The conversation's lease passed to a new token when it is still the one `reference` names
        (lease_reference), else None. Passed once, decided by the database (pass_round_lease): two runs naming the
        same paused round (two resumes, two new messages on the thread) no longer both hold its lease; the second
        waits or is refused as any round would. Renewing it is then take_round_lease's (the lease may expire and
        pass to another round between the statements; the renewal then waits as any round does)."""
        user_id = key.user_id
        holder = await self.loop.arun(self.queries.round_lease_holder(key.conversation_id, user_id=user_id))
        if holder is None or lease_reference(holder) != reference:
            return None
        token = uuid.uuid4().hex
        passed = await self.loop.arun(
            self.queries.pass_round_lease(key.conversation_id, holder, token, user_id=user_id)
        )
        return token if passed else None

    async def release(self, info: RoundInfo) -> None:
        if info.lease is not None:
            await self.leases.release(info.key, info.lease)


def _last_stored(context: ConversationContext) -> int | None:
    """The last stored sequence when the round started: the gap's end, else the memory's (the gap is every stored
    message after it), else None (nothing stored)."""
    return context.gap_end_sequence if context.gap_end_sequence is not None else context.memory_end_sequence
