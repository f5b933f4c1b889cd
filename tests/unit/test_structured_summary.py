"""Structured summaries: the item lists are validated item by item, an invalid answer gets one retry, and
after it a bad item costs that item only, never the text summary."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import HumanMessage

from memory_agent.errors import SummarizationError
from memory_agent.llm.offline import OfflineSummaryModel, offline_items, offline_summary
from memory_agent.schemas import MemorySummaryOutput
from memory_agent.summarize.agent import MemoryAgent, SequencedMessage
from tests.support import ScriptedSummaryModel

ALLERGY = {"key": "allergies", "content": "The user is allergic to peanuts", "source_sequences": [0]}


def window(*texts: str) -> dict[str, Any]:
    messages = [SequencedMessage(n, HumanMessage(text)) for n, text in enumerate(texts)]
    return dict(
        previous_summary=None,
        base_end_sequence=None,
        new_messages=messages,
        window_start_seq=0,
        window_end_seq=len(texts) - 1,
    )


async def test_the_output_schema_has_the_five_lists_beside_the_text():
    fields = set(MemorySummaryOutput.model_fields)
    assert {"summary", "facts", "preferences", "decisions", "todos", "entities"} <= fields
    output = MemorySummaryOutput(summary="s", facts=[ALLERGY])  # type: ignore[list-item]
    assert output.structured().facts[0].key == "allergies"


async def test_the_prompt_asks_for_items_with_their_sequences():
    agent = MemoryAgent(OfflineSummaryModel())
    system, user = agent.build_prompt(**window("I'm allergic to peanuts."))
    assert "source_sequences" in str(system.text) and "facts" in str(system.text)
    assert "[seq 0] user: I'm allergic to peanuts." in str(user.text)


async def test_an_invalid_item_gets_one_retry_and_the_retry_is_used():
    model = ScriptedSummaryModel(
        answers=[
            {"summary": "first", "facts": [{"key": "", "content": "nothing"}]},
            {"summary": "second", "facts": [ALLERGY]},
        ]
    )
    result = await MemoryAgent(model).summarize(**window("I'm allergic to peanuts."))
    assert len(model.prompts) == 2
    assert "facts[0]" in model.prompts[1] and "key" in model.prompts[1]  # the retry names what was wrong
    assert result.text == "second" and result.dropped_items == ()
    assert [item.content for item in result.items.facts] == ["The user is allergic to peanuts"]


async def test_items_invalid_twice_are_dropped_and_the_text_kept():
    bad = {
        "summary": "kept text",
        "facts": [ALLERGY, {"key": "age", "content": "31", "importance": 7}],
        "todos": "call mom",  # not a list
        "preferences": [{"key": "ui_theme", "content": "dark", "source_sequences": [-1]}],
    }
    model = ScriptedSummaryModel(answers=[bad, bad])
    result = await MemoryAgent(model).summarize(**window("I'm allergic to peanuts."))
    assert len(model.prompts) == 2  # one retry, no more
    assert result.text == "kept text"
    assert [item.key for item in result.items.facts] == ["allergies"]  # the valid item survives
    assert result.items.todos == [] and result.items.preferences == []
    dropped = " | ".join(result.dropped_items)
    assert "facts[1]" in dropped and "importance" in dropped
    assert "todos: not a list" in dropped and "preferences[0]" in dropped


async def test_a_missing_text_after_the_retry_fails_the_attempt():
    model = ScriptedSummaryModel(answers=[{"facts": [ALLERGY]}, {"summary": "   ", "facts": [ALLERGY]}])
    with pytest.raises(SummarizationError, match="empty summary"):
        await MemoryAgent(model).summarize(**window("hello"))
    model = ScriptedSummaryModel(answers=[{"facts": []}, {"facts": []}])
    with pytest.raises(SummarizationError, match="summary"):
        await MemoryAgent(model).summarize(**window("hello"))
    assert len(model.prompts) == 2


async def test_a_summary_written_as_a_list_of_lines_is_one_text():
    """Small models answer the bullet points as a list of strings: one call, the lines joined (before: asked
    again, then failed for a `summary` that is a list)."""
    model = ScriptedSummaryModel(answers=[{"summary": ["- likes tea ", "", "- lives in Lisbon"]}])
    result = await MemoryAgent(model).summarize(**window("hello"))
    assert result.text == "- likes tea\n- lives in Lisbon" and len(model.prompts) == 1
    model = ScriptedSummaryModel(answers=[{"summary": ["a", 3]}, {"summary": [{"a": 1}]}])
    with pytest.raises(SummarizationError, match="`summary` is list"):
        await MemoryAgent(model).summarize(**window("hello"))


async def test_a_valid_answer_is_one_call():
    model = ScriptedSummaryModel(answers=[{"summary": "ok", "facts": [ALLERGY]}])
    result = await MemoryAgent(model).summarize(**window("I'm allergic to peanuts."))
    assert len(model.prompts) == 1 and result.items.facts[0].source_sequences == [0]


def test_the_offline_summarizer_extracts_full_lines_of_the_window_only():
    cut = offline_summary("[seq 3] user: I moved to Rio de Janeiro, " + "and that is a long story " * 5)
    assert cut.endswith("…")
    prompt = (
        "Window: sequences 2-5.\n"
        "Previous memory (covers up to sequence 3):\n"
        "- [seq 0] user: I live in Lisbon.\n"  # before the window: gone
        "- [seq 2] user: I'm allergic to peanuts.\n"
        f"{cut}\n"  # cut short by the previous memory: not read
        "New messages (sequences 4-5):\n"
        "[seq 4] user: I prefer dark mode.\n"
        "[seq 5] assistant: I'm allergic to nothing, I am a bot.\n"
    )
    items = offline_items(prompt)
    assert [(i["key"], i["source_sequences"]) for i in items["facts"]] == [("allergies", [2])]
    assert [(i["key"], i["content"]) for i in items["preferences"]] == [("ui_theme", "The user prefers the dark theme")]


async def test_a_summary_over_the_cap_is_asked_again_shorter_then_refused():
    long = {"summary": "word " * 100, "facts": [ALLERGY]}  # ~125 tokens, over a cap of 40
    model = ScriptedSummaryModel(answers=[long, {"summary": "short enough", "facts": [ALLERGY]}])
    agent = MemoryAgent(model, max_words=20, max_tokens=40)
    result = await agent.summarize(**window("I'm allergic to peanuts."))
    assert result.text == "short enough" and len(model.prompts) == 2
    # the retry names the length and the limit, and asks for the words the setting allows
    assert "over the limit of 40" in model.prompts[1] and "at most 20 words" in model.prompts[1]
    model = ScriptedSummaryModel(answers=[long, long])
    with pytest.raises(SummarizationError, match="hard cap of 40 tokens .MEMORY_AGENT_MEMORY_MAX_TOKENS"):
        await MemoryAgent(model, max_words=20, max_tokens=40).summarize(**window("hello"))
    assert len(model.prompts) == 2  # refused after one retry, never cut and stored


def test_the_offline_summarizer_keeps_to_the_length_it_is_asked_for():
    new = "\n".join(f"[seq {n}] user: " + "a fairly long sentence about the weather " * 3 for n in range(10))
    prompt = f"At most {{words}} words.\nWindow: sequences 0-9.\nNew messages (sequences 0-9):\n{new}\n"
    roomy = offline_summary(prompt.format(words=1000))
    tight = offline_summary(prompt.format(words=80))
    assert len(roomy.split()) > 80 >= len(tight.split())
    assert [line.split("]")[0] for line in tight.splitlines()] == [f"- [seq {n}" for n in range(10)]  # every line
    tiny = offline_summary(prompt.format(words=20))  # narrowest lines still too long: the oldest go
    assert len(tiny.split()) <= 20 and tiny.splitlines()[-1].startswith("- [seq 9]")
