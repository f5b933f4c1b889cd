"""On a Citus cluster: what an erasure commits where. delete_conversation and forget_user erase the user's rows in one
transaction on the user's node, and release the threads' owner rows (keyed by thread id) in transactions of their
own; the one two-phase commit left is forget_user's move of the user's cost-ledger rows to user '' (the tenant's
rows of no user), when the shard of '' is on another node than the user's. Counted from the PREPARE TRANSACTION
commands the coordinator sends (`citus.log_remote_commands`), on a user and threads placed so that each of those
writes would land on another node."""

from __future__ import annotations

import re
from collections.abc import Iterator
from itertools import islice

from langchain_core.messages import HumanMessage

from memory_agent import with_memory
from memory_agent.llm.offline import OfflineSummaryModel
from tests.citus.conftest import query
from tests.citus.test_routing import POOL_SIZE, listen
from tests.support import EchoChat

PREPARED = re.compile(r"PREPARE TRANSACTION 'citus_\d+_(\d+)_(\d+)_\d+'")


def node_of(url: str, schema: str, table: str, value: str) -> int:
    """The port of the node holding the shard of `table` where `value` (its distribution column's) lands."""
    ((port,),) = query(
        url,
        schema,
        "SELECT nodeport FROM pg_dist_shard_placement"
        " WHERE shardid = get_shard_id_for_distribution_column(%s::regclass, %s::text)",
        [table, value],
    )
    return int(port)


def names(prefix: str) -> Iterator[str]:
    return (f"{prefix}{n}" for n in range(1000))


def two_phase_commits(notices: list[tuple[str, str]]) -> tuple[int, set[str]]:
    """(two-phase commits, the nodes that prepared one) among the commands the coordinator sent."""
    prepared = [(PREPARED.search(text), detail) for text, detail in notices]
    commits = {match.groups() for match, _ in prepared if match}
    nodes = {re.sub(r" connectionId: \d+", "", detail) for match, detail in prepared if match}
    return len(commits), nodes


async def test_an_erasure_commits_on_the_users_node_and_forget_user_moves_the_ledger_in_one_two_phase_commit(
    open_memory, citus_url, schema
):
    memory = await open_memory(model=OfflineSummaryModel(), pool_min_size=POOL_SIZE, pool_max_size=POOL_SIZE)
    nobody = node_of(citus_url, schema, "llm_calls", "")
    # A user away from the tenant's rows of no user, and one beside them; threads whose owner rows are elsewhere.
    far = next(u for u in names("ana") if node_of(citus_url, schema, "conversations", u) != nobody)
    near = next(u for u in names("ben") if node_of(citus_url, schema, "conversations", u) == nobody)
    threads = {
        user: list(
            islice(
                (
                    t
                    for t in names(f"{user}-t")
                    if node_of(citus_url, schema, "conversation_owners", t)
                    != node_of(citus_url, schema, "conversations", user)
                ),
                2,
            )
        )
        for user in (far, near)
    }
    app = with_memory(EchoChat().graph, memory)
    for user, pair in threads.items():
        for thread in pair:
            config = {"configurable": {"thread_id": thread, "user_id": user, "tenant_id": "acme"}}
            for text in ("I live in Lisbon.", "I like tea.", "Fine.", "Bye."):
                await app.ainvoke({"messages": [HumanMessage(text)]}, config)
    assert await memory.drain(timeout=30)
    for user in (far, near):
        assert query(citus_url, schema, "SELECT count(*) > 0 FROM llm_calls WHERE user_id = %s", [user]) == [(True,)]

    notices: list[tuple[str, str]] = []
    await memory.loop.arun(listen(memory, notices))
    # delete_conversation: the user's rows on their node, then the owner row on another: no two-phase commit.
    assert await memory.delete_conversation(threads[far][0], user_id=far, tenant_id="acme")
    assert len([text for text, _ in notices if text.startswith("issuing ")]) > 10
    counted = {"delete_conversation": two_phase_commits(notices)}
    notices.clear()
    # forget_user, its ledger beside the rows of no user: none either.
    await memory.long_term.forget_user(near, tenant_id="acme")
    counted["forget_user, ledger on the same node"] = two_phase_commits(notices)
    notices.clear()
    # forget_user, its ledger on the other node: the ledger's move is one two-phase commit, on those two nodes.
    await memory.long_term.forget_user(far, tenant_id="acme")
    counted["forget_user, ledger on another node"] = two_phase_commits(notices)
    print(f"\ntwo-phase commits (count, nodes prepared): {counted}")

    assert counted["delete_conversation"] == (0, set())
    assert counted["forget_user, ledger on the same node"] == (0, set())
    commits, nodes = counted["forget_user, ledger on another node"]
    assert commits == 1 and len(nodes) == 2, counted
    for table in ("conversations", "messages", "memory", "round_metrics", "conversation_owners", "llm_calls"):
        assert query(citus_url, schema, f"SELECT count(*) FROM {table} WHERE user_id IN (%s, %s)", [far, near]) == [
            (0,)
        ], table
    assert query(citus_url, schema, "SELECT count(*) > 0 FROM llm_calls WHERE user_id = ''") == [(True,)]
