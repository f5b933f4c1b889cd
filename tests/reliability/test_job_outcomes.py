"""A procrastinate job whose work did not get done never ends `succeeded`: a real worker runs the jobs, the work
fails the way it does in production (a model server answering HTTP 500, a statement the database refuses, a
transaction the database rolls back), and the job's status and its rows say so. An error that may pass retries
the job with the row still `processing`; one that cannot ends the job `failed` with the row recorded `failed`."""

from __future__ import annotations

import logging
from typing import Any

from langchain_core.embeddings import Embeddings
from langchain_core.messages import HumanMessage

from memory_agent import MemoryService, with_memory
from memory_agent.jobs.procrastinate_executor import REFRESH_CLUSTERS_TASK, SUMMARIZE_TASK
from memory_agent.llm.offline import OfflineSummaryModel
from tests.conftest import execute, query
from tests.support import EchoChat, FailingSummaryModel, ScriptedSummaryModel


async def say(memory: MemoryService, thread: str, texts: list[str]) -> None:
    app = with_memory(EchoChat().graph, memory)
    for text in texts:
        await app.ainvoke({"messages": [HumanMessage(text)]}, {"configurable": {"thread_id": thread, "user_id": "u1"}})


async def run_jobs(memory: MemoryService) -> None:
    """A real procrastinate worker on the service's pool, until no job is due."""
    await memory.loop.arun(memory.executor.run_worker(1, wait=False))  # type: ignore[attr-defined]


def jobs(database_url: str, task: str) -> list[tuple[Any, ...]]:
    return query(
        database_url,
        "SELECT status::text, attempts, coalesce(scheduled_at > now(), false) FROM procrastinate_jobs WHERE task_name = %s ORDER BY id",
        (task,),
    )


def memory_rows(database_url: str) -> list[tuple[Any, ...]]:
    return query(database_url, "SELECT status, error FROM memory ORDER BY memory_id")


ROUNDS = ["m0", "m1", "m2"]  # sequence 5 at the end of round 3: the first summary is due


def refuse_start(database_url: str, sqlstate: str, message: str) -> None:
    """Make start_memory fail in the database: picking a row up (attempts + 1) raises `sqlstate`."""
    execute(
        database_url,
        "CREATE FUNCTION refuse_start() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
        f" RAISE EXCEPTION '{message}' USING ERRCODE = '{sqlstate}'; END $$",
    )
    execute(
        database_url,
        "CREATE TRIGGER refuse_start BEFORE UPDATE OF attempts ON memory FOR EACH ROW EXECUTE FUNCTION refuse_start()",
    )


async def test_a_summary_whose_model_answers_500_ends_its_job_failed(open_memory, database_url, fake_openai):
    fake_openai.mode = "error"
    memory = await open_memory(executor="procrastinate", summary_max_attempts=2, summary_retry_backoff_s=0.01)
    await say(memory, "t", ROUNDS)
    await run_jobs(memory)
    # The summarizer retried the model itself; its row is `failed`, so running the job again could do nothing.
    assert len(fake_openai.structured_requests()) == 2
    assert jobs(database_url, SUMMARIZE_TASK) == [("failed", 1, False)]
    [(status, error)] = memory_rows(database_url)
    assert status == "failed" and "upstream exploded" in error


async def test_the_worker_logs_a_model_failure_in_one_line_and_a_bug_with_its_traceback(
    open_memory, database_url, fake_openai, caplog
):
    """A job whose model answers HTTP 500, then 400: procrastinate's line for each names the cause, no traceback
    (before: a traceback per failed job, of the line in the runner raising JobFailedError, while the row said it
    all). An unexpected error (a bug) keeps its traceback, once, in the summary's WARNING."""
    caplog.set_level(logging.INFO)
    caplog.set_level(logging.INFO, logger="memory_agent")  # whatever an earlier test of the process set it to
    fake_openai.mode = "error"
    memory = await open_memory(executor="procrastinate", summary_max_attempts=1)
    await say(memory, "t500", ROUNDS)
    await run_jobs(memory)
    fake_openai.mode, fake_openai.max_prompt_chars = "ok", 10  # HTTP 400: context_length_exceeded
    await say(memory, "t400", ROUNDS)
    await run_jobs(memory)
    ended = [r for r in caplog.records if r.name == "procrastinate.worker" and "ended with status" in r.getMessage()]
    ended = [r for r in ended if SUMMARIZE_TASK in r.getMessage()]
    assert [r.levelno for r in ended] == [logging.ERROR, logging.ERROR]
    assert "HTTP 500" in ended[0].getMessage() and "upstream exploded" in ended[0].getMessage()
    assert "HTTP 400" in ended[1].getMessage() and "maximum context" in ended[1].getMessage()
    assert [r.getMessage() for r in caplog.records if r.exc_info] == []
    caplog.clear()
    buggy = await open_memory(FailingSummaryModel(), executor="procrastinate", summary_max_attempts=1)
    await say(buggy, "bug", ROUNDS)
    await run_jobs(buggy)
    (traced,) = [r for r in caplog.records if r.exc_info]
    assert traced.levelno == logging.WARNING and "'bug'" in traced.getMessage()
    assert isinstance(traced.exc_info[1], RuntimeError) and "model exploded" in str(traced.exc_info[1])
    ended = [r for r in caplog.records if r.name == "procrastinate.worker" and "ended with status" in r.getMessage()]
    ended = [r for r in ended if SUMMARIZE_TASK in r.getMessage()]
    assert len(ended) == 1 and "model exploded" in ended[0].getMessage()


