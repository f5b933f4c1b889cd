"""The summary cadence and the prompt-caching layout of a round's input: with the default cadence a summary starts
every 12 new messages; between two summaries the memory block is byte-identical and the gap only grows at its
end, so each round's input extends the previous round's except its last user message (recall's block included,
which rides on that message); the summarizer's instructions are the same for every summary."""

from __future__ import annotations

import itertools
import logging
import re
from typing import Any

import pytest
from langchain_core.messages import BaseMessage, HumanMessage

from memory_agent import MemorySettings, with_memory
from memory_agent.conversation.context import escape_memory_text
from memory_agent.errors import ConfigurationError
from memory_agent.llm.offline import OfflineSummaryModel
from memory_agent.summarize.agent import MemoryAgent, SequencedMessage
from tests.support import EchoChat

CADENCE_ENV = "MEMORY_AGENT_MEMORY_MIN_NEW_MESSAGES"  # the suite pins the design's cadence (tests/conftest.py)
_MEMORY = re.compile(r"^\[Previous context: (.*?)(?<!\\)\]\n\n", re.DOTALL)


def shown(messages: list[BaseMessage]) -> list[tuple[str, Any]]:
    return [(m.type, m.content) for m in messages]


def memory_block(messages: list[BaseMessage]) -> str | None:
    first_user = next(m for m in messages if isinstance(m, HumanMessage))
    match = _MEMORY.match(first_user.text)
    return match.group(1) if match else None


def extends(previous: list[BaseMessage], current: list[BaseMessage]) -> bool:
    """`current` starts with `previous` minus its last message (the round's question)."""
    head = shown(previous[:-1])
    return shown(current[: len(head)]) == head


async def rounds(memory: Any, thread: str, questions: list[str], user: str | None = None) -> list[list[BaseMessage]]:
    chat = EchoChat()
    app = with_memory(chat.graph, memory)
    configurable = {"thread_id": thread, **({"user_id": user} if user else {})}
    for question in questions:
        await app.ainvoke({"messages": [HumanMessage(question)]}, {"configurable": configurable})
        assert await memory.drain(timeout=10)  # a summary due is done before the next round, as with a user
    return chat.seen


def test_the_default_cadence_and_its_bounds(monkeypatch):
    monkeypatch.delenv(CADENCE_ENV, raising=False)
    assert MemorySettings().memory.summary_cadence == 12
    assert MemorySettings(memory_rolling_window_size=8).memory.summary_cadence == 8  # never past the window
    assert MemorySettings(memory_min_new_messages=1).memory.summary_cadence == 1
    with pytest.raises(ConfigurationError, match="MIN_NEW_MESSAGES \\(15\\).*ROLLING_WINDOW_SIZE \\(14\\)"):
        MemorySettings(memory_min_new_messages=15)


async def test_the_cadence_stays_within_the_gap_cap(open_memory, monkeypatch, caplog):
    """A gap cap under the default cadence lowers the cadence to it, and a cadence set above the cap is refused
    (before: the gap of every round between two summaries was cut, dropping messages no memory covered yet)."""
    monkeypatch.delenv(CADENCE_ENV, raising=False)
    assert MemorySettings(max_gap_messages=8).summary_cadence == 8
    assert MemorySettings(max_gap_messages=8, memory_min_new_messages=6).summary_cadence == 6
    with pytest.raises(ConfigurationError, match="MIN_NEW_MESSAGES \\(10\\).*MAX_GAP_MESSAGES \\(8\\)"):
        MemorySettings(max_gap_messages=8, memory_min_new_messages=10)
    memory = await open_memory(max_gap_messages=8)
    caplog.set_level(logging.WARNING, "memory_agent")
    seen = await rounds(memory, "capped", [f"question {n}" for n in range(1, 21)])
    assert not [r for r in caplog.records if "capped" in r.getMessage()]
    changed = [n for n in range(2, 21) if memory_block(seen[n - 1]) != memory_block(seen[n - 2])]
    assert [n for n in range(2, 21) if not extends(seen[n - 2], seen[n - 1])] == changed


async def test_between_two_summaries_each_input_extends_the_last(open_memory, monkeypatch):
    monkeypatch.delenv(CADENCE_ENV, raising=False)
    memory = await open_memory()
    seen = await rounds(memory, "cadence", [f"question {n}" for n in range(1, 31)])
    history = await memory.conversations.get_memory_history("cadence")
    assert [(m.status, m.end_sequence) for m in history] == [("completed", e) for e in (5, 17, 29, 41, 53)]
    # A new memory is served in the round after each summary (rounds 3, 9, 15, 21, 27 end at 5, 17, ...):
    # there the memory block changes and the prefix is new; in every other round both hold.
    changed = [n for n in range(2, 31) if memory_block(seen[n - 1]) != memory_block(seen[n - 2])]
    broken = [n for n in range(2, 31) if not extends(seen[n - 2], seen[n - 1])]
    assert changed == [4, 10, 16, 22, 28]
    assert broken == [4, 10, 16, 22, 28]
    assert memory_block(seen[9]) == escape_memory_text(history[1].memory_text)  # the second memory, as injected
    assert max(len(given) for given in seen[3:]) <= 13  # bounded: memory + at most 12 gap messages + question


async def test_the_recalled_block_rides_on_the_question(open_memory):
    memory = await open_memory(memory_summarize_after_seq=1000, memory_rolling_window_size=1002)
    await rounds(memory, "facts", ["My violin teacher is called Ingrid.", "My dog is called Rex."], user="ana")
    questions = ["Who is my violin teacher?", "What is my dog called?", "And my violin teacher?", "And my dog?"]
    seen = await rounds(memory, "asking", questions, user="ana")
    blocks = [given[-1].text.split("]\n\n")[0] for given in seen]
    assert all(given[-1].text.startswith("[Long-term memory: ") for given in seen)
    assert len(set(blocks)) > 1  # recall differs from round to round ...
    assert all(extends(previous, current) for previous, current in itertools.pairwise(seen))  # ... the prefix does not
    assert all("Long-term memory" not in m.text for given in seen for m in given[:-1])


def test_the_summarizer_instructions_are_the_same_for_every_window():
    agent = MemoryAgent(OfflineSummaryModel())
    messages = [SequencedMessage(n, HumanMessage(f"message {n}")) for n in range(40)]
    first = agent.build_prompt(
        previous_summary=None, base_end_sequence=None, new_messages=messages[:6], window_start_seq=0, window_end_seq=5
    )
    later = agent.build_prompt(
        previous_summary="- earlier",
        base_end_sequence=27,
        new_messages=messages[28:40],
        window_start_seq=26,
        window_end_seq=39,
    )
    assert first[0].content == later[0].content  # the cacheable prefix: tool schema + these instructions
    assert "Window: sequences 26-39." in later[1].text  # the window travels with the messages
