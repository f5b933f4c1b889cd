"""One trigger rule: end_round decides it in SQL (due_summary), the other paths (trigger_summary, the sweep, imports)
in Python (window.summary_due, then calculate_summary_range). Both give the same outcome and the same window on
every state, and a round end through the service decides what the Python rule decides on the state it left."""

from __future__ import annotations

import itertools
import json
import random

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from memory_agent.conversation.window import calculate_summary_range, summary_due
from tests.conftest import query


def python_rule(case: dict) -> tuple[str | None, int | None]:
    outcome = summary_due(
        case["last"],
        summarize_after_seq=case["after"],
        min_new_messages=case["min_new"],
        processing_age_s=case["age"],
        processing_timeout_s=case["timeout"],
        base_end_sequence=case["base_end"],
    )
    if outcome is not None:
        return outcome, None
    start, _ = calculate_summary_range(case["last"], case["window"], case["starts"] or None)
    return None, start


def cases() -> list[dict]:
    """States around every boundary: the threshold, the timeout (either side of it and at it), the cadence, and
    round starts inside the window, before it (a round longer than the window) or none (user/assistant pairs)."""
    rng = random.Random(7)
    found = []
    for last, after, min_new, age, base_end, window in itertools.product(
        (0, 1, 4, 5, 6, 13, 14, 15, 40),
        (0, 5),
        (1, 4),
        (None, 0.0, 299.5, 300.0, 300.5),
        (None, "one behind", "cadence behind"),
        (1, 4, 14),
    ):
        base = {"one behind": last - 1, "cadence behind": last - min_new}.get(base_end) if base_end else None
        sizes = [rng.choice((1, 2, 2, 3, 6, 20)) for _ in range(30)]
        all_starts = [sum(sizes[:i]) for i in range(len(sizes)) if sum(sizes[:i]) <= last]
        first = all_starts[-1]  # the round that ends at `last` starts here
        # As end_round passes them: trigger_state's starts inside the window, then the round's own first sequence.
        inside = [s for s in all_starts if s >= max(0, last - window + 1)]
        for starts in ([*inside, first], []):
            found.append(
                {
                    "last": last,
                    "after": after,
                    "min_new": min_new,
                    "age": age,
                    "timeout": 300.0,
                    "base_end": base,
                    "window": window,
                    "starts": starts,
                }
            )
    return found


def test_sql_and_python_decide_alike(database_url):
    states = cases()
    decided = query(
        database_url,
        "SELECT d.outcome, d.start_sequence FROM jsonb_array_elements(%s::jsonb) WITH ORDINALITY AS c (v, n)"
        " CROSS JOIN LATERAL due_summary((v->>'last')::int, (v->>'after')::int, (v->>'min_new')::int,"
        " (v->>'age')::float8, (v->>'timeout')::float8, (v->>'base_end')::int, (v->>'window')::int,"
        " ARRAY(SELECT jsonb_array_elements_text(v->'starts')::int)) AS d ORDER BY n",
        (json.dumps(states),),
    )
    assert len(decided) == len(states)
    outcomes = {python_rule(state)[0] for state in states}
    assert outcomes == {None, "below_threshold", "already_processing", "no_new_messages"}  # every branch walked
    for state, sql_says in zip(states, decided, strict=True):
        assert sql_says == python_rule(state), state


async def test_a_round_longer_than_the_window_is_summarized_whole(open_memory, database_url):
    """A round end through the service: a round with tool calls longer than the window is claimed from its first
    message (the window never splits a round), with the cadence and threshold as the Python rule applies them."""
    memory = await open_memory(memory_rolling_window_size=4, memory_min_new_messages=3, memory_summarize_after_seq=3)
    user = HumanMessage("first question")
    _, info = await memory.conversations.prepare_round("long", [user])
    _, trigger = await memory.conversations.finish_round("long", [user, AIMessage("first answer")], info)
    assert trigger.outcome == "below_threshold"  # last sequence 1 < 3
    user = HumanMessage("second question")
    _, info = await memory.conversations.prepare_round("long", [user])
    calls = [AIMessage("", tool_calls=[{"name": "look", "args": {"n": n}, "id": f"call{n}"}]) for n in range(3)]
    tools = [ToolMessage(f"result {n}", tool_call_id=f"call{n}") for n in range(3)]
    steps = [m for pair in zip(calls, tools, strict=True) for m in pair]
    _, trigger = await memory.conversations.finish_round("long", [user, *steps, AIMessage("second answer")], info)
    assert (trigger.outcome, trigger.start_sequence, trigger.end_sequence) == ("started", 2, 9)
    assert python_rule(
        {
            "last": 9,
            "after": 3,
            "min_new": 3,
            "age": None,
            "timeout": 300.0,
            "base_end": None,
            "window": 4,
            "starts": [2],
        }
    ) == (None, 2)
    assert await memory.drain(timeout=10)
    # One message later, the cadence (3 new messages after the summary's end) is not met: nothing claimed.
    user = HumanMessage("third")
    _, info = await memory.conversations.prepare_round("long", [user])
    _, trigger = await memory.conversations.finish_round("long", [user], info)
    assert trigger.outcome == "no_new_messages"
    assert query(
        database_url,
        "SELECT round_number, trigger_outcome, summary_triggered FROM round_metrics WHERE conversation_id = 'long'"
        " ORDER BY round_number",
    ) == [(1, "below_threshold", False), (2, "started", True), (3, "no_new_messages", False)]
