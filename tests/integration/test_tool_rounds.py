"""Tool-call rounds through create_agent + MemoryMiddleware: the window, the gap given to the model and the
summarizer's input never separate a tool result from the AI message that called it (issue: orphaned
ToolMessages after a cut), for sequential calls, parallel calls, and a round longer than the whole window."""

from __future__ import annotations

import re
from typing import Any

from langchain.agents import create_agent
from langchain_core.messages import BaseMessage, HumanMessage, messages_from_dict
from langchain_core.outputs import ChatResult

from memory_agent import MemoryMiddleware, OfflineSummaryModel
from tests.conftest import query
from tests.integration.agent_support import ToolScriptModel, assert_tool_pairs, lookup

NEW_MESSAGE_LINE = re.compile(r"^\[seq (\d+)\] ", re.MULTILINE)


class RecordingSummaryModel(OfflineSummaryModel):
    """The offline summarizer, keeping every prompt it was given."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        object.__setattr__(self, "prompts", [])

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        self.prompts.append("\n".join(str(m.text) for m in messages))
        return super()._generate(messages, stop=stop)


def stored(url: str, thread: str, start: int = 0, end: int = 10**9) -> list[BaseMessage]:
    rows = query(
        url,
        "SELECT message FROM messages WHERE conversation_id = %s AND sequence_number BETWEEN %s AND %s"
        " ORDER BY sequence_number",
        [thread, start, end],
    )
    return messages_from_dict([r[0] for r in rows])


def round_bounds(url: str, thread: str) -> tuple[set[int], set[int]]:
    rows = query(
        url,
        "SELECT min(sequence_number), max(sequence_number) FROM messages WHERE conversation_id = %s"
        " GROUP BY round_number",
        [thread],
    )
    return {r[0] for r in rows}, {r[1] for r in rows}


def check_memory_and_summaries(url: str, thread: str, summarizer: RecordingSummaryModel) -> list[tuple[int, int]]:
    """Every memory window and every summarizer input is whole rounds, hence whole tool exchanges."""
    starts, ends = round_bounds(url, thread)
    windows = query(
        url,
        "SELECT start_sequence, end_sequence, summarized_start, summarized_end, status FROM memory"
        " WHERE conversation_id = %s ORDER BY memory_id",
        [thread],
    )
    assert windows and all(status == "completed" for *_, status in windows)
    for start, end, summarized_start, summarized_end, _ in windows:
        assert start in starts and end in ends, (start, end, starts, ends)
        assert summarized_start in starts and summarized_end == end
        assert_tool_pairs(stored(url, thread, start, end))
        assert_tool_pairs(stored(url, thread, summarized_start, summarized_end))
    assert len(summarizer.prompts) == len(windows)
    for prompt, (_, _, summarized_start, summarized_end, _) in zip(summarizer.prompts, windows):
        # The summarizer was given exactly the stored messages of its (whole-round) range.
        sequences = [int(s) for s in NEW_MESSAGE_LINE.findall(prompt)]
        assert sequences == list(range(summarized_start, summarized_end + 1))
        lines = [line for line in prompt.splitlines() if NEW_MESSAGE_LINE.match(line)]
        assert sum(line.count("called lookup(") for line in lines) == sum(" result: value of" in line for line in lines)
    return [(start, end) for start, end, *_ in windows]


async def run_rounds(memory, texts: list[str], thread: str, *, drain: bool) -> ToolScriptModel:
    model = ToolScriptModel()
    agent = create_agent(model, [lookup], middleware=[MemoryMiddleware(memory)])
    for text in texts:
        await agent.ainvoke({"messages": [HumanMessage(text)]}, {"configurable": {"thread_id": thread}})
        if drain:
            assert await memory.drain(timeout=10)
    assert await memory.drain(timeout=10)
    for call in model.calls:
        assert_tool_pairs(call)  # the gap and this run's own tool loop, as given to the model
    return model


async def test_sequential_tool_calls(open_memory, database_url):
    summarizer = RecordingSummaryModel()
    memory = await open_memory(model=summarizer, memory_rolling_window_size=8, memory_summarize_after_seq=3)
    texts = [f"question {n} tools:2:seq" for n in range(1, 7)]  # 6 messages a round
    model = await run_rounds(memory, texts, "seq", drain=True)
    windows = check_memory_and_summaries(database_url, "seq", summarizer)
    assert windows[-1] == (30, 35)  # the 8-message window holds one whole round, not 8 messages
    assert any(start > 0 for start, _ in windows)
    # Once a memory exists, the model's context starts with it, injected into a user message.
    last_round_first_call = model.calls[-3]
    assert isinstance(last_round_first_call[0], HumanMessage)
    assert last_round_first_call[0].text.startswith("[Previous context: ")


async def test_parallel_tool_calls_without_waiting_for_summaries(open_memory, database_url):
    summarizer = RecordingSummaryModel()
    memory = await open_memory(model=summarizer, memory_rolling_window_size=7, memory_summarize_after_seq=4)
    # Rounds of 6 and 5 messages: odd lengths, where rounding the window start to even would split a round.
    texts = [f"question {n} tools:{3 if n % 2 else 2}:par" for n in range(1, 9)]
    model = await run_rounds(memory, texts, "par", drain=False)
    windows = check_memory_and_summaries(database_url, "par", summarizer)
    assert windows[0] == (0, 5)  # how many follow depends on timing; each was checked above
    parallel = [m for call in model.calls for m in call if getattr(m, "tool_calls", None) and len(m.tool_calls) > 1]
    assert parallel, "the model was given parallel tool calls in its context"


async def test_round_longer_than_the_window(open_memory, database_url):
    summarizer = RecordingSummaryModel()
    memory = await open_memory(model=summarizer, memory_rolling_window_size=4, memory_summarize_after_seq=3)
    texts = ["short one", "long tools:4:seq", "short two", "long again tools:3:par"]
    model = await run_rounds(memory, texts, "long", drain=True)
    windows = check_memory_and_summaries(database_url, "long", summarizer)
    starts, _ = round_bounds(database_url, "long")
    # Round 2 (seq 2-11) is 10 messages, longer than the 4-message window: its memory covers it whole.
    assert (2, 11) in windows
    assert windows[-1] == (14, 19)  # round 4: 6 messages, again longer than the window, whole
    assert sorted(starts) == [0, 2, 12, 14]
    assert len(stored(database_url, "long")) == 20
    # The last round's first call: memory of round 3 injected into round 4's input, no gap.
    assert [type(m).__name__ for m in model.calls[-2]] == ["HumanMessage"]
