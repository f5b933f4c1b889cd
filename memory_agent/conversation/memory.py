"""ConversationMemory (`memory.conversations`): the conversation tier as MemoryService's methods reach it.

A round's key (as given, or as recorded for a thread id), the round start (round_start.py) and end
(round_end.py), the trigger rule
and its sweep (trigger.py), and the memory versions of a conversation. Every call validates its ids, names the
conversation's tenant for row-level security (db/tenancy.py) and runs its statements on the memory loop.
Made by the service when it opens, from the parts it opened.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.messages import BaseMessage

from memory_agent.conversation.identity import validate_identity, validate_user_id
from memory_agent.conversation.messages import validate_conversation_id
from memory_agent.conversation.queries import ConversationQueries
from memory_agent.conversation.round_end import RoundEnd
from memory_agent.conversation.round_start import RoundStart
from memory_agent.conversation.trigger import SummaryTrigger
from memory_agent.db.tenancy import tenant_scope
from memory_agent.errors import InvalidInputError
from memory_agent.runtime import MemoryLoop
from memory_agent.schemas import (
    ConversationContext,
    LeaseReference,
    MemoryRecord,
    RoundInfo,
    RoundSaved,
    TriggerResult,
)
from memory_agent.schemas.keys import ConversationKey, zone_named
from memory_agent.tracing import memory_span, record, round_end_scope


def round_key(conversation_id: str, user_id: str | None, tenant_id: str | None) -> ConversationKey:
    """A round's key as given (no user → the conversation's own scope), checked like any round input."""
    validate_conversation_id(conversation_id)
    if user_id is not None:
        validate_user_id(user_id)
    if tenant_id is not None:
        validate_identity(tenant_id, "tenant_id")
    return ConversationKey.of(conversation_id, user_id, tenant_id)


def _key_span(name: str, operation: str, key: ConversationKey) -> Any:
    return memory_span(
        name, operation, tenant_id=key.tenant_id, user_id=key.user_id, conversation_id=key.conversation_id
    )


def _round_start_attributes(info: RoundInfo) -> dict[str, Any]:
    """What a round start span records: the memory version and gap the context was built from, its size, recall."""
    return {
        "memory_agent.memory.id": info.memory_id,
        "memory_agent.memory.end_sequence": info.memory_end_sequence,
        "memory_agent.gap.start_sequence": info.gap_start_sequence,
        "memory_agent.gap.end_sequence": info.gap_end_sequence,
        "memory_agent.gap.size": info.gap_size,
        "memory_agent.context.messages": info.context_messages,
        "memory_agent.context.tokens": info.context_tokens,
        "memory_agent.context.truncated": info.truncated,
        "gen_ai.memory.record.count": info.recall.get("context_items"),
        "memory_agent.recall.error": info.recall_error,
    }


def _round_end_attributes(saved: RoundSaved | None, trigger: TriggerResult) -> dict[str, Any]:
    """What a round end span records: where the round landed and what the trigger rule decided."""
    return {
        "memory_agent.round.number": saved.round_number if saved else None,
        "memory_agent.round.first_sequence": saved.first_sequence if saved else None,
        "memory_agent.round.last_sequence": saved.last_sequence if saved else None,
        "gen_ai.memory.record.count": len(saved.stored_positions) if saved else 0,
        "memory_agent.summary.trigger": trigger.outcome,
        "memory_agent.summary.memory_id": trigger.memory_id,
        "memory_agent.summary.start_sequence": trigger.start_sequence,
        "memory_agent.summary.end_sequence": trigger.end_sequence,
    }


class ConversationMemory:
    """Round start and end, the trigger rule, and a conversation's memory versions: `memory.conversations`.

    The names are the design's (get_context_for_workflow, should_trigger_summary,
    trigger_summarization_if_needed) and the round path's (prepare_round, finish_round, release_round,
    record_failed_round: the RoundMemory protocol of integrations/base.py); each is written here only."""

    def __init__(
        self, loop: MemoryLoop, queries: ConversationQueries, start: RoundStart, end: RoundEnd, trigger: SummaryTrigger
    ) -> None:
        self.loop = loop
        self.queries = queries
        self.start = start
        self.end = end
        self.trigger = trigger

    async def owned(self, conversation_id: str, user_id: str | None, tenant_id: str | None) -> ConversationKey:
        """For reads and deletes by thread id: the given user, else the conversation's owner as recorded (within
        `tenant_id` when one is named: another tenant's thread is not found, and the key is then the thread's own
        scope in the named tenant, which holds nothing of it)."""
        if user_id is not None:
            return round_key(conversation_id, user_id, tenant_id)
        key = round_key(conversation_id, None, tenant_id)
        lookup = self.queries.conversation_owner(conversation_id, tenant_id=tenant_id)
        if tenant_id is None:
            owner = await self.loop.arun(lookup)
        else:
            with tenant_scope(tenant_id):  # a role bound by the policies finds the named tenant's owner rows
                owner = await self.loop.arun(lookup)
        return ConversationKey(conversation_id, owner[1], owner[0]) if owner else key

    async def get_context_for_workflow(
        self,
        conversation_id: str,
        current_messages: Sequence[BaseMessage] | None = None,
        *,
        user_id: str | None = None,
        tenant_id: str | None = None,
    ) -> ConversationContext:
        """Latest completed memory + gap messages (stored after it; all stored messages when there is none),
        and the round's input.

        The design computed the gap by position in `current_messages`; here the gap is what the database holds
        after the memory, and `current_messages` (the graph's messages, earlier rounds included or not) gives the
        round's input: `context.current_messages` are those not stored yet, detected by message id as `prepare_round`
        does. Read only: no lease is taken, nothing is stored, no budget is applied.
        """
        key = await self.owned(conversation_id, user_id, tenant_id)
        with tenant_scope(key.tenant_id):
            return await self.start.context(key, current_messages or [])

    async def prepare_round(
        self,
        conversation_id: str,
        messages: Sequence[BaseMessage],
        *,
        lease: str | None = None,
        user_id: str | None = None,
        tenant_id: str | None = None,
        time_zone: str | None = None,
    ) -> tuple[list[BaseMessage], RoundInfo]:
        """Round start for any integration: take the conversation's lease, load memory + gap, and build the
        model's context (memory injected, token budget applied).

        `messages` is what the graph state holds: with a checkpointer the earlier rounds too. The round's input
        is every message of it not stored yet (by id), so a message is stored once whatever the state carries;
        it needs a user message. A resumed round passes the `lease` it holds, or, where it does not have the token
        (another process), its LeaseReference (lease_reference): the lease is renewed when it is still that round's.
        The round belongs to `user_id` in `tenant_id` (none: the conversation's own scope, tenant 'default'); a
        thread id belongs to one user and tenant: naming another raises ConversationOwnerError before anything is
        read or written. `time_zone` (an IANA name) is the user's: recall reads "yesterday" or "last week" in it
        and dates the turns it shows in it (none: MEMORY_AGENT_RECALL_TIME_ZONE, else the service clock's zone).
        """
        key = round_key(conversation_id, user_id, tenant_id)
        zone = zone_named(time_zone, "time_zone") if time_zone is not None else None
        with (
            tenant_scope(key.tenant_id),  # a role bound by row-level security names the tenant (db/tenancy.py)
            _key_span("memory_agent.round_start", "search_memory", key) as span,
        ):
            if isinstance(lease, LeaseReference):
                lease = await self.start.held_lease(key, lease)
            context, info = await self.start.prepare(key, messages, lease, zone)
            record(span, **_round_start_attributes(info))
            return context, info

    async def release_round(self, info: RoundInfo) -> None:
        """Give the conversation's lease back (a round that failed, was cancelled or interrupted)."""
        with tenant_scope(info.key.tenant_id):
            await self.start.release(info)

    async def finish_round(
        self,
        conversation_id: str,
        messages: Sequence[BaseMessage],
        info: RoundInfo | None = None,
        *,
        user_id: str | None = None,
        tenant_id: str | None = None,
    ) -> tuple[RoundSaved | None, TriggerResult]:
        """Round end: persist a whole round, apply the trigger rule and record the round's metrics, in one
        transaction.

        Messages stored already (same id, same content) are not stored again; when none is new, nothing is
        written and the result is (None, outcome "nothing_new"). When the conversation the round started on was
        erased meanwhile (delete_conversation, forget_user), nothing is written either: (None, outcome
        "conversation_erased"), and a WARNING is logged. The summary (if one is due) starts after
        commit; this call never waits for it. The round's user is the one it started with (`info`), else
        `user_id` / `tenant_id` as for `prepare_round`.
        """
        if info is not None and info.conversation_id != conversation_id:
            raise InvalidInputError(
                f"finish_round for {conversation_id!r} was given the round of {info.conversation_id!r}"
            )
        key = info.key if info is not None else round_key(conversation_id, user_id, tenant_id)
        with (
            tenant_scope(key.tenant_id),  # the summary it dispatches inherits the scope
            _key_span("memory_agent.round_end", "create_memory", key) as span,
            round_end_scope(span),
        ):
            saved, trigger = await self.end.finish(key, messages, info)
            record(span, **_round_end_attributes(saved, trigger))
            return saved, trigger

    async def record_failed_round(self, info: RoundInfo, stage: str, error: BaseException) -> None:
        """Best effort: a metrics row for a round that failed at `stage` (nothing of it was stored)."""
        with tenant_scope(info.key.tenant_id):
            await self.end.record_failed(info, stage, error)

    async def should_trigger_summary(
        self, conversation_id: str, last_saved_seq: int, *, user_id: str | None = None, tenant_id: str | None = None
    ) -> bool:
        """The trigger rule, as the round end applies it, without claiming anything: enough messages, new ones
        since the latest memory, and no summary in progress (a `processing` row quiet past processing_timeout_s
        is stale: it is reclaimed, so it does not count)."""
        key = await self.owned(conversation_id, user_id, tenant_id)
        with tenant_scope(key.tenant_id):
            return await self.loop.arun(self.trigger.is_due(key, last_saved_seq))

    async def trigger_summarization_if_needed(
        self, conversation_id: str, last_saved_seq: int, *, user_id: str | None = None, tenant_id: str | None = None
    ) -> TriggerResult:
        """Apply the trigger rule after a round whose last stored message is `last_saved_seq`: a summary claimed
        and dispatched when one is due."""
        key = await self.owned(conversation_id, user_id, tenant_id)
        with tenant_scope(key.tenant_id):
            return await self.loop.arun(self.trigger.trigger(key, last_saved_seq))

    async def sweep(self) -> list[int]:
        """Reclaim stale `processing` rows everywhere and re-run the trigger rule for their conversations."""
        return await self.loop.arun(self.trigger.sweep())

    async def get_memory_history(
        self, conversation_id: str, *, user_id: str | None = None, tenant_id: str | None = None
    ) -> list[MemoryRecord]:
        """Every memory version of a conversation, oldest first (its owner's unless a user is named)."""
        key = await self.owned(conversation_id, user_id, tenant_id)
        with tenant_scope(key.tenant_id):
            return await self.loop.arun(self.queries.list_memory(key.conversation_id, user_id=key.user_id))

    async def get_memory(self, memory_id: int, *, user_id: str) -> MemoryRecord | None:
        """One memory version by its key (user_id, memory_id)."""
        return await self.loop.arun(self.queries.get_memory(memory_id, user_id=user_id))
