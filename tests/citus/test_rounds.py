"""On a Citus cluster: the schema distributed as sql/distribution.sql says, and rounds through both integrations
with summaries made by both executors."""

from __future__ import annotations

import psycopg
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage
from psycopg.rows import dict_row

from memory_agent import MemoryMiddleware, with_memory
from memory_agent.db.citus import CitusDistribution
from memory_agent.db.connect import migrate_database
from memory_agent.db.migrate import SchemaMigrations
from memory_agent.db.schema import SchemaStatements
from memory_agent.llm.offline import OfflineSummaryModel
from tests.citus.conftest import query
from tests.integration.agent_support import ToolScriptModel, lookup, shout
from tests.support import EchoChat

USERS = ("ana", "ben", "cleo")


def config(thread: str, user: str) -> dict:
    return {"configurable": {"thread_id": thread, "user_id": user, "tenant_id": "acme"}}


async def run_rounds(app, rounds: int, threads: tuple[str, ...] = ("a", "b")) -> None:
    for user in USERS:
        for thread in threads:
            for n in range(rounds):
                await app.ainvoke(
                    {"messages": [HumanMessage(f"I like {user} apples {n} in {thread}")]},
                    config(f"{user}-{thread}", user),
                )


def distribution(url: str, schema: str) -> dict[str, tuple[str, str | None]]:
    """{table: (method, colocated-with-conversations | 'none')} of the schema's tables in Citus' catalog."""
    rows = query(
        url,
        schema,
        "SELECT c.relname, p.partmethod, p.colocationid = (SELECT colocationid FROM pg_dist_partition"
        "  WHERE logicalrelid = 'conversations'::regclass)"
        " FROM pg_dist_partition AS p JOIN pg_class AS c ON c.oid = p.logicalrelid"
        " WHERE c.relnamespace = %s::regnamespace",
        [schema],
    )
    return {name: (method, "conversations" if together else None) for name, method, together in rows}


def round_functions_pinning_plans(url: str, schema: str) -> list[str]:
    """Which of begin_round and end_round (both there) carry a plan_cache_mode setting."""
    settings = query(
        url,
        schema,
        "SELECT proname, proconfig FROM pg_proc WHERE pronamespace = %s::regnamespace"
        " AND proname IN ('begin_round', 'end_round')",
        [schema],
    )
    assert sorted(name for name, _ in settings) == ["begin_round", "end_round"], settings
    return [name for name, config in settings if any("plan_cache_mode" in c for c in config or [])]


async def test_every_table_is_distributed_and_a_rerun_keeps_it(open_memory, citus_url, schema):
    memory = await open_memory()
    await memory.aclose()
    placed = distribution(citus_url, schema)
    tables = {
        name
        for (name,) in query(
            citus_url,
            schema,
            "SELECT relname FROM pg_class WHERE relnamespace = %s::regnamespace AND relkind = 'r'"
            " AND relname NOT LIKE 'schema\\_%%'",
            [schema],
        )
    }
    assert set(placed) == tables  # every table says where it lives
    assert placed["api_keys"] == ("n", None)  # a reference table
    assert placed["conversation_owners"] == ("h", None)  # by thread id, a group of its own
    keyed_by_user = {name for name, where in placed.items() if where == ("h", "conversations")}
    assert placed.get("vector_centers", ("n", None)) == ("n", None)  # a reference table, where pgvector is
    assert tables - keyed_by_user - {"vector_centers"} == {"api_keys", "conversation_owners"}
    # Up to date: nothing applied, nothing distributed again.
    report = await migrate_database(citus_url, schema, procrastinate=False)
    assert (report.applied, report.definitions, report.distributed) == ([], [], False)
    # Definitions re-created (a release changed one): the distribution's settings on them come back.
    query(citus_url, schema, "UPDATE schema_definitions SET checksum = 'changed' WHERE name = 'rules.sql'")
    report = await migrate_database(citus_url, schema, procrastinate=False)
    assert report.definitions and report.distributed
    assert round_functions_pinning_plans(citus_url, schema) == []


