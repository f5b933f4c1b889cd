"""A consolidation job run by a real procrastinate worker, its model an OpenAI-compatible server on 127.0.0.1: a
model that answers HTTP 500 may answer later, so the job is retried (nothing written, the user still due); a
model whose answer does not parse would answer the same, so the job ends `failed` at once."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import procrastinate
import pytest

from memory_agent import MemorySettings
from memory_agent.consolidation import ConsolidationRunner
from memory_agent.consolidation.schedule import USER_TASK, defer_user, register_tasks
from memory_agent.db.schema import SchemaManager
from memory_agent.jobs.retry import RETRY_TRANSIENT
from memory_agent.llm import default_chat_model
from memory_agent.service.backend import MemoryBackend
from tests.conftest import execute, query
from tests.consolidation.conftest import day, write_day


@pytest.fixture
async def app(pool, conn, fake_openai) -> AsyncIterator[procrastinate.App]:
    """The consolidation tasks as the executor registers them, the model ChatOpenAI on the local server."""
    await SchemaManager(MemoryBackend(pool, "memory_agent")).migrate_procrastinate(apply=True)
    await write_day(conn, "alice", 0)
    # The tick's time far from now: the worker's periodic deferrer never adds a tick of its own.
    schedule_time = (datetime.now(UTC) + timedelta(hours=12)).strftime("%H:%M")
    runner = ConsolidationRunner(
        pool,
        default_chat_model(MemorySettings(), "consolidation"),
        MemorySettings(consolidation_enabled=True, schedule_time=schedule_time),
    )
    opened = procrastinate.App(connector=procrastinate.PsycopgConnector())
    register_tasks(opened, runner, queue="memory_agent", retry=RETRY_TRANSIENT)
    async with opened.open_async(pool=pool):
        yield opened


async def run_alice(app: procrastinate.App) -> None:
    await app.run_worker_async(queues=["memory_agent"], wait=False, install_signal_handlers=False)


def user_jobs(database_url: str) -> list[tuple[Any, ...]]:
    return query(
        database_url,
        "SELECT status::text, attempts, coalesce(scheduled_at > now(), false) FROM procrastinate_jobs"
        " WHERE task_name = %s ORDER BY id",
        (USER_TASK,),
    )


async def test_a_model_answering_500_retries_the_job_until_it_answers(app, fake_openai, database_url):
    fake_openai.mode = "error"
    assert await defer_user(app, "nightly", "acme", "alice", day(1, 5))
    await run_alice(app)
    assert user_jobs(database_url) == [("todo", 1, True)]  # retried after a wait
    assert query(database_url, "SELECT count(*) FROM consolidation_notes") == [(0,)]
    fake_openai.mode = "ok"
    execute(database_url, "UPDATE procrastinate_jobs SET scheduled_at = now()")  # the retry's wait, skipped
    await run_alice(app)
    assert user_jobs(database_url) == [("succeeded", 2, False)]
    assert query(database_url, "SELECT period FROM consolidation_notes") == [("daily",)]


async def test_a_model_answering_garbage_ends_the_job_failed_without_retry(app, fake_openai, database_url):
    # Garbage every way of asking: a tool call's arguments and the JSON-schema answer that are no JSON, prose.
    fake_openai.mode, fake_openai.text_answer = "malformed", "no idea"
    assert await defer_user(app, "nightly", "acme", "alice", day(1, 5))
    await run_alice(app)
    assert user_jobs(database_url) == [("failed", 1, False)]
    assert query(database_url, "SELECT count(*) FROM consolidation_notes") == [(0,)]
