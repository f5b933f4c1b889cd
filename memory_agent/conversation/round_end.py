"""A round's end: the round stored whole, the trigger rule applied and the metrics recorded (`finish`), or the
metrics row of a round that failed (`record_failed`).

`finish` is one write transaction in one round trip: one statement (end_round, given the StoredRound assembled here)
gives the lease back, stores the round, applies the trigger rule (claiming a due summary) and records the round's
metrics, run alone in autocommit (its own transaction; with the tenant named per transaction, in a pipeline with
BEGIN and COMMIT). A statement that needs its row first (the cost ledger's app calls, a job queue that enqueues the
claim in the transaction) makes it a transaction of two round trips. The new `processing` row is dispatched after commit.
The round's start is round_start.py.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from typing import Any

from langchain_core.messages import BaseMessage

from memory_agent.conversation.leases import RoundLeases
from memory_agent.conversation.messages import (
    check_user_messages,
    serialize_round,
    storable_text,
    validate_conversation_id,
)
from memory_agent.conversation.queries import ConversationQueries
from memory_agent.conversation.query_rows import StoredRound, saved_round
from memory_agent.conversation.round_rows import round_metrics_row
from memory_agent.conversation.trigger import SummaryTrigger
from memory_agent.db.connector import rows_of
from memory_agent.runtime import MemoryLoop
from memory_agent.schemas import RoundInfo, RoundSaved, TriggerResult
from memory_agent.schemas.keys import ConversationKey
from memory_agent.settings import GuardSettings

logger = logging.getLogger("memory_agent")


class RoundEnd:
    """Round end over the database, on the memory loop (`loop.arun`), shielded from the caller's cancellation."""

    def __init__(
        self,
        guards: GuardSettings,
        queries: ConversationQueries,
        loop: MemoryLoop,
        trigger: SummaryTrigger,
        leases: RoundLeases,
        clock: Callable[[], datetime],
        embed: Callable[[str, str], Awaitable[None]] | None = None,
    ) -> None:
        self.guards = guards  # the app model's prices and name (MEMORY_AGENT_LLM_PRICES, MEMORY_AGENT_APP_MODEL)
        self.queries = queries
        self.loop = loop
        self.trigger = trigger
        self.leases = leases
        self.clock = clock  # the ledger time of the app model's calls, the round's `now`
        # With an embedder, the executor's `embed(user_id, tenant_id)`: a round's turns get their vectors in the
        # background whether or not a summary follows (a summary embeds them itself).
        self.embed = embed
        # The app model's answers go to the cost ledger once prices or the app's model are configured.
        self.app_prices = (
            {model: price.model_dump() for model, price in guards.llm_prices.items()}
            if guards.llm_prices or guards.app_model
            else None
        )

    async def finish(
        self, key: ConversationKey, messages: Sequence[BaseMessage], info: RoundInfo | None = None
    ) -> tuple[RoundSaved | None, TriggerResult]:
        validate_conversation_id(key.conversation_id)
        graph_ended = time.perf_counter()
        stored = StoredRound(*serialize_round(messages))
        check_user_messages(messages)
        # Shielded: a caller cancelled mid-way (client disconnect, timeout) neither half-commits the round
        # (one transaction) nor leaves its new `processing` row without a summary until it is reclaimed.
        return await self.loop.arun(self._finish(key, stored, info, graph_ended), shield=True)

    async def _finish(
        self,
        key: ConversationKey,
        stored: StoredRound,
        info: RoundInfo | None,
        graph_ended: float,
    ) -> tuple[RoundSaved | None, TriggerResult]:
        # Built before the statement that stores the round: end_round fills in the round's sequences and the
        # trigger rule's outcome.
        metrics = round_metrics_row(info, None, None, graph_ended) if info is not None else None
        started_on = info.conversation_created_at if info is not None else None
        stored = stored._replace(after=_stored_through(info), started_on=started_on, metrics=metrics)
        holder = info.lease if info is not None else None
        alone = self.app_prices is None and not self.trigger.enqueues
        if alone and not self.queries.connector.tenant_per_transaction:
            # The statement alone, in autocommit, is the round's transaction: no BEGIN, COMMIT or pipeline to
            # send (each cost a pass through the event loop's selector: docs/measurements/code.md).
            async with self.queries.connector.session() as conn:
                sent = await self.queries.end_round(
                    conn, key, stored, holder=holder, now=self.clock(), rule=self.trigger.rule
                )
                saved, trigger = await self._ended(key, sent)
            await self._after_commit(key, saved, trigger)
            return saved, trigger
        async with self.queries.connector.session(transaction=True, pipeline=True) as conn:
            sent = await self.queries.end_round(
                conn, key, stored, holder=holder, now=self.clock(), rule=self.trigger.rule
            )
            ended = None
            if not alone:  # these need the round's row before COMMIT
                ended = await self._ended(key, sent)
                saved, trigger = ended
                if saved is not None and self.app_prices is not None:
                    await self.queries.record_app_calls(
                        conn,
                        saved,
                        key,
                        prices=self.app_prices,
                        app_model=self.guards.app_model,
                        now=self.clock(),
                    )
                await self.trigger.enqueue(conn, key, trigger)  # in the round's transaction: no window after commit
        # Else the statement's reply came with COMMIT's (the tenant named per transaction): one round trip.
        saved, trigger = ended if ended is not None else await self._ended(key, sent)
        await self._after_commit(key, saved, trigger)
        return saved, trigger

    async def _after_commit(self, key: ConversationKey, saved: RoundSaved | None, trigger: TriggerResult) -> None:
        """The round's background work: its summary, or else (with an embedder) its turns' vectors. Never raises."""
        await self.trigger.dispatch(key, trigger)
        if self.embed is not None and saved is not None and not trigger.started:
            await self.embed(key.user_id, key.tenant_id)

    async def _ended(self, key: ConversationKey, sent: Any) -> tuple[RoundSaved | None, TriggerResult]:
        """The round and the trigger rule's outcome from end_round's row (`sent`: its cursor)."""
        rows = await rows_of(sent)
        row = rows[0]  # one row always
        if row["erased"]:  # a delete or forget won the race: the lease given back, nothing else written
            logger.warning(
                "Round of %s not stored: the conversation was erased while the round ran (delete_conversation "
                "or forget_user); its messages and metrics were dropped",
                key.conversation_id,
            )
            return None, TriggerResult(outcome="conversation_erased")
        saved = saved_round(key.conversation_id, row)
        if saved is None:
            logger.info("Round of %s: every message was stored already; nothing written", key.conversation_id)
            return None, TriggerResult(outcome="nothing_new")
        return saved, self.trigger.ended(key, row)

    async def record_failed(self, info: RoundInfo, stage: str, error: BaseException) -> None:
        row = round_metrics_row(info, None, None)
        row.update(error_stage=stage, error=storable_text(f"{type(error).__name__}: {error}")[:2000])
        try:
            key = info.key
            recorded = await self.loop.arun(
                self.queries.record_failed_round(
                    row, tenant_id=key.tenant_id, user_id=key.user_id, started_on=info.conversation_created_at
                )
            )
            if not recorded:
                logger.warning(
                    "Failed round of %s not recorded: the conversation was erased while the round ran",
                    info.conversation_id,
                )
        except Exception as exc:  # the database may be the reason the round failed
            logger.warning("Could not record the failed round of %s: %s", info.conversation_id, exc)
        if info.lease is None:
            return
        # It expires after round_lease_s; when kept, this process takes it over at once.
        failure = await self.leases.give_back(info.key, info.lease)
        if failure is not None:
            logger.warning("Could not release the round lease of %s: %s", info.conversation_id, failure)


def _stored_through(info: RoundInfo | None) -> int | None:
    """The last sequence stored when the round started (-1: none): its start found the input unstored up to there,
    so end_round looks for copies only among the messages stored since. None without a RoundInfo: each message is
    looked for in the whole conversation."""
    if info is None:
        return None
    return -1 if info.stored_through is None else info.stored_through
