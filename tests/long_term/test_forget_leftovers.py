"""What forgetting leaves outside the user's own rows: no job row and no ledger row names a forgotten user (their
calls stay counted under no user), and the summary jobs of a deleted conversation go with it."""

from __future__ import annotations

import uuid

from langchain_core.messages import HumanMessage

from memory_agent import with_memory
from memory_agent.llm.offline import OfflineSummaryModel
from tests.conftest import query
from tests.long_term.test_forget import tables_holding
from tests.support import EchoChat

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
