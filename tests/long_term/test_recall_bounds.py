"""Recall searches with a bounded start of the message (MEMORY_AGENT_RECALL_MAX_QUERY_CHARS): a 100 KB message costs
what its first 2,000 characters cost, never seconds of trigram matching a round."""

from __future__ import annotations

from langchain_core.messages import AIMessage, HumanMessage

from memory_agent.long_term.recall import RecallSettings, bounded_query, recall
from tests.conftest import query


def test_the_query_is_cut_after_a_word_within_the_limit():
    assert bounded_query("  short question  ", 100) == "short question"
    assert bounded_query("alpha beta gamma", 12) == "alpha beta"  # "gamma" would be cut: left out whole
    assert bounded_query("alpha beta gamma", 11) == "alpha beta"  # the cut falls on the space
    assert bounded_query("x" * 100_000, 2000) == "x" * 2000  # one word longer than the limit: cut where it is


async def test_a_100_kb_single_token_message_recalls_with_its_first_2000_characters(open_memory, database_url):
    memory = await open_memory()
    for n in range(3):
        await memory.finish_round(
            "earlier", [HumanMessage(f"my cat is called Miso {n}"), AIMessage("noted")], user_id="ana"
        )
    huge = "Miso" + "x" * 100_000
    messages, info = await memory.prepare_round("now", [HumanMessage(huge)], user_id="ana")
    await memory.finish_round("now", [HumanMessage(huge), AIMessage("ok")], info)
    ((used,),) = query(database_url, "SELECT query FROM round_metrics WHERE conversation_id = 'now'")
    assert used == huge[:2000]

    async def direct() -> str:
        async with memory.backend.connection() as conn:
            result = await recall(
                conn, tenant_id="default", user_id="ana", query="cat " * 50_000, settings=RecallSettings()
            )
        return result.query

    used = await memory.loop.arun(direct())
    assert len(used) <= 2000 and used.startswith("cat cat")
