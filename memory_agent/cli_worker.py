"""`memory-agent worker`: run procrastinate workers that summarize in the background."""

from __future__ import annotations

import concurrent.futures
import logging
import signal
import threading
from typing import Any

import typer

logger = logging.getLogger("memory_agent.worker")


def run_worker(concurrency: int = 4, settings: Any = None, model: Any = None) -> None:
    """Run summarization jobs until SIGINT/SIGTERM; in-flight summaries drain for drain_timeout_s."""
    from memory_agent.service import MemoryService
    from memory_agent.settings import MemorySettings

    settings = (settings or MemorySettings()).model_copy(update={"executor": "procrastinate"})
    with MemoryService.from_settings(settings, model=model) as service:
        future = service.loop.submit(service.executor.run_worker(concurrency))
        stop = threading.Event()

        def request_stop(signum: int, frame: Any) -> None:
            logger.info("Signal %s: stopping the worker after in-flight summaries", signum)
            stop.set()
            future.cancel()

        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, request_stop)
            signal.signal(signal.SIGINT, request_stop)
        logger.info("memory_agent worker running (concurrency %s)", concurrency)
        try:
            future.result()
        except concurrent.futures.CancelledError:
            pass


def register(app: typer.Typer) -> None:
    @app.command()
    def worker(
        concurrency: int = typer.Option(4, min=1, help="Summaries one worker runs at once."),
    ) -> None:
        """Run background summarization jobs (for MEMORY_AGENT_EXECUTOR=procrastinate apps)."""
        run_worker(concurrency)
