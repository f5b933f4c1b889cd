"""Summaries as procrastinate jobs: the app processes defer, `memory-agent worker` processes run them.

procrastinate's tables live in the memory_agent schema. The stale-row sweep and the cluster summaries' safety
net (refresh the clusters whose inline refresh failed) are procrastinate periodic tasks. Whatever the number of
app and worker processes, the partial unique index on `memory` keeps one summarization in flight per
conversation; a job only ever runs a row that is still `processing`. A job whose work did not get done raises,
so procrastinate records it `failed`, or retries it when the error may pass (retry.py).
"""

from __future__ import annotations

import logging
from typing import Any

import procrastinate
import procrastinate.exceptions
import psycopg

from memory_agent.db.connector import Connector
from memory_agent.db.schema import SchemaManager
from memory_agent.errors import JobFailedError
from memory_agent.jobs.base import SummaryJobs, WorkerOptions
from memory_agent.jobs.retry import RETRY_TRANSIENT
from memory_agent.schemas.started import StartedSummary

logger = logging.getLogger("memory_agent.jobs")

QUEUE = "memory_agent"
SUMMARIZE_TASK = "memory_agent.summarize"
SWEEP_TASK = "memory_agent.sweep"
REFRESH_CLUSTERS_TASK = "memory_agent.refresh_clusters"
EMBED_TASK = "memory_agent.embed_turns"
REMOVE_FINISHED_TASK = "memory_agent.remove_finished_jobs"


