"""The lifecycle of a MemoryService: the memory loop (runtime.py), the database (db/), the summarizer (summarize/),
the executor (jobs/), the round logic (conversation/) and the tier facades, opened and closed together.

MemoryService holds one Lifecycle and hands open and close to it; the facades it hands out
(`memory.conversations`, `memory.long_term`) are made here from the parts opened.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from langchain_core.embeddings import Embeddings
from langchain_core.language_models import BaseChatModel

from memory_agent import tracing
from memory_agent.conversation.leases import RoundLeases
from memory_agent.conversation.memory import ConversationMemory
from memory_agent.conversation.round_end import RoundEnd
from memory_agent.conversation.round_start import RoundStart
from memory_agent.conversation.trigger import SummaryTrigger
from memory_agent.db.connect import open_connector
from memory_agent.db.schema import SchemaManager
from memory_agent.jobs.base import Executor, SummaryJobs
from memory_agent.jobs.executor import make_executor
from memory_agent.llm import chat_model
from memory_agent.long_term.embedders import embedder_from_setting
from memory_agent.long_term.memory import LongTermMemory
from memory_agent.long_term.queries import LongTermQueries
from memory_agent.long_term.recall import check_recall_settings
from memory_agent.long_term.recall.round_start import LongTermRecall
from memory_agent.runtime import MemoryLoop, PeriodicTask
from memory_agent.service._wiring import start_options, summary_options, trigger_options, worker_options
from memory_agent.service.backend import MemoryBackend
from memory_agent.settings import MemorySettings
from memory_agent.summarize.agent import MemoryAgent
from memory_agent.summarize.runner import SummaryRunner

logger = logging.getLogger("memory_agent")

NOT_OPEN = "MemoryService is not open; use `async with MemoryService.from_settings(...)`"


@dataclass(frozen=True)
class Parts:
    """What exists while the service is open."""

    backend: MemoryBackend
    agent: MemoryAgent
    runner: SummaryRunner
    executor: Executor
    embedder: Embeddings | None
    statistics: PeriodicTask  # the young tables' statistics (analyze_young_tables)
    conversations: ConversationMemory
    long_term: LongTermMemory


class Lifecycle:
    """Open and close everything a MemoryService uses; the parts while open."""

    def __init__(
        self,
        settings: MemorySettings,
        *,
        model: BaseChatModel | str | None,
        database_url: str | None,
        clock: Callable[[], datetime] | None,
        embeddings: Embeddings | None,
    ) -> None:
        self.settings = settings
        self.clock = clock or (lambda: datetime.now(UTC))
        self._model = model
        self._embeddings = embeddings
        self._database_url = database_url or settings.database.database_url
        self.database_url: str | None = None  # resolved at open (the embedded server's URI when unset)
        self._loop: MemoryLoop | None = None
        self._opened: Parts | None = None

    @property
    def parts(self) -> Parts:
        if self._opened is None:
            raise RuntimeError(NOT_OPEN)
        return self._opened

    @property
    def loop(self) -> MemoryLoop:
        if self._loop is None:
            raise RuntimeError(NOT_OPEN)
        return self._loop

    def _resolve_database_url(self) -> str:
        if self._database_url:
            return self._database_url
        from memory_agent.db.embedded import start_embedded_postgres

        return start_embedded_postgres(
            self.settings.database.data_dir, install_dir=self.settings.database.embedded_install_dir
        )

    async def _open_on_loop(self, url: str, loop: MemoryLoop, summarizer: BaseChatModel) -> None:
        settings = self.settings
        self.database_url = url
        if settings.memory.rolling_window_size % 2:
            logger.warning(
                "MEMORY_AGENT_MEMORY_ROLLING_WINDOW_SIZE=%s is odd: a window starts at a round, so with "
                "user/assistant pairs it covers %s messages",
                settings.memory.rolling_window_size,
                settings.memory.rolling_window_size - 1,
            )
        tracing.configure(settings.tracing.trace_identity)  # process-wide, as the tracer provider is
        # Before the database: a missing extra is a configuration error with nothing opened.
        embedder = (
            self._embeddings if self._embeddings is not None else embedder_from_setting(settings.long_term.embeddings)
        )
        backend = await open_connector(
            url, settings.database, MemoryBackend, processing_timeout_s=settings.jobs.processing_timeout_s
        )
        try:
            agent = MemoryAgent(
                summarizer,
                max_words=settings.memory.max_words,
                max_tokens=settings.memory.max_tokens_cap,
            )
            runner = SummaryRunner(
                summary_options(settings), backend.summaries, agent, clock=self.clock, embedder=embedder
            )

            async def sweep() -> list[int]:  # the trigger is made after the executor it hands rows to
                return await trigger.sweep()

            jobs = SummaryJobs(
                runner.run_summary,
                sweep,
                runner.follow_ups.refresh_pending,
                embed_turns=runner.follow_ups.index if embedder is not None else None,
            )
            executor = make_executor(worker_options(settings), jobs, backend)
            # An in-process executor: rows are picked up by their claim, nothing is enqueued in the round's
            # transaction (so the claim's id is read with COMMIT's reply).
            trigger = SummaryTrigger(
                trigger_options(settings),
                backend.conversations,
                dispatch=executor.dispatch,
                enqueue=None if executor.runs_in_process else executor.enqueue,
                pick_up=executor.runs_in_process,
            )
            leases = RoundLeases(
                settings.rounds, backend.conversations, loop
            )  # shared: the start's lease, the end gives back
            recall = settings.recall
            # A bad setting is a ConfigurationError at open; settings off: the rounds never recall.
            round_recall = LongTermRecall(
                backend,
                recall if settings.rounds.recall else None,
                cost_ceiling=settings.guards.monthly_cost_ceiling,
                embedder=embedder,
            )
            start = RoundStart(
                start_options(settings), backend.conversations, loop, leases, recall=round_recall, clock=self.clock
            )
            end = RoundEnd(
                settings.guards,
                backend.conversations,
                loop,
                trigger,
                leases,
                self.clock,
                embed=executor.embed if embedder is not None else None,
            )
            await check_recall_settings(LongTermQueries(backend), recall)
            # Cached plans of the round path are made on a table's statistics: analyze young tables as they double.
            statistics = PeriodicTask(
                settings.jobs.analyze_interval_s,
                [("Analyzing young tables", SchemaManager(backend).analyze_young_tables)],
                logger,
            )
            long_term = LongTermMemory(
                loop,
                backend,
                clock=self.clock,
                cluster_summarizer=runner.follow_ups.cluster_summarizer,
                embedder=embedder,
                recall_settings=recall,
                min_cluster_items=settings.summary.min_cluster_items,
            )
            conversations = ConversationMemory(loop, backend.conversations, start, end, trigger)
            self._opened = Parts(backend, agent, runner, executor, embedder, statistics, conversations, long_term)
            await executor.start()
            statistics.start()
        except BaseException:
            self._opened = None
            await backend.pool.close()
            raise

    def open(self) -> None:
        """The memory loop on a thread of its own, the database, the pool, migrations, the parts."""
        if self._opened is not None:
            return
        summarizer = chat_model(self._model, self.settings)  # an unusable setting: an error with nothing opened
        url = self._resolve_database_url()
        self._loop = MemoryLoop()
        try:
            self._loop.run(self._open_on_loop(url, self._loop, summarizer))
        except BaseException:
            self._forget_loop()
            raise

    async def aopen(self) -> None:
        """As open(); with event_loop "caller" the memory loop is the running one."""
        if self.settings.jobs.event_loop == "own":
            await asyncio.to_thread(self.open)
            return
        if self._opened is not None:
            return
        summarizer = chat_model(self._model, self.settings)
        url = await asyncio.to_thread(self._resolve_database_url)  # the embedded server starts in a thread
        self._loop = MemoryLoop(attach=asyncio.get_running_loop())
        try:
            await self._open_on_loop(url, self._loop, summarizer)
        except BaseException:
            self._forget_loop()
            raise

    def _drain_timeout(self, timeout: float | None) -> float:
        return self.settings.jobs.drain_timeout_s if timeout is None else timeout

    def _forget_loop(self) -> None:
        """After a close (or a failed open): the memory loop stopped, nothing of the open service kept."""
        if self._loop is not None:
            self._loop.stop()
        self._loop = None
        self._opened = None

    async def _close_on_loop(self, timeout: float) -> None:
        if self._opened is None:
            return
        await self._opened.statistics.stop()
        try:
            await self._opened.executor.drain(timeout)
            await self._opened.executor.stop()
        finally:
            await self._opened.backend.pool.close()

    def close(self, timeout: float | None = None) -> None:
        """In-flight summaries drained for up to `timeout` (default drain_timeout_s), then everything closed."""
        if self._loop is None:
            return
        if not self._loop.owns_thread and self._loop.in_loop_thread:
            raise RuntimeError(
                "close() would block the event loop this MemoryService runs on (MEMORY_AGENT_EVENT_LOOP=caller) "
                "and wait for it forever; use `await memory.aclose()`"
            )
        try:
            self._loop.run(self._close_on_loop(self._drain_timeout(timeout)))
        finally:
            self._forget_loop()

    async def aclose(self, timeout: float | None = None) -> None:
        loop = self._loop
        if loop is None or loop.owns_thread:
            await asyncio.to_thread(self.close, timeout)
            return
        try:  # on the loop the service runs on (a trip to it from another loop)
            await loop.arun(self._close_on_loop(self._drain_timeout(timeout)))
        finally:
            self._forget_loop()
