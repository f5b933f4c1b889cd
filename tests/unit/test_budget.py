"""The context budget as pure functions: round splitting, per-message cap, oldest-round-first trimming."""

from __future__ import annotations

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.messages.utils import count_tokens_approximately

from memory_agent.conversation.budget import apply_budget, split_rounds, truncate_message
from memory_agent.conversation.context import inject_memory


def tool_round(n: int, calls: int = 2, size: int = 40) -> list[BaseMessage]:
    ids = [f"r{n}c{i}" for i in range(calls)]
    return [
        HumanMessage(f"question {n} " + "q" * size, id=f"h{n}"),
        AIMessage("", tool_calls=[{"name": "lookup", "args": {"key": i}, "id": i} for i in ids], id=f"a{n}"),
        *(ToolMessage("x" * size, tool_call_id=i, id=f"t{i}") for i in ids),
        AIMessage(f"answer {n} " + "a" * size, id=f"f{n}"),
    ]


def build(messages: list[BaseMessage]) -> list[BaseMessage]:
    return inject_memory("the memory", messages)


def test_split_rounds_keeps_tool_exchanges_and_multi_message_inputs_together():
    gap = [
        *tool_round(1),
        HumanMessage("a"),
        HumanMessage("b"),
        AIMessage("c"),
        SystemMessage("s"),
        HumanMessage("d"),
        AIMessage("e"),
    ]
    rounds = split_rounds(gap)
    assert [len(r) for r in rounds] == [5, 3, 3]
    # A user message while a tool call is unanswered does not start a round.
    dangling = [HumanMessage("u"), AIMessage("", tool_calls=[{"name": "t", "args": {}, "id": "z"}]), HumanMessage("v")]
    assert [len(r) for r in split_rounds(dangling)] == [3]
    assert split_rounds([]) == []


def test_nothing_changes_without_limits():
    gap, current = tool_round(1), [HumanMessage("now", id="now")]
    result = apply_budget(gap, current, build)
    assert result.context == build([*gap, *current]) and not result.applied
    assert result.tokens_before == result.tokens_after == count_tokens_approximately(result.context)


def test_context_budget_drops_whole_rounds_oldest_first_and_keeps_the_input():
    gap = [*tool_round(1), *tool_round(2), *tool_round(3)]
    current = [HumanMessage("now " + "n" * 400, id="now")]
    full = count_tokens_approximately(build([*gap, *current]))
    one_round = count_tokens_approximately(build([*tool_round(3), *current]))
    result = apply_budget(gap, current, build, max_context_tokens=one_round)
    assert result.gap == tool_round(3)  # rounds 1 and 2 dropped whole, round 3 kept whole
    assert (result.dropped_rounds, result.dropped_messages) == (2, 10)
    assert result.tokens_before == full and result.tokens_after <= one_round and not result.over_budget
    assert result.context[-1].text == current[0].text
    assert result.context[0].text.startswith("[Previous context: the memory]")  # memory moves to the kept round
    assert result.record()["dropped_rounds"] == 2

    # Below what the input alone needs: every gap round goes, the input stays, and it says so.
    tiny = apply_budget(gap, current, build, max_context_tokens=10)
    assert tiny.gap == [] and tiny.current == current and tiny.over_budget and tiny.applied
    assert tiny.dropped_rounds == 3


def test_per_message_cap_cuts_text_with_a_visible_marker():
    long = HumanMessage("word " * 500, id="long")
    cut, over = truncate_message(long, 50)
    assert over == count_tokens_approximately([long]) - 50
    assert count_tokens_approximately([cut]) <= 50 and cut.id == "long"
    assert cut.text.startswith("word word") and cut.text.endswith(
        f"… [truncated by memory_agent: {over} tokens over the cap]"
    )
    same, zero = truncate_message(HumanMessage("short"), 50)
    assert zero == 0 and same.text == "short"
    # No text to cut (a tool call with long arguments): left alone, no misleading marker.
    calls = AIMessage("", tool_calls=[{"name": "t", "args": {"blob": "b" * 1000}, "id": "c"}])
    assert truncate_message(calls, 50) == (calls, 0)
    # Content blocks: text blocks are cut, the rest is kept.
    blocks = HumanMessage([{"type": "text", "text": "z" * 2000}, {"type": "image_url", "image_url": {"url": "data:,"}}])
    cut_blocks, over_blocks = truncate_message(blocks, 100)
    assert over_blocks > 0 and any(b.get("type") == "image_url" for b in cut_blocks.content)
    assert cut_blocks.content[-1]["text"].startswith("… [truncated by memory_agent:")


def test_per_message_cap_keeps_tool_calls_and_records_each_cut():
    gap = tool_round(1, size=2000)
    result = apply_budget(gap, [HumanMessage("now", id="now")], build, max_message_tokens=100)
    assert [m.id for m in result.gap] == [m.id for m in gap]
    assert result.gap[1].tool_calls == gap[1].tool_calls
    assert [t["id"] for t in result.truncated_messages] == ["h1", "tr1c0", "tr1c1", "f1"]
    assert all(count_tokens_approximately([m]) <= 100 for m in result.gap)
    assert result.applied and result.record()["truncated_messages"][0]["part"] == "gap"
