"""The round start is one prepared statement (the function begin_round: the lease, then memory + gap) whose own
statements run on one generic plan per connection, and the setting that asks for it holds for them only: a pooled
connection handed out after a round start has the server's default again."""

from __future__ import annotations

from langchain_core.messages import HumanMessage

from memory_agent import with_memory
from tests.support import EchoChat

START_PLANS = (
    "SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE statement LIKE 'SELECT * FROM begin_round(%'"
)
FUNCTION_SETTINGS = (
    "SELECT p.proconfig FROM pg_proc AS p JOIN pg_namespace AS n ON n.oid = p.pronamespace"
    " WHERE p.proname = 'begin_round' AND n.nspname = current_schema()"
)


async def test_round_starts_reuse_one_plan_and_leave_the_connection_as_it_was(open_memory) -> None:
    memory = await open_memory(pool_min_size=1, pool_max_size=1)  # every statement on the same connection
    app = with_memory(EchoChat().graph, memory)
    config = {"configurable": {"thread_id": "plans"}}
    for n in range(8):
        await app.ainvoke({"messages": [HumanMessage(f"message {n}")]}, config)

    async def read() -> tuple[list[int], str]:
        async with memory.backend.session() as conn:
            cur = await conn.execute(START_PLANS)
            plans = [row["generic_plans"] + row["custom_plans"] for row in await cur.fetchall()]
            cur = await conn.execute(FUNCTION_SETTINGS)
            function = await cur.fetchone()
            assert function is not None
            assert "plan_cache_mode=force_generic_plan" in function["proconfig"]
            cur = await conn.execute("SELECT current_setting('plan_cache_mode') AS mode")
            row = await cur.fetchone()
            assert row is not None
            return plans, row["mode"]

    plans, mode = await memory.loop.arun(read())
    assert plans == [8]  # one prepared statement, run once per round start
    assert mode == "auto"
    context = await memory.conversations.get_context_for_workflow("plans")
    assert len(context.gap_messages) + (context.memory_end_sequence or -1) + 1 == 16  # the reads still read it all
