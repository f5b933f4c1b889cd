"""With the procrastinate executor, a summary's job is deferred inside the round's own transaction, on the
round's own connection: the `processing` row and its job commit together (no window between commit and defer),
and procrastinate uses the service's pool (no second pool)."""

from __future__ import annotations

from langchain_core.messages import HumanMessage

from memory_agent import with_memory
from tests.conftest import execute, query
from tests.support import EchoChat


def config(thread: str) -> dict:
    return {"configurable": {"thread_id": thread, "user_id": "u1"}}


async def test_the_job_commits_with_its_processing_row(open_memory, database_url):
    memory = await open_memory(executor="procrastinate")
    app = with_memory(EchoChat().graph, memory)
    for n in range(3):  # sequence 5 at the end of round 3: the design's first summary
        await app.ainvoke({"messages": [HumanMessage(f"m{n}")]}, config("jobs"))
    rows = query(
        database_url,
        "SELECT m.xmin::text, j.xmin::text, j.args, mr.xmin::text FROM memory AS m"
        " JOIN procrastinate_jobs AS j ON (j.args ->> 'memory_id')::int = m.memory_id"
        " JOIN messages AS mr ON mr.user_id = m.user_id AND mr.conversation_id = m.conversation_id"
        "  AND mr.sequence_number = m.end_sequence",
    )
    assert len(rows) == 1
    memory_xid, job_xid, args, round_xid = rows[0]
    # One transaction wrote the round's last message, the processing row and the job.
    assert memory_xid == job_xid == round_xid
    # The whole key (the job is a single-shard lookup), and its tenant (the jobs table's tenant policy reads it).
    assert args == {"user_id": "u1", "memory_id": 1, "tenant_id": "default"}
    assert memory.executor.app.connector.pool is memory.backend.pool  # type: ignore[attr-defined]
    await memory.loop.arun(memory.executor.run_worker(1, wait=False))  # type: ignore[attr-defined]
    assert query(database_url, "SELECT status FROM memory") == [("completed",)]


async def test_a_rolled_back_round_leaves_no_job(open_memory, database_url):
    memory = await open_memory(executor="procrastinate")
    app = with_memory(EchoChat().graph, memory)
    for n in range(2):
        await app.ainvoke({"messages": [HumanMessage(f"m{n}")]}, config("rb"))
    # The third round's transaction fails after the trigger rule claimed its row and deferred its job: a
    # metrics row that cannot be written (a CHECK added for the test) rolls the whole round back.
    execute(database_url, "ALTER TABLE round_metrics ADD CONSTRAINT no_third CHECK (round_number <> 3) NOT VALID")
    try:
        await app.ainvoke({"messages": [HumanMessage("m2")]}, config("rb"))
    except Exception as exc:
        assert "no_third" in str(exc)
    else:
        raise AssertionError("the round should have failed")
    assert query(database_url, "SELECT count(*) FROM memory") == [(0,)]
    assert query(database_url, "SELECT count(*) FROM procrastinate_jobs") == [(0,)]
    assert query(database_url, "SELECT max(sequence_number) FROM messages") == [(3,)]


async def test_rounds_that_start_no_summary_queue_one_embedding_job_per_user(open_memory, database_url):
    # With an embedder, a round's turns get their vectors in the background whether or not a summary follows:
    # a job per user waiting at most (its queueing lock), which the worker runs.
    from memory_agent.llm.offline import OfflineSummaryModel
    from memory_agent.long_term.embedders import HashingEmbeddings

    memory = await open_memory(model=OfflineSummaryModel(), embedder=HashingEmbeddings(), executor="procrastinate")
    app = with_memory(EchoChat().graph, memory)
    for n in range(2):  # sequence 3: below the first summary
        await app.ainvoke({"messages": [HumanMessage(f"the garden, note {n}")]}, config("embed"))
    jobs = query(database_url, "SELECT task_name, args, status FROM procrastinate_jobs")
    assert jobs == [("memory_agent.embed_turns", {"user_id": "u1", "tenant_id": "default"}, "todo")]
    await memory.loop.arun(memory.executor.run_worker(1, wait=False))  # type: ignore[attr-defined]
    assert query(database_url, "SELECT count(*) FROM message_embeddings") == [(4,)]
    done = "SELECT status FROM procrastinate_jobs WHERE task_name = 'memory_agent.embed_turns'"
    assert query(database_url, done) == [("succeeded",)]