async def test_a_fresh_migrate_warns_nothing_and_every_view_and_function_reaches_the_workers(citus_url, schema):
    """The definitions wait for the distribution: made before it, each view and one function came with a WARNING
    ("... has dependency to table ... that is not in Citus' metadata", 22 per fresh schema) and that function stayed
    on the coordinator."""
    warnings: list[str] = []
    async with await psycopg.AsyncConnection.connect(citus_url, autocommit=True, row_factory=dict_row) as conn:
        conn.add_notice_handler(
            lambda d: warnings.append(d.message_primary or "") if d.severity_nonlocalized == "WARNING" else None
        )
        report = await SchemaMigrations(schema, CitusDistribution(schema)).migrate(SchemaStatements(conn, schema))
    assert report.distributed and report.definitions
    assert warnings == []
    counts = (
        f"SELECT (SELECT count(*) FROM pg_proc WHERE pronamespace = '{schema}'::regnamespace)"
        f" || '/' || (SELECT count(*) FROM pg_class WHERE relnamespace = '{schema}'::regnamespace AND relkind = 'v')"
    )
    ((here,),) = query(citus_url, schema, counts)
    on_workers = query(citus_url, schema, "SELECT result FROM run_command_on_workers(%s)", [counts])
    assert len(on_workers) >= 1 and {result for (result,) in on_workers} == {here}, (here, on_workers)
    assert round_functions_pinning_plans(citus_url, schema) == []


async def test_rounds_through_with_memory_and_inline_summaries(open_memory, citus_url, schema):
    memory = await open_memory(model=OfflineSummaryModel())
    app = with_memory(EchoChat().graph, memory)
    await run_rounds(app, rounds=8)
    assert await memory.drain(timeout=30)
    per_thread = query(
        citus_url,
        schema,
        "SELECT conversation_id, count(*) FROM messages GROUP BY 1 ORDER BY 1",
    )
    assert per_thread == [(f"{u}-{t}", 16) for u in USERS for t in ("a", "b")]
    versions = query(
        citus_url, schema, "SELECT conversation_id, status, count(*) FROM memory GROUP BY 1, 2 ORDER BY 1, 2"
    )
    assert {(c, s) for c, s, _ in versions} == {(f"{u}-{t}", "completed") for u in USERS for t in ("a", "b")}
    # The next round is given the latest summary.
    state = await app.ainvoke({"messages": [HumanMessage("what did I say?")]}, config("ana-a", "ana"))
    assert state["messages"][-1].content.startswith("reply")
    context = await memory.conversations.get_context_for_workflow("ana-a", user_id="ana", tenant_id="acme")
    assert context.memory_text and "ana apples" in context.memory_text
    # Every round's metrics row, on its user's shard; the users' rows spread over more than one node.
    assert query(citus_url, schema, "SELECT count(*) FROM round_metrics") == [(len(USERS) * 2 * 8 + 1,)]
    nodes = query(
        citus_url,
        schema,
        "SELECT count(DISTINCT (s.nodename, s.nodeport)) FROM unnest(%s::text[]) AS u (user_id),"
        " LATERAL (SELECT get_shard_id_for_distribution_column('messages', u.user_id) AS shardid) AS k"
        " JOIN pg_dist_shard_placement AS s ON s.shardid = k.shardid",
        [list(USERS) + [f"user-{n}" for n in range(12)]],
    )
    assert nodes[0][0] >= 2


async def test_rounds_through_create_agent_middleware(open_memory, citus_url, schema):
    memory = await open_memory(model=OfflineSummaryModel())
    agent = create_agent(ToolScriptModel(), [lookup, shout], middleware=[MemoryMiddleware(memory)])
    await agent.ainvoke({"messages": [HumanMessage("hello there")]}, config("agent", "ana"))
    await agent.ainvoke({"messages": [HumanMessage("please tools:2:seq")]}, config("agent", "ana"))
    for n in range(3):
        await agent.ainvoke({"messages": [HumanMessage(f"more {n}")]}, config("agent", "ana"))
    assert await memory.drain(timeout=30)
    roles = query(
        citus_url, schema, "SELECT role FROM messages WHERE conversation_id = 'agent' ORDER BY sequence_number"
    )
    assert [r for (r,) in roles][:8] == [
        "user",
        "assistant",
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "assistant",
    ]
    assert query(citus_url, schema, "SELECT count(*) > 0 FROM memory WHERE status = 'completed'") == [(True,)]


