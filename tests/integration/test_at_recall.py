"""`memory-agent at` and context_at prove what the model knew, recall included: the long-term block a round was
given, each hit's provenance, and the model input rebuilt exactly; forgetting what a block quoted clears it."""

from __future__ import annotations

import json
from typing import Any

import pytest
from langchain_core.messages import HumanMessage

from memory_agent import with_memory
from memory_agent.llm.offline import OfflineSummaryModel
from memory_agent.observability import reads as obs
from tests.conftest import query
from tests.integration.test_cli_observe import invoke
from tests.support import EchoChat

FACT = "I'm allergic to peanuts."
QUESTION = "Remember what I am allergic to?"


async def ask(memory: Any, chat: EchoChat, thread: str, text: str) -> None:
    config = {"configurable": {"thread_id": thread, "user_id": "ana"}}
    await with_memory(chat.graph, memory).ainvoke({"messages": [HumanMessage(text)]}, config)


@pytest.mark.parametrize("mode", ["prefix", "system"])
async def test_at_shows_the_recalled_block_the_round_was_given(open_memory, database_url, mode):
    memory = await open_memory(injection_mode=mode)
    chat = EchoChat()
    await ask(memory, chat, "first", FACT)
    await ask(memory, chat, "second", QUESTION)
    context = await memory.loop.arun(obs.context_at(memory.backend, "second", 1))
    recall = context.recall
    assert recall is not None and context.round["retrieval_path"] == "raw"  # no conversation memory yet
    assert "[first #0 user" in recall["block"] and FACT in recall["block"]
    assert recall["path"] == "fts" and recall["items"] == 1
    (hit,) = recall["hits"]
    assert (hit["kind"], hit["conversation_id"], hit["sequences"], hit["role"]) == ("turn", "first", [0], "user")
    assert "fts" in hit["paths"] and hit["score"] > 0
    # The model input rebuilt from stored rows is what the wrapped graph was given, block included.
    given = chat.seen[-1]
    rebuilt = context.model_input(mode)
    assert [(type(m), m.text) for m in rebuilt] == [(type(m), m.text) for m in given]
    assert FACT in "".join(m.text for m in given)

    result = invoke(database_url, "at", "second", "1", "--json")
    assert result.exit_code == 0, result.output
    shown = json.loads(result.output)
    assert shown["recall"]["block"] == recall["block"] and shown["recall"]["hits"] == recall["hits"]
    assert "recall_block" not in shown["round"]
    result = invoke(database_url, "at", "second", "1")
    assert result.exit_code == 0, result.output
    assert "long-term block: recall path fts, 1 hits" in result.output and "first #0" in result.output
    assert "allergic to peanuts" in result.output

    # A round that recalled nothing says so.
    result = invoke(database_url, "at", "first", "1")
    assert "No long-term block" in result.output

    # Forgetting the conversation the block quoted clears the block (the round's figures stay).
    assert await memory.delete_conversation("first", user_id="ana")
    assert query(database_url, "SELECT count(*) FROM round_metrics WHERE recall_block LIKE '%%peanuts%%'") == [(0,)]
    assert query(database_url, "SELECT recall_path, recall_hits FROM round_metrics") == [("fts", None)]
    after = await memory.loop.arun(obs.context_at(memory.backend, "second", 1))
    assert after.recall is None
    result = invoke(database_url, "at", "second", "1")
    assert "No long-term block: recall path fts, no block stored" in result.output


async def test_forgetting_a_recalled_item_clears_the_blocks_that_quoted_it(open_memory, database_url):
    memory = await open_memory(model=OfflineSummaryModel())
    chat = EchoChat()
    for text in (FACT, "What should I cook tonight?", "Thanks."):
        await ask(memory, chat, "dinner", text)
    assert await memory.drain(timeout=10)
    (item,) = await memory.long_term.list_items("ana")
    await ask(memory, chat, "music", "I play the cello on Sundays.")
    await ask(memory, chat, "tea", "Which day do I play the cello?")
    await ask(memory, chat, "lunch", "Snack ideas? I am allergic to what again?")
    quoted = "SELECT conversation_id FROM round_metrics WHERE recall_block IS NOT NULL ORDER BY id"
    before = [row[0] for row in query(database_url, quoted)]
    assert "tea" in before and "lunch" in before
    hits = query(database_url, "SELECT recall_hits FROM round_metrics WHERE conversation_id = 'lunch'")[0][0]
    assert any(hit.get("item_ids") == [item.item_id] for hit in hits)
    await memory.long_term.forget_item("ana", item.item_id)
    assert query(
        database_url, "SELECT recall_block, recall_hits FROM round_metrics WHERE conversation_id = 'lunch'"
    ) == [(None, None)]
    # Rounds whose blocks did not quote it keep theirs.
    assert [row[0] for row in query(database_url, quoted)] == [c for c in before if c != "lunch"]
