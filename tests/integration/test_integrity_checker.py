"""The integrity checker finds each kind of damage it promises to find (and nothing on a healthy store)."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from memory_agent.testing import find_violations
from tests.conftest import execute, query

pytestmark = pytest.mark.no_integrity_check  # these tests break the store on purpose


async def healthy_store(open_memory, database_url: str) -> None:
    memory = await open_memory()
    for n in range(5):
        await memory.conversations.finish_round("c", [HumanMessage(f"user {n}"), AIMessage(f"reply {n}")])
        assert await memory.drain(timeout=10)
    await memory.aclose()
    assert query(database_url, "SELECT count(*) FROM memory WHERE status = 'completed'") == [(3,)]
    assert find_violations(database_url) == {}


DAMAGE = {
    "sequences gap-free": "DELETE FROM messages WHERE conversation_id = 'c' AND sequence_number = 3",
    "rounds whole": "UPDATE messages SET round_number = 5 WHERE conversation_id = 'c' AND sequence_number = 2",
    "linear chain": "UPDATE memory SET base_memory_id = NULL WHERE memory_id = (SELECT max(memory_id) FROM memory)",
    "no memory past the stored messages": "UPDATE memory SET end_sequence = 40 WHERE memory_id = 1",
    "metrics agreeing": "INSERT INTO round_metrics (tenant_id, user_id, conversation_id, round_number, first_sequence,"
    " last_sequence, retrieval_path) VALUES ('default', 'conversation:c', 'c', 2, 2, 4, 'raw')",
}


@pytest.mark.parametrize("rule", sorted(DAMAGE))
async def test_checker_names_the_broken_rule(open_memory, database_url, rule):
    await healthy_store(open_memory, database_url)
    execute(database_url, DAMAGE[rule])
    found = find_violations(database_url)
    assert f"memory_agent: {rule}" in found, found


async def test_checker_finds_two_processing_rows(open_memory, database_url):
    await healthy_store(open_memory, database_url)
    # The partial unique index forbids this; the checker must still say so if the index were lost.
    execute(database_url, "DROP INDEX idx_memory_one_processing")
    execute(
        database_url,
        "INSERT INTO memory (tenant_id, user_id, conversation_id, start_sequence, end_sequence, status)"
        " VALUES ('default', 'conversation:c', 'c', 0, 1, 'processing'),"
        " ('default', 'conversation:c', 'c', 0, 2, 'processing')",
    )
    assert "memory_agent: at most one processing" in find_violations(database_url)
