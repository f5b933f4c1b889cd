"""On a Citus cluster: a round's statements (round start with recall, round end, the summary it starts, its long-term
items) touch only the shards of the round's user, and commit on one node (no two-phase commit). Read from
`citus.log_remote_commands` (every command the coordinator sends a worker comes back as a notice) and EXPLAIN."""

from __future__ import annotations

import re
from typing import Any

import pytest
from langchain_core.messages import HumanMessage

from memory_agent import resources, with_memory
from memory_agent.llm.offline import OfflineSummaryModel
from tests.citus.conftest import query
from tests.support import EchoChat

POOL_SIZE = 3


def shards_of(url: str, schema: str, user: str, thread: str) -> tuple[set[int], int]:
    """The shards holding `user`'s rows in every table colocated with conversations, and the owners' shard of
    `thread`."""
    rows = query(
        url,
        schema,
        "SELECT get_shard_id_for_distribution_column(p.logicalrelid, %s::text) FROM pg_dist_partition AS p"
        " WHERE p.colocationid = (SELECT colocationid FROM pg_dist_partition"
        "  WHERE logicalrelid = 'conversations'::regclass)",
        [user],
    )
    ((owner,),) = query(
        url, schema, "SELECT get_shard_id_for_distribution_column('conversation_owners', %s::text)", [thread]
    )
    return {shard for (shard,) in rows}, owner


async def listen(memory: Any, notices: list[tuple[str, str]]) -> None:
    """Every pooled connection reports the commands it sends to workers (the pool holds POOL_SIZE of them)."""
    pool = memory.backend.pool
    taken = [await pool.getconn() for _ in range(POOL_SIZE)]
    for conn in taken:
        conn.add_notice_handler(lambda d: notices.append((d.message_primary or "", d.message_detail or "")))
        await conn.execute("SET citus.log_remote_commands TO on")
    for conn in taken:
        await pool.putconn(conn)


@pytest.mark.parametrize("long_term", [False, True])
async def test_a_round_and_its_summary_touch_one_users_shards_and_commit_on_one_node(
    open_memory, citus_url, schema, long_term
):
    """Rounds and their summaries (with and without the long-term items they extract): only the user's shards,
    every write on one node, no two-phase commit."""
    memory = await open_memory(
        model=OfflineSummaryModel(), pool_min_size=POOL_SIZE, pool_max_size=POOL_SIZE, long_term=long_term
    )
    app = with_memory(EchoChat().graph, memory)
    config = {"configurable": {"thread_id": "routed", "user_id": "ana", "tenant_id": "acme"}}
    # The first round claims the thread (a statement of its own, keyed by the thread id).
    await app.ainvoke({"messages": [HumanMessage("I live in Lisbon.")]}, config)
    notices: list[tuple[str, str]] = []
    await memory.loop.arun(listen(memory, notices))
    rounds = 8
    for n in range(rounds):
        await app.ainvoke({"messages": [HumanMessage(f"I'm allergic to peanuts {n}.")]}, config)
    assert await memory.drain(timeout=30)
    assert query(citus_url, schema, "SELECT count(*) > 0 FROM memory WHERE status = 'completed'") == [(True,)]
    assert query(citus_url, schema, "SELECT count(*) > 0 FROM items") == [(long_term,)]

    commands = [(text, detail) for text, detail in notices if text.startswith("issuing ")]
    assert len(commands) > rounds * 4, "citus.log_remote_commands reported too few commands"
    two_phase = [text for text, _ in commands if "PREPARE TRANSACTION" in text]
    assert two_phase == []
    user_shards, owner_shard = shards_of(citus_url, schema, "ana", "routed")
    named = {int(m) for text, _ in commands for m in re.findall(rf"{schema}\.[a-z_]+?_(\d+)\b", text)}
    assert named and named <= user_shards | {owner_shard}, named - user_shards - {owner_shard}
    writes = {
        re.sub(r" connectionId: \d+", "", detail)
        for text, detail in commands
        if re.match(r"issuing (INSERT|UPDATE|DELETE|SELECT .*FOR (KEY )?(SHARE|UPDATE))", text)
    }
    assert len(writes) == 1, writes  # every write of the rounds and summaries on one node
    print(
        f"\n{rounds} rounds (long_term={long_term}): {len(commands)} remote commands, shards {sorted(named)},"
        f" writes on {writes}"
    )


def task_count(url: str, schema: str, name: str, params: dict[str, Any]) -> list[str]:
    plan = query(url, schema, "EXPLAIN (COSTS OFF) " + resources.queries()[name], params)
    return [line for (line,) in plan if "Task Count" in line]


async def test_the_round_path_statements_plan_one_task(open_memory, citus_url, schema):
    await open_memory()
    key = {"tenant_id": "acme", "user_id": "ana", "conversation_id": "routed"}
    assert task_count(citus_url, schema, "claim_conversation", key) == ["  Task Count: 1"]
    assert task_count(citus_url, schema, "conversation_owner", key) == ["  Task Count: 1"]
    assert task_count(citus_url, schema, "last_sequence", key) == ["  Task Count: 1"]
    assert task_count(citus_url, schema, "gap_cap_cause", {**key, "memory_end_sequence": 3}) == ["  Task Count: 1"]
