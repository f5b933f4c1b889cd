"""What forgetting leaves outside the user's own rows: no job row and no ledger row names a forgotten user (their
calls stay counted under no user), and the summary jobs of a deleted conversation go with it."""

from __future__ import annotations

import asyncio
import uuid

from langchain_core.messages import HumanMessage

from memory_agent import with_memory
from memory_agent.jobs.procrastinate_executor import REMOVE_FINISHED_TASK
from memory_agent.llm.offline import OfflineSummaryModel
from tests.conftest import query
from tests.long_term.test_forget import tables_holding
from tests.support import EchoChat, GatedSummaryModel

JOBS_OF = "SELECT count(*) FROM procrastinate_jobs WHERE args ->> 'user_id' = %s"


async def test_forget_user_leaves_no_row_naming_the_user(open_memory, database_url):
    user = f"user-{uuid.uuid4().hex[:10]}"
    memory = await open_memory(model=OfflineSummaryModel(), executor="procrastinate")
    app = with_memory(EchoChat().graph, memory)

    async def rounds(thread: str, who: str) -> None:
        for n in range(3):  # the third round's end starts the first summary: one job
            config = {"configurable": {"thread_id": thread, "user_id": who}}
            await app.ainvoke({"messages": [HumanMessage(f"I live in Lisbon, round {n}.")]}, config)

    for thread, who in (("a1", user), ("a2", user), ("b1", "bob")):
        await rounds(thread, who)
    await memory.loop.arun(memory.executor.run_worker(1, wait=False))  # type: ignore[attr-defined]
    await rounds("a3", user)  # a job still waiting
    summary_jobs = "SELECT status::text, count(*) FROM procrastinate_jobs WHERE task_name = 'memory_agent.summarize'"
    assert query(database_url, summary_jobs + " GROUP BY 1 ORDER BY 1") == [
        ("succeeded", 3),
        ("todo", 1),
    ]
    calls = query(database_url, "SELECT count(*), sum(cost) FROM llm_calls WHERE user_id = %s", [user])[0]
    # A tenant's month is the sum of its rows (one per user, and the tenant's own).
    month_spend = "SELECT tenant_id, month, sum(cost), sum(calls) FROM tenant_monthly_spend GROUP BY 1, 2 ORDER BY 1, 2"
    spend = query(database_url, month_spend)
    assert calls[0] == 2 and {"procrastinate_jobs.args", "llm_calls.user_id"} <= set(tables_holding(database_url, user))

    # A deleted conversation takes its summary jobs with it; the user's other jobs stay.
    assert await memory.delete_conversation("a1") is True
    assert query(database_url, JOBS_OF, [user]) == [(2,)]

    await memory.long_term.forget_user(user)
    assert tables_holding(database_url, user) == []
    assert query(database_url, JOBS_OF, ["bob"]) == [(1,)]
    # The tenant's calls and spend stay whole: the user's calls are counted under no user.
    assert query(database_url, "SELECT count(*), sum(cost) FROM llm_calls WHERE user_id = ''") == [calls]
    assert query(database_url, month_spend) == spend


async def test_a_job_running_while_its_user_is_forgotten_stops_naming_them_once_finished_jobs_are_removed(
    open_memory, database_url
):
    """A forget erases the jobs that are not running; one running then keeps its row until procrastinate's
    removal of finished jobs (hourly, `finished_job_retention_h` after it ended) takes it, as it takes every
    finished job: the table does not grow with every round either."""
    user = f"user-{uuid.uuid4().hex[:10]}"
    model = GatedSummaryModel()
    memory = await open_memory(model=model, executor="procrastinate")  # finished jobs kept 24 hours
    app = with_memory(EchoChat().graph, memory)
    for n in range(3):  # the third round's end starts the first summary: one job
        config = {"configurable": {"thread_id": "t1", "user_id": user}}
        await app.ainvoke({"messages": [HumanMessage(f"I live in Lisbon, round {n}.")]}, config)
    worker = memory.loop.submit(memory.executor.run_worker(1, wait=False))  # type: ignore[attr-defined]
    while not model.calls:  # the job is running, in the model's call
        await asyncio.sleep(0.01)
    await memory.long_term.forget_user(user)
    model.release(10)
    await asyncio.wrap_future(worker)
    assert query(database_url, JOBS_OF, [user]) == [(1,)]  # finished, still naming the user

    # A worker whose removal keeps no finished job.
    cleaner = await open_memory(model=OfflineSummaryModel(), executor="procrastinate", finished_job_retention_h=0)
    removal = cleaner.executor.app.tasks[REMOVE_FINISHED_TASK]  # type: ignore[attr-defined]
    await cleaner.loop.arun(removal.defer_async(timestamp=0))
    await cleaner.loop.arun(cleaner.executor.run_worker(1, wait=False))  # type: ignore[attr-defined]
    assert tables_holding(database_url, user) == []
    # Every job that had finished before the removal ran went with it.
    before = f"SELECT task_name FROM procrastinate_jobs WHERE id < (SELECT max(id) FROM procrastinate_jobs WHERE task_name = '{REMOVE_FINISHED_TASK}')"
    assert query(database_url, before) == []