async def test_summaries_as_procrastinate_jobs(open_memory, citus_url, schema):
    memory = await open_memory(model=OfflineSummaryModel(), executor="procrastinate")
    app = with_memory(EchoChat().graph, memory)
    await run_rounds(app, rounds=6, threads=("jobs",))
    queued = query(citus_url, schema, "SELECT count(*) FROM procrastinate_jobs WHERE status = 'todo'")
    assert queued[0][0] >= len(USERS)
    await memory.loop.arun(memory.executor.run_worker(2, wait=False))  # type: ignore[attr-defined]
    statuses = query(citus_url, schema, "SELECT status, count(*) FROM memory GROUP BY 1")
    assert dict(statuses).keys() == {"completed"}
    jobs = query(citus_url, schema, "SELECT status, count(*) FROM procrastinate_jobs GROUP BY 1")
    assert dict(jobs).keys() == {"succeeded"} and dict(jobs)["succeeded"] >= queued[0][0]
    # The job's work was done: every completed version has its text and the items it extracted.
    assert query(citus_url, schema, "SELECT count(*) FROM memory WHERE memory_text = ''") == [(0,)]
    assert query(citus_url, schema, "SELECT count(DISTINCT user_id) FROM items") == [(len(USERS),)]


async def test_a_round_whose_thread_is_deleted_meanwhile_stores_nothing(open_memory, citus_url, schema):
    """The erasure wins over a round in flight on Citus too: end_round's update of the conversation row it started
    on, and a failed round's metrics row, are routed statements that find the row gone."""
    memory = await open_memory(model=OfflineSummaryModel())
    app = with_memory(EchoChat().graph, memory)
    for n in range(6):
        await app.ainvoke({"messages": [HumanMessage(f"I like pears {n}")]}, config("gone", "ana"))
        assert await memory.drain(timeout=30)
    _, late = await memory.conversations.prepare_round("gone", [HumanMessage("late")], user_id="ana", tenant_id="acme")
    await memory.conversations.release_round(late)  # a second round in flight beside it
    _, failing = await memory.conversations.prepare_round(
        "gone", [HumanMessage("failing")], user_id="ana", tenant_id="acme"
    )
    assert late.memory_id is not None
    assert await memory.delete_conversation("gone", user_id="ana", tenant_id="acme") is True
    saved, result = await memory.conversations.finish_round("gone", [HumanMessage("late"), AIMessage("answer")], late)
    assert saved is None and result.outcome == "conversation_erased"
    await memory.conversations.record_failed_round(failing, "graph", RuntimeError("gave up"))
    for table in ("conversations", "messages", "memory", "round_metrics"):
        assert query(citus_url, schema, f"SELECT count(*) FROM {table} WHERE conversation_id = 'gone'") == [(0,)]


async def test_a_paused_rounds_lease_passes_once_to_a_new_message_elsewhere(open_memory, citus_url, schema):
    # pass_round_lease on the distributed round_leases: a new message on a thread paused by an interrupt, sent
    # through another process's middleware, takes the paused round's lease over; the lease then ends with its round.
    from langchain_core.tools import tool
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.types import interrupt

    memory = await open_memory(model=OfflineSummaryModel(), multitask_strategy="reject")

    @tool("lookup")
    def approve(key: str) -> str:
        """Look a key up, once a person approves."""
        return f"value of {key}: {interrupt('approve?')}"

    saver = InMemorySaver()

    def agent():
        return create_agent(ToolScriptModel(), [approve], middleware=[MemoryMiddleware(memory)], checkpointer=saver)

    paused = await agent().ainvoke({"messages": [HumanMessage("please tools:1:seq")]}, config("paused", "ben"))
    assert "__interrupt__" in paused
    result = await agent().ainvoke({"messages": [HumanMessage("never mind")]}, config("paused", "ben"))
    assert result["messages"][-1].text == "final answer without tools"
    assert query(citus_url, schema, "SELECT count(*) FROM round_leases WHERE conversation_id = 'paused'") == [(0,)]
    stored = query(citus_url, schema, "SELECT content FROM messages WHERE conversation_id = 'paused' ORDER BY 1")
    assert ("never mind",) in stored and ("please tools:1:seq",) in stored
