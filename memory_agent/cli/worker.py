"""`memory-agent worker`: run procrastinate workers that summarize in the background."""

from __future__ import annotations

import asyncio
import logging
import signal
import threading
from typing import Any

import typer

logger = logging.getLogger("memory_agent.worker")


def run_worker(concurrency: int = 4, settings: Any = None, model: Any = None) -> None:
    """Run summarization jobs until SIGINT/SIGTERM; in-flight summaries drain for drain_timeout_s."""
    from memory_agent.jobs.procrastinate_executor import ProcrastinateExecutor
    from memory_agent.service import MemoryService
    from memory_agent.settings import MemorySettings

    settings = (settings or MemorySettings()).replace(executor="procrastinate")
    with MemoryService.from_settings(settings, model=model) as service:
        executor = service.executor
        assert isinstance(executor, ProcrastinateExecutor)
        stopping = asyncio.Event()

        async def run_until_stopped() -> None:
            # The worker ends (its in-flight jobs with it) before the service closes procrastinate's app:
            # cancelling it and closing at once made every stop print an AppNotOpen traceback.
            # A stop waits drain_timeout_s for the jobs in flight, then cancels them (a summary's row is reclaimed
            # by the sweep): a model that hangs must not hold the stop for the summary's whole timeout budget.
            worker = asyncio.create_task(
                executor.run_worker(concurrency, shutdown_graceful_timeout=settings.jobs.drain_timeout_s)
            )
            stop = asyncio.create_task(stopping.wait())
            await asyncio.wait({worker, stop}, return_when=asyncio.FIRST_COMPLETED)
            stop.cancel()
            worker.cancel()
            results = await asyncio.gather(worker, return_exceptions=True)
            if isinstance(results[0], Exception):
                raise results[0]

        future = service.loop.submit(run_until_stopped())

        def request_stop(signum: int, frame: Any) -> None:
            logger.info("Signal %s: stopping the worker", signum)
            service.loop.loop.call_soon_threadsafe(stopping.set)

        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, request_stop)
            signal.signal(signal.SIGINT, request_stop)
        # Said whatever the log level: a worker that prints nothing looks like one that does nothing.
        typer.echo(
            f"memory_agent worker running: concurrency {concurrency}, schema {settings.database.db_schema}, "
            f"queue memory_agent, summarizer {service.agent.model_name}; Ctrl+C or SIGTERM stops it",
            err=True,
        )
        future.result()
        typer.echo("memory_agent worker stopped", err=True)


def register(app: typer.Typer) -> None:
    @app.command()
    def worker(
        concurrency: int = typer.Option(4, min=1, help="Summaries one worker runs at once."),
    ) -> None:
        """Run background summarization jobs (for MEMORY_AGENT_EXECUTOR=procrastinate apps)."""
        run_worker(concurrency)
