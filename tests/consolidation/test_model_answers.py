"""Consolidation's model answering badly through the real OpenAI client: an invalid insight costs that insight, and
answers that made no note still count against the tenant's monthly ceiling."""

from __future__ import annotations

import json

import pytest

from memory_agent.consolidation import ConsolidationRunner
from memory_agent.consolidation.model import ConsolidationModelError, ConsolidationOutput, call_consolidation_model
from memory_agent.errors import SummarizationError
from memory_agent.llm import chat_model_from_setting
from memory_agent.settings import MemorySettings
from tests.conftest import query
from tests.consolidation.conftest import day, write_day


def consolidator() -> object:
    return chat_model_from_setting("json-in-text", variable="X", role="consolidation", max_retries=0)


async def test_an_invalid_insight_is_left_out_and_the_note_kept(fake_openai):
    """An importance on a scale the model made up (8) and an insight without its text: left out, the note and the
    valid insight kept (before: the whole consolidation failed, every night, for one bad insight)."""
    fake_openai.refuse_tools = fake_openai.refuse_response_format = True
    insights = [
        {"text": "Likes tea", "importance": 8},
        {"importance": 0.5},
        {"text": "Moved to Lisbon", "importance": 0.9},
    ]
    fake_openai.text_answer = json.dumps({"summary": "The user likes tea and moved to Lisbon.", "insights": insights})
    output, call = await call_consolidation_model(consolidator(), "Consolidate.", "- a", ConsolidationOutput)
    assert [(i.text, i.importance) for i in output.insights] == [("Moved to Lisbon", 0.9)]
    assert output.summary.startswith("The user likes tea") and call.output_tokens > 0
    for none in ("none", None):
        fake_openai.text_answer = json.dumps({"summary": "Tea.", "insights": none})
        output, _ = await call_consolidation_model(consolidator(), "Consolidate.", "- a", ConsolidationOutput)
        assert output.insights == []
    fake_openai.text_answer = json.dumps({"insights": []})  # the note itself missing: no note
    with pytest.raises(SummarizationError, match="gave no valid ConsolidationOutput: summary: Field required"):
        await call_consolidation_model(consolidator(), "Consolidate.", "- a", ConsolidationOutput)


async def test_answers_that_made_no_note_count_against_the_ceiling(fake_openai, conn, pool, database_url):
    """A model answering garbage every way: each answer it was billed for is in the ledger and the tenant's spend
    (before: the reservation was released and nothing recorded, so a model failing every night never counted
    against the monthly ceiling)."""
    fake_openai.refuse_tools = fake_openai.refuse_response_format = True
    fake_openai.text_answer = "I could not find anything worth keeping today."
    await write_day(conn, "alice", 0)
    runner = ConsolidationRunner(pool, consolidator(), MemorySettings(consolidation_enabled=True))
    with pytest.raises(ConsolidationModelError) as raised:
        await runner.run_due(day(1, 5))
    rows = query(database_url, "SELECT purpose, model, input_tokens, output_tokens FROM llm_calls")
    assert [row[:2] for row in rows] == [("consolidation", "json-in-text")] and rows[0][2] > 50
    assert query(database_url, "SELECT calls FROM tenant_monthly_spend") == [(1,)]
    call = raised.value.call
    assert call is not None and rows[0][2:] == (call.input_tokens, call.output_tokens)