async def test_a_summary_the_database_refuses_to_start_ends_failed_and_so_does_its_row(open_memory, database_url):
    memory = await open_memory(OfflineSummaryModel(), executor="procrastinate")
    await say(memory, "t", ROUNDS)
    # What a distributed database answered for start_memory: the statement is refused, every time.
    refuse_start(database_url, "0A000", "cannot perform a lateral outer join here")
    await run_jobs(memory)
    assert jobs(database_url, SUMMARIZE_TASK) == [("failed", 1, False)]  # not retried: it cannot succeed
    [(status, error)] = memory_rows(database_url)
    assert status == "failed"  # not left `processing` until the sweep
    assert "could not start summarizing" in error and "lateral outer join" in error
    # The next round's trigger starts a new version instead of waiting for the stale-row timeout.
    execute(database_url, "DROP TRIGGER refuse_start ON memory")
    await say(memory, "t", ["m3"])
    await run_jobs(memory)
    assert [s for s, _ in memory_rows(database_url)] == ["failed", "completed"]


async def test_a_summary_start_the_database_rolls_back_is_retried_and_then_completes(open_memory, database_url):
    memory = await open_memory(OfflineSummaryModel(), executor="procrastinate")
    await say(memory, "t", ROUNDS)
    refuse_start(database_url, "40001", "could not serialize access")
    await run_jobs(memory)
    # Retried later (the wait not yet over), the row still `processing` for the retry to pick up.
    assert jobs(database_url, SUMMARIZE_TASK) == [("todo", 1, True)]
    assert memory_rows(database_url) == [("processing", None)]
    execute(database_url, "DROP TRIGGER refuse_start ON memory")
    execute(database_url, "UPDATE procrastinate_jobs SET scheduled_at = now()")  # the retry's wait, skipped
    await run_jobs(memory)
    assert jobs(database_url, SUMMARIZE_TASK) == [("succeeded", 2, False)]
    assert memory_rows(database_url) == [("completed", None)]


ALLERGIES = ["I'm allergic to peanuts.", "I'm allergic to shellfish.", "I'm allergic to penicillin."]


async def run_refresh(memory: MemoryService, database_url: str) -> str:
    """Run the safety net's periodic job once (the worker defers its tick, or the test does) and its status."""
    app = memory.executor.app  # type: ignore[attr-defined]
    execute(database_url, "DELETE FROM procrastinate_jobs WHERE task_name = %s", (REFRESH_CLUSTERS_TASK,))
    await memory.loop.arun(app.tasks[REFRESH_CLUSTERS_TASK].defer_async(timestamp=0))
    await run_jobs(memory)
    [(status, attempts, later)] = jobs(database_url, REFRESH_CLUSTERS_TASK)
    assert attempts == 1 and not later  # never retried: the next tick is its retry
    return status


async def test_the_cluster_safety_net_ends_failed_when_its_summaries_fail(open_memory, database_url):
    model = ScriptedSummaryModel(cluster_failures=1000)  # every cluster summary call fails, until the test says
    memory = await open_memory(model, executor="procrastinate")
    await say(memory, "allergies", ALLERGIES)
    await run_jobs(memory)
    assert [s for s, _ in memory_rows(database_url)] == ["completed"]
    assert await run_refresh(memory, database_url) == "failed"
    assert [i for i in await memory.long_term.list_items("u1") if i.is_summary] == []
    model.cluster_failures = 0
    assert await run_refresh(memory, database_url) == "succeeded"
    assert [len(i.source_item_ids) for i in await memory.long_term.list_items("u1") if i.is_summary] == [3]


class UnreachableEmbeddings(Embeddings):
    """An embedding server that cannot be reached."""

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        raise ConnectionRefusedError("embedding server refused the connection")

    def embed_query(self, text: str) -> list[float]:
        raise ConnectionRefusedError("embedding server refused the connection")


async def test_the_safety_net_ends_failed_when_the_embedding_catch_up_fails(open_memory, database_url):
    memory = await open_memory(OfflineSummaryModel(), embedder=UnreachableEmbeddings(), executor="procrastinate")
    await say(memory, "t", ["I'm allergic to peanuts.", "m1", "m2"])
    await run_jobs(memory)
    # The version is done: embedding follows it and does not hold it back.
    assert [s for s, _ in memory_rows(database_url)] == ["completed"]
    assert await run_refresh(memory, database_url) == "failed"
    assert query(database_url, "SELECT count(*) FROM item_embeddings") == [(0,)]