class ExpectedFailuresInOneLine(logging.Filter):
    """procrastinate logs a job that raised with the exception's traceback (ERROR, or INFO when it retries it). A
    JobFailedError is a failure the job expected (a model's HTTP error, an unusable answer, the database away)
    whose cause is on its rows and in the summary's WARNING, and its traceback only shows the line that raised it:
    its line says the cause instead. Any other exception (a bug) keeps its traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        failure = record.exc_info[1] if record.exc_info else None
        if isinstance(failure, JobFailedError):
            record.msg, record.args = f"{record.getMessage()} - {failure}", None
            record.exc_info = record.exc_text = None
        return True


ONE_LINE = ExpectedFailuresInOneLine()


def build_app(jobs: SummaryJobs, options: WorkerOptions, pool: Any = None) -> procrastinate.App:
    """A procrastinate App whose tasks run `jobs`. Its connector is opened on the service's own pool (autocommit
    connections whose search_path is the memory_agent schema): no second pool. With that pool and consolidation
    or batch summaries enabled (`options.consolidation`), the consolidation schedules are registered too."""
    app = procrastinate.App(connector=procrastinate.PsycopgConnector())

    @app.task(name=SUMMARIZE_TASK, queue=QUEUE, retry=RETRY_TRANSIENT)
    async def summarize(user_id: str, memory_id: int, tenant_id: str | None = None) -> str:
        # The whole key: on a sharded database the job's reads go to the user's shard only. Strict: a summary
        # that did not complete fails the job (retried when the error may pass), never a `succeeded` job.
        # `tenant_id` is for the job row's policy (grant_bound_role): a bound role sees its tenant's jobs only;
        # the summary reads its tenant from its memory row (jobs deferred by an older release have none).
        return await jobs.run_summary(memory_id, user_id, strict=True)

    @app.periodic(cron=options.jobs.sweep_cron, periodic_id="memory_agent.sweep")
    @app.task(name=SWEEP_TASK, queue=QUEUE, queueing_lock=SWEEP_TASK)
    async def sweep(timestamp: int) -> list[int]:
        return await jobs.sweep()

    # procrastinate keeps a finished job's row (its arguments name the user) until it is removed: every round
    # defers jobs, so without this the table grows forever, and a job that was running when its user was forgotten
    # (a forget erases the others) would name them for good. procrastinate's own removal, hourly (it reads every
    # job row with its latest event: not at the sweep's every 30 seconds).
    @app.periodic(cron="7 * * * *", periodic_id=REMOVE_FINISHED_TASK)
    @app.task(name=REMOVE_FINISHED_TASK, queue=QUEUE, queueing_lock=REMOVE_FINISHED_TASK, pass_context=True)
    async def remove_finished_jobs(context: procrastinate.JobContext, timestamp: int) -> None:
        await context.app.job_manager.delete_old_jobs(
            nb_hours=options.jobs.finished_job_retention_h,
            queue=QUEUE,
            include_failed=True,
            include_cancelled=True,
            include_aborted=True,
        )

    if pool is not None and options.consolidation is not None:
        register_consolidation(app, options.consolidation(pool))

    @app.task(name=EMBED_TASK, queue=QUEUE)
    async def embed(user_id: str, tenant_id: str) -> None:
        # Registered whatever this process's embedder: a worker without one ends the job (its catch-up has no
        # vectors to make either).
        if jobs.embed_turns is not None:
            await jobs.embed_turns(tenant_id, user_id)

    refresh = jobs.refresh_clusters
    if refresh is not None:

        @app.periodic(cron=options.jobs.sweep_cron, periodic_id=REFRESH_CLUSTERS_TASK)
        @app.task(name=REFRESH_CLUSTERS_TASK, queue=QUEUE, queueing_lock=REFRESH_CLUSTERS_TASK)
        async def refresh_clusters(timestamp: int) -> int:
            return await refresh()

    return app


def register_consolidation(app: procrastinate.App, runner: Any) -> None:
    # Imported here: only workers of deployments that enable it load the consolidation package.
    from memory_agent.consolidation import register_tasks

    register_tasks(app, runner, queue=QUEUE, retry=RETRY_TRANSIENT)


class ProcrastinateExecutor:
    """Defers a job per new `processing` row; `memory-agent worker` runs them."""

    runs_in_process = False  # a worker process picks the row up (start_memory)

    def __init__(self, jobs: SummaryJobs, options: WorkerOptions, backend: Connector) -> None:
        self.jobs = jobs
        self.options = options
        self.backend = backend
        self.app: procrastinate.App | None = None

    async def start(self) -> None:
        await SchemaManager(self.backend).migrate_procrastinate(apply=self.options.auto_migrate)
        self.app = build_app(self.jobs, self.options, pool=self.backend.pool)
        await self.app.open_async(pool=self.backend.pool)

    async def enqueue(self, conn: Any, memory_id: int, user_id: str, tenant_id: str) -> None:
        """The job is deferred on the round's own connection, inside its transaction: the `processing` row and
        its job commit together, and a crash can never leave one without the other."""
        assert self.app is not None
        deferrer = self.app.tasks[SUMMARIZE_TASK].configure(connection=conn)
        try:
            await deferrer.defer_async(user_id=user_id, memory_id=memory_id, tenant_id=tenant_id)
        except procrastinate.exceptions.ConnectorException as exc:
            # The round's pipelined statements report their errors here: give the round the driver's error
            # (mapped like any other), not procrastinate's "Database error".
            if isinstance(exc.__cause__, psycopg.Error):
                raise exc.__cause__ from None
            raise

    async def dispatch(self, memory_id: int, user_id: str, started: StartedSummary | None = None) -> None:
        """Nothing after commit: the job was deferred with the row (`enqueue`)."""

    async def embed(self, user_id: str, tenant_id: str) -> None:
        """A job per user waiting at most (its queueing lock): rounds that end while one waits add nothing, and the
        job embeds whatever has no vector when a worker runs it. Deferred after the round's commit (a lock taken
        inside the round's transaction would abort it)."""
        if self.jobs.embed_turns is None or self.app is None:
            return
        deferrer = self.app.tasks[EMBED_TASK].configure(queueing_lock=f"{EMBED_TASK}:{tenant_id}:{user_id}")
        try:
            await deferrer.defer_async(user_id=user_id, tenant_id=tenant_id)
        except procrastinate.exceptions.AlreadyEnqueued:
            pass
        except Exception as exc:  # the round is committed: the periodic catch-up embeds these turns instead
            logger.warning("Turns of user %r not queued for embedding (the periodic catch-up will): %s", user_id, exc)

    async def drain(self, timeout: float | None) -> bool:
        return True  # summaries run in worker processes: none is in flight in this one

    async def stop(self) -> None:
        if self.app is not None:
            await self.app.close_async()
            self.app = None

    async def run_worker(self, concurrency: int, **options: Any) -> None:
        """Run jobs until cancelled (the memory loop runs this in `memory-agent worker`)."""
        assert self.app is not None
        logging.getLogger("procrastinate.worker").addFilter(ONE_LINE)  # once per process: addFilter keeps one
        await self.app.run_worker_async(
            queues=[QUEUE], concurrency=concurrency, install_signal_handlers=False, **options
        )
