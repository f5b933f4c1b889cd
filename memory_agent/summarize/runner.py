"""SummaryRunner: one `processing` memory row to `completed` or `failed`, with retries and a timeout per
model call. Incremental, as the design says: only the messages after the base memory are sent.

A completed version carries its structured items (the `items` column) and, with MEMORY_AGENT_LONG_TERM on,
writes them to the user's long-term tier (long_term.remember) in the transaction that completes it: a crash
leaves both or neither, and a failing write rolls the completion back and records the version `failed` (the
next version covers the same window, so its items are written then). What follows after that commit (cluster
summaries, vectors) is follow_ups.py's, best effort."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import psycopg
from langchain_core.embeddings import Embeddings
from langchain_core.messages import messages_from_dict
from psycopg.types.json import Jsonb

from memory_agent import long_term
from memory_agent.conversation.messages import storable_text
from memory_agent.db.tenancy import current_tenant, tenant_scope
from memory_agent.errors import InvalidInputError, JobFailedError, SummarizationError, is_transient
from memory_agent.llm import CallLog, OfflineModel, collecting
from memory_agent.long_term import ledger
from memory_agent.long_term.cluster_text import ClusterSummarizer
from memory_agent.long_term.lineage import ledger_user
from memory_agent.schemas.started import StartedSummary
from memory_agent.summarize.agent import MemoryAgent, Retries, SequencedMessage, SummaryResult
from memory_agent.summarize.failures import FailingConversations, Outcome, describe
from memory_agent.summarize.follow_ups import LongTermFollowUps
from memory_agent.summarize.options import SummaryOptions
from memory_agent.summarize.queries import SummaryQueries
from memory_agent.summarize.recorded_items import recorded_items
from memory_agent.tracing import record, summary_attributes, summary_span

logger = logging.getLogger("memory_agent")


class SummaryRunner:
    """Runs summaries on the memory loop; never raises into an in-process executor, raises JobFailedError into a
    job queue's worker when the work did not get done (`strict`). `clock`: the long-term tier's times. What
    follows a completed version there is its part `follow_ups` (cluster summaries, vectors, the safety net)."""

    def __init__(
        self,
        options: SummaryOptions,
        queries: SummaryQueries,
        agent: MemoryAgent,
        *,
        clock: Callable[[], datetime] | None = None,
        cluster_summarizer: ClusterSummarizer | None = None,
        embedder: Embeddings | None = None,
    ) -> None:
        self.options = options
        self.queries = queries
        self.agent = agent
        self.clock = clock or (lambda: datetime.now(UTC))
        self.failing = FailingConversations(self.clock)
        # The summary model writes cluster summaries too; the offline model has a deterministic counterpart.
        offline = isinstance(agent.model, OfflineModel)
        summarizer = cluster_summarizer or (
            long_term.offline_cluster_summarizer if offline else agent.summarize_cluster
        )
        self.follow_ups = LongTermFollowUps(options, queries.connector, summarizer, embedder, self.clock)

    async def run_summary(
        self, memory_id: int, user_id: str, started: StartedSummary | None = None, *, strict: bool = False
    ) -> str:
        """Summarize one `processing` row (user_id, memory_id) to `completed` or `failed`; returns the final status.
        `started`: the row as the round that claimed it picked it up (the inline executor); else it is picked up
        here (start_memory). Every model call it made goes to the cost ledger: the summarizer's (failed attempts
        included) with the completed version, in its transaction; the rest (a failed version's, the cluster
        summaries') afterwards. A row the round picked up names its tenant: the job runs for it (row-level
        security, db/tenancy.py); otherwise for the tenant of the caller's scope.

        Never raises unless `strict` (a job queue's worker): then a summary that did not complete raises
        JobFailedError, retryable when the error that stopped it may pass (the row stays `processing` for the
        retry), not when the row is recorded `failed` (a run again finds nothing to do)."""
        tenant = started[0]["tenant_id"] if started is not None else current_tenant()
        row = started[0] if started is not None else {}
        with tenant_scope(tenant), collecting() as log, summary_span(memory_id, tenant, user_id, row) as span:
            outcome = await self._run_summary(memory_id, user_id, log, started)
            record(span, **summary_attributes(outcome.status, outcome.error, log.made))
        if log.calls and log.tenant_id is not None:  # what the completing transaction did not record
            try:
                with tenant_scope(log.tenant_id):
                    async with self.queries.connector.session() as conn, conn.transaction():
                        user = await ledger_user(conn, {"tenant_id": log.tenant_id, "user_id": user_id})
                        await ledger.record_log(
                            conn, log.tenant_id, user, log, now=self.clock(), prices=self.options.guards.llm_prices
                        )
            except Exception as exc:  # the database may be away; the summary itself is done
                logger.warning("Memory %s: LLM calls not recorded in the ledger: %s", memory_id, exc)
        if strict and outcome.status in ("failed", "processing"):
            what = f"summary of memory {memory_id} of user {user_id!r}"
            if outcome.status == "failed":
                raise JobFailedError(f"{what} failed, recorded on the row: {outcome.error}", retryable=False)
            raise JobFailedError(
                f"{what} left the row processing: {outcome.error}",
                retryable=outcome.cause is not None and is_transient(outcome.cause),
            ) from outcome.cause
        return outcome.status

    async def _run_summary(
        self, memory_id: int, user_id: str, log: CallLog, picked_up: StartedSummary | None
    ) -> Outcome:
        try:
            started_row = picked_up or await self.queries.start_memory(memory_id, user_id=user_id)
        except Exception as exc:
            logger.error("Memory %s: could not start summarization: %s", memory_id, exc)
            return await self._not_started(memory_id, user_id, exc)
        if started_row is None:
            logger.debug("Memory %s is no longer processing; nothing to do", memory_id)
            return Outcome("skipped")
        row, rows = started_row
        log.tenant_id = row["tenant_id"]
        conversation_id = row["conversation_id"]
        start_seq, end_seq = row["start_sequence"], row["end_sequence"]
        base_end = row["base_end_sequence"]
        # Incremental: only messages after the base memory, and never before the window start.
        new_start = start_seq if base_end is None else max(base_end + 1, start_seq)
        started = time.perf_counter()
        error: str | None = None
        raised: BaseException | None = None  # what failed the model call (its kind decides the log and backoff)
        failing = (row["tenant_id"], user_id, conversation_id)
        backing_off = self.failing.backing_off(failing)
        try:
            if backing_off is not None:
                raise SummarizationError(backing_off)
            if not rows:
                logger.debug("No new messages to summarize for %s", conversation_id)
                raise SummarizationError(f"no stored messages in {new_start}-{end_seq}")
            new_messages = [SequencedMessage(r["sequence_number"], messages_from_dict([r["message"]])[0]) for r in rows]
            options = self.options
            result: SummaryResult | None = await self.agent.summarize_with_retries(
                Retries(
                    options.summary.max_attempts,
                    options.summary.timeout_s,
                    options.summary.retry_backoff_s,
                    # A margin under the stale-row timeout for the writes that complete the version.
                    budget_s=0.8 * options.processing_timeout_s,
                ),
                f"Memory {memory_id}",
                previous_summary=row["base_memory_text"],
                base_end_sequence=base_end,
                new_messages=new_messages,
                window_start_seq=start_seq,
                window_end_seq=end_seq,
            )
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            error, raised, result = describe(exc), exc, None
        elapsed_ms = int((time.perf_counter() - started) * 1000)
        try:
            if result is not None:
                completed = await self._complete(row, result, elapsed_ms, new_start, log)
                if isinstance(completed, str):
                    error = completed
                    result = None
                elif not completed:
                    logger.warning("Memory %s was reclaimed while summarizing; its result is discarded", memory_id)
                    return Outcome("discarded")
            if result is not None:
                self.failing.completed(failing)
                logger.info("Summarized messages %s-%s for %s in %sms", start_seq, end_seq, conversation_id, elapsed_ms)
                if start_seq > 0:
                    logger.info("Sliding window: dropping seq 0-%s for %s", start_seq - 1, conversation_id)
                logger.debug("Memory %s status updated to completed", memory_id)
                return Outcome("completed")
            await self._fail(memory_id, user_id, error or "unknown error", elapsed_ms, new_start, end_seq)
            self.failing.failed(
                failing,
                self.agent.model_name,
                error or "unknown error",
                memory_id=memory_id,
                attempted=backing_off is None,
                raised=raised,
            )
            logger.debug("Memory %s status updated to failed", memory_id)
            # The round that started this summary left its turns' vectors to it: they are written all the same
            # (the next version of the conversation may be hours away).
            await self.follow_ups.index(row["tenant_id"], user_id, memory_id)
            return Outcome("failed", error)
        except Exception as exc:
            # The row stays `processing`: retried by a job queue when the error may pass, else reclaimed after
            # processing_timeout_s.
            logger.error("Memory %s: could not record the summarization outcome: %s", memory_id, exc)
            return Outcome("processing", describe(exc), exc)

    async def _not_started(self, memory_id: int, user_id: str, exc: Exception) -> Outcome:
        """The row could not be picked up. An error that may pass leaves it `processing` (a retry picks it up,
        else the sweep reclaims it); one that will not (the database refuses the statement) is recorded on it,
        `failed`, so the conversation's next round starts a new version instead of waiting for the sweep."""
        if is_transient(exc):
            return Outcome("processing", describe(exc), exc)
        error = f"could not start summarizing: {describe(exc)}"
        try:
            recorded = await self._fail(memory_id, user_id, error, None, None, None)
        except Exception as failing:
            logger.error("Memory %s: could not record that it failed to start: %s", memory_id, failing)
            return Outcome("processing", error, exc)
        return Outcome("failed", error) if recorded else Outcome("skipped")

    async def _fail(
        self, memory_id: int, user_id: str, error: str, elapsed_ms: int | None, start: int | None, end: int | None
    ) -> bool:
        """Record the row `failed` with its error; False when it was no longer processing."""
        return await self.queries.fail_memory(
            user_id=user_id,
            memory_id=memory_id,
            error=storable_text(error)[:4000],
            generation_time_ms=elapsed_ms,
            model_name=storable_text(self.agent.model_name),
            summarized_start=start,
            summarized_end=end,
            finished_at=self.clock(),
        )

    async def _complete(
        self, row: dict[str, Any], result: SummaryResult, elapsed_ms: int, new_start: int, log: CallLog
    ) -> bool | str:
        """Complete the version, write its items and record the model calls made for it (`log`, emptied once
        they are recorded) in one transaction. True when done, False when the row was reclaimed meanwhile
        (nothing written), the error text when a write failed (rolled back)."""
        user_id, tenant_id, memory_id = row["user_id"], row["tenant_id"], row["memory_id"]
        items, stored = recorded_items(
            result, memory_id, row["start_sequence"], row["end_sequence"], self.options.summary.max_items
        )
        outcomes: list[long_term.RememberOutcome] = []
        now = self.clock()
        calls = list(log.calls)
        remembering = self.options.long_term.long_term and not items.is_empty()
        completing = {
            "user_id": user_id,
            "tenant_id": tenant_id,
            "conversation_id": row["conversation_id"],
            "memory_id": memory_id,
            "memory_text": storable_text(result.text),
            "items": Jsonb(stored),
            "generation_time_ms": elapsed_ms,
            "model_name": storable_text(result.model_name),
            "input_tokens": result.input_tokens,
            "output_tokens": result.output_tokens,
            "summarized_start": new_start,
            "summarized_end": row["end_sequence"],
            "finished_at": now,
        }
        try:
            ledger_rows = ledger.call_params(tenant_id, user_id, calls, now=now, prices=self.options.guards.llm_prices)
            if not remembering:
                # Nothing for the long-term tier: one statement (the version and its calls), no transaction.
                if not await self.queries.complete_memory(None, calls=ledger_rows, **completing):
                    return False
            else:
                async with self.queries.connector.session(transaction=True) as conn:
                    # Erasing the conversation waits for this transaction, or ran first and left nothing to write.
                    if not await self.queries.complete_memory(conn, calls=ledger_rows, **completing):
                        return False
                    outcomes = await long_term.remember(
                        conn,
                        scope=long_term.ItemScope(
                            tenant_id=tenant_id,
                            user_id=user_id,
                            project=self.options.long_term.project,
                            environment=self.options.long_term.environment,
                        ),
                        source=long_term.ItemOrigin(conversation_id=row["conversation_id"], memory_id=memory_id),
                        items=items,
                        now=now,
                    )
        except (psycopg.Error, InvalidInputError, long_term.LongTermWriteError) as exc:
            if isinstance(exc, psycopg.OperationalError):
                raise  # the database is away: the row stays processing and is reclaimed
            what = "long-term write" if remembering else "completion"
            logger.error("Memory %s: %s failed, the version is not completed: %s", memory_id, what, exc)
            return f"{what} failed: {type(exc).__name__}: {exc}"
        del log.calls[: len(calls)]
        await self.follow_ups.refresh_clusters(long_term.touched_clusters(outcomes), now)
        # Whether or not the version wrote items: its turns need their vectors (recall ranks a turn without one
        # by full text alone, below the turns vectors found).
        await self.follow_ups.index(tenant_id, user_id, memory_id)
        return True
