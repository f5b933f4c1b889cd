"""The trigger rule at a round end, and the sweep that reclaims stale `processing` rows.

The rule itself is `window.summary_due` (a round end applies it in SQL, inside end_round: `rule` and `ended`
below). Here it is applied to what the database holds, a stale row is
reclaimed (marked `failed`) before a new one is claimed, and a new `processing` row is handed on twice: to
`enqueue` inside the transaction that claimed it (a job queue in PostgreSQL defers its job there, so the row
and its job commit together) and to `dispatch` after commit (an in-process executor starts it then).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from memory_agent.conversation.queries import ConversationQueries
from memory_agent.conversation.query_rows import TriggerRule
from memory_agent.conversation.window import TriggerOptions, calculate_summary_range, summary_due
from memory_agent.db.connector import rows_of
from memory_agent.schemas import SummaryClaim, TriggerOutcome, TriggerResult
from memory_agent.schemas.keys import ConversationKey
from memory_agent.schemas.started import StartedSummary, picked_up_by_claim

logger = logging.getLogger("memory_agent")

# (memory_id, user_id, the row as its claim picked it up or None), after commit
Dispatch = Callable[[int, str, StartedSummary | None], Awaitable[None]]
# (conn, memory_id, user_id, tenant_id), in the claiming transaction
Enqueue = Callable[[Any, int, str, str], Awaitable[None]]


class SummaryTrigger:
    """Decides, claims and hands on summaries. Every coroutine here runs on the memory loop.

    `enqueue`: given when the executor records a job in the claiming transaction (a queue in PostgreSQL); the
    claim's id is then read before COMMIT. `pick_up`: the executor runs the summary in this process right after
    commit (inline), so the round's metrics statement picks the row up as it claims it and reads what the summary
    needs: the summary starts without a statement of its own."""

    def __init__(
        self,
        options: TriggerOptions,
        queries: ConversationQueries,
        dispatch: Dispatch,
        enqueue: Enqueue | None = None,
        *,
        pick_up: bool = False,
    ) -> None:
        self.options = options
        self.queries = queries
        self._dispatch = dispatch
        self._enqueue = enqueue
        self.pick_up = pick_up

    def _due(self, last_saved_seq: int, state: dict[str, Any]) -> TriggerOutcome | None:
        options = self.options
        in_flight = state["processing_memory_id"] is not None
        return summary_due(
            last_saved_seq,
            summarize_after_seq=options.summarize_after_seq,
            min_new_messages=options.min_new_messages,
            processing_age_s=state["processing_age_s"] if in_flight else None,
            processing_timeout_s=options.processing_timeout_s,
            base_end_sequence=state["base_end_sequence"],
        )

    @property
    def rule(self) -> TriggerRule:
        """The rule's settings for end_round, which applies it in the round's statement (sql/definitions)."""
        options = self.options
        return TriggerRule(
            window=options.window_size,
            summarize_after=options.summarize_after_seq,
            min_new=options.min_new_messages,
            timeout_s=options.processing_timeout_s,
            pick_up=self.pick_up,
        )

    def ended(self, key: ConversationKey, row: dict[str, Any]) -> TriggerResult:
        """The outcome end_round's row reports (the rule applied and the claim made in the round's statement)."""
        conversation_id = key.conversation_id
        reclaimed = [row["reclaimed_memory_id"]] if row["reclaimed_memory_id"] is not None else []
        for reclaimed_id in reclaimed:
            logger.warning("Reclaimed stale memory %s of %s (processing past timeout)", reclaimed_id, conversation_id)
        outcome, memory_id = row["trigger_outcome"], row["triggered_memory_id"]
        if outcome == "already_processing":
            logger.debug("Summarization already in progress for %s", conversation_id)
        if outcome != "started":  # already_processing names the row in flight when the rule found one
            return TriggerResult(outcome=outcome, memory_id=row["in_flight_memory_id"], reclaimed_memory_ids=reclaimed)
        claim = SummaryClaim(
            start_sequence=row["summary_start_sequence"],
            end_sequence=row["last_sequence"],
            base_memory_id=row["base_memory_id"],
            reclaimed_memory_ids=reclaimed,
        )
        result = claim.result(memory_id)
        if self.pick_up:  # the statement picked the row up as it claimed it
            result._picked_up = picked_up_by_claim(
                row,
                memory_id=memory_id,
                tenant_id=key.tenant_id,
                user_id=key.user_id,
                conversation_id=conversation_id,
                start_sequence=claim.start_sequence,
                end_sequence=claim.end_sequence,
                base_memory_id=claim.base_memory_id,
            )
        return result

    async def is_due(self, key: ConversationKey, last_saved_seq: int) -> bool:
        """What `decide` would find now, without writing: a stale `processing` row does not count."""
        if last_saved_seq < self.options.summarize_after_seq:
            return False
        window = self.options.window_size
        async with self.queries.connector.session() as conn:
            state = await self.queries.trigger_state(
                conn, key.conversation_id, last_saved_seq, window, user_id=key.user_id
            )
        return self._due(last_saved_seq, state) is None

    async def decide(
        self,
        conn: Any,
        key: ConversationKey,
        last_saved_seq: int,
        round_first_seq: int | None,
        state: dict[str, Any] | None = None,
    ) -> TriggerResult | SummaryClaim:
        """The rule inside the caller's transaction on `conn`, up to the claim: a stale row is reclaimed here;
        a due summary comes back as the SummaryClaim to make (`claimed`). `state`: trigger_state as the caller
        read it in this transaction (else read here)."""
        options = self.options
        if last_saved_seq < options.summarize_after_seq:
            return TriggerResult(outcome="below_threshold")
        conversation_id, user_id = key.conversation_id, key.user_id
        if state is None:
            window = options.window_size
            state = await self.queries.trigger_state(conn, conversation_id, last_saved_seq, window, user_id=user_id)
        outcome = self._due(last_saved_seq, state)
        if outcome == "already_processing":
            logger.debug("Summarization already in progress for %s", conversation_id)
            return TriggerResult(outcome="already_processing", memory_id=state["processing_memory_id"])
        reclaimed: list[int] = []
        if state["processing_memory_id"] is not None:  # stale: reclaimed before anything else
            rows = await self.queries.reclaim_stale(
                options.processing_timeout_s, conversation_id, conn, user_id=user_id
            )
            reclaimed = [row["memory_id"] for row in rows]
            for reclaimed_id in reclaimed:
                logger.warning(
                    "Reclaimed stale memory %s of %s (processing past timeout)", reclaimed_id, conversation_id
                )
        if outcome == "no_new_messages":
            logger.debug("No new messages to summarize for %s", conversation_id)
            return TriggerResult(outcome="no_new_messages", reclaimed_memory_ids=reclaimed)
        round_starts = list(state["round_starts"] or [])
        if round_first_seq is not None:
            round_starts.append(round_first_seq)
        start_seq, end_seq = calculate_summary_range(last_saved_seq, options.window_size, round_starts or None)
        return SummaryClaim(
            start_sequence=start_seq,
            end_sequence=end_seq,
            base_memory_id=state["base_memory_id"],
            reclaimed_memory_ids=reclaimed,
        )

    async def claimed(
        self, conn: Any, key: ConversationKey, decision: TriggerResult | SummaryClaim, recorded: Any = None
    ) -> TriggerResult:
        """`decision`'s outcome. A SummaryClaim is claimed here, in the transaction on `conn`, unless the round's
        metrics statement claimed it (`recorded`, its cursor: read after COMMIT when nothing before needs it)."""
        if isinstance(decision, TriggerResult):
            return decision
        row = None
        if recorded is not None:
            rows = await rows_of(recorded)
            row = rows[0] if rows else None
            memory_id = row["triggered_memory_id"] if row else None
        else:
            claimed = await self.queries.claim_summary(
                conn, key.conversation_id, decision, tenant_id=key.tenant_id, user_id=key.user_id
            )
            memory_id = claimed["memory_id"]
        if memory_id is None:  # another process claimed the slot between our read and insert
            logger.debug("Summarization already in progress for %s", key.conversation_id)
        result = decision.result(memory_id)
        if memory_id is not None and row is not None and self.pick_up:  # the metrics statement picked it up
            result._picked_up = picked_up_by_claim(
                row,
                memory_id=memory_id,
                tenant_id=key.tenant_id,
                user_id=key.user_id,
                conversation_id=key.conversation_id,
                start_sequence=decision.start_sequence,
                end_sequence=decision.end_sequence,
                base_memory_id=decision.base_memory_id,
            )
        return result

    @property
    def enqueues(self) -> bool:
        """Whether a new `processing` row is enqueued inside its transaction (its id is needed before COMMIT)."""
        return self._enqueue is not None

    async def enqueue(self, conn: Any, key: ConversationKey, trigger: TriggerResult) -> None:
        """Inside the transaction that claimed a new `processing` row: its job commits with it or not at all."""
        if trigger.started and self._enqueue is not None:
            assert trigger.memory_id is not None
            await self._enqueue(conn, trigger.memory_id, key.user_id, key.tenant_id)

    async def dispatch(self, key: ConversationKey, trigger: TriggerResult) -> None:
        """Hand a new `processing` row to the executor. The round is already committed: never raise."""
        if not trigger.started:
            return
        assert trigger.memory_id is not None
        logger.debug(
            "Memory %s created for %s: window %s-%s, base %s",
            trigger.memory_id,
            key.conversation_id,
            trigger.start_sequence,
            trigger.end_sequence,
            trigger.base_memory_id,
        )
        try:
            await self._dispatch(trigger.memory_id, key.user_id, trigger.picked_up)
        except Exception as exc:
            logger.error(
                "Memory %s of %s could not be dispatched (%s); it will be reclaimed after %ss",
                trigger.memory_id,
                key.conversation_id,
                exc,
                self.options.processing_timeout_s,
            )

    async def trigger(self, key: ConversationKey, last_saved_seq: int) -> TriggerResult:
        """The rule in a transaction of its own, then the dispatch."""
        async with self.queries.connector.session(transaction=True) as conn:
            result = await self.claimed(conn, key, await self.decide(conn, key, last_saved_seq, None))
            await self.enqueue(conn, key, result)
        await self.dispatch(key, result)
        return result

    async def sweep(self) -> list[int]:
        """Reclaim stale `processing` rows everywhere and re-run the trigger rule for their conversations."""
        rows = await self.queries.reclaim_stale(self.options.processing_timeout_s)
        for row in rows:
            logger.warning("Reclaimed stale memory %s of %s", row["memory_id"], row["conversation_id"])
        keys = {ConversationKey(row["conversation_id"], row["user_id"], row["tenant_id"]) for row in rows}
        for key in sorted(keys, key=lambda k: (k.user_id, k.conversation_id)):
            last_sequence = await self.queries.last_sequence(key.conversation_id, user_id=key.user_id)
            if last_sequence is not None:
                await self.trigger(key, last_sequence)
        return [row["memory_id"] for row in rows]
