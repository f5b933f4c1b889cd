"""Summarizer failures: recorded on the row, never in the user's round, history and chain intact."""

from __future__ import annotations

import pytest
from langchain_core.messages import HumanMessage

from memory_agent import with_memory
from memory_agent.llm.structured import MISSES_TO_FORGET
from tests.conftest import query
from tests.reliability.test_concurrency import assert_linear_chain
from tests.support import EchoChat, FailingSummaryModel

EXPECTED_ERROR = {
    "error": "Error code: 500",
    "hang": "Timeout",
    "empty": "empty summary",
    "malformed": "unparseable output",
}


@pytest.mark.parametrize("mode", ["error", "hang", "empty", "malformed"])
async def test_model_failure_is_recorded_and_round_served_from_previous_memory(
    fake_openai, open_memory, database_url, mode
):
    fake_openai.hang_s = 3
    memory = await open_memory(model=None, summary_timeout_s=0.5, summary_max_attempts=2, summary_retry_backoff_s=0.01)
    chat = EchoChat()
    app = with_memory(chat.graph, memory)
    config = {"configurable": {"thread_id": f"fail-{mode}"}}

    async def round_(n: int):
        return await app.ainvoke({"messages": [HumanMessage(f"message {n}")]}, config)

    for n in (1, 2, 3):
        await round_(n)
    assert await memory.drain(timeout=10)  # memory 1 (0-5) completed while the model works

    fake_openai.mode = mode
    if mode == "malformed":
        fake_openai.text_answer = "no idea"  # every way of asking answers garbage, JSON in plain text too
    await round_(4)  # ends at seq 7: memory 2 (0-7, base 1) starts and fails
    assert await memory.drain(timeout=15)
    status, error, generation_ms, attempts = query(
        database_url, "SELECT status, error, generation_time_ms, attempts FROM memory WHERE memory_id = 2"
    )[0]
    assert status == "failed" and EXPECTED_ERROR[mode] in error and generation_ms is not None
    assert attempts == 1  # one pick-up of the row; the model calls inside it were retried
    # Memory 1, then memory 2 tried twice; an answer that does not validate is asked for once more inside its
    # attempt (the errors shown to the model), so those attempts are two calls each.
    calls_per_attempt = 2 if mode in ("empty", "malformed") else 1
    # Garbage (no object at all) MISSES_TO_FORGET calls in a row makes the remembered way forgotten: the last call
    # asks every way again, the JSON-schema format too (and JSON in plain text, not counted here).
    forgotten = 1 if mode == "malformed" else 0
    assert MISSES_TO_FORGET == 3
    assert len(fake_openai.structured_requests()) == 1 + 2 * calls_per_attempt + forgotten

    # The user's round keeps working: round 5 is answered from memory 1 + the gap it left (seq 6-7).
    fake_openai.mode = "ok"
    result = await round_(5)
    assert result["messages"][-1].text == "reply 5"
    seen = chat.seen[-1]
    assert seen[0].text.startswith("[Previous context:") and seen[0].text.endswith("message 4")
    assert [m.text for m in seen[1:]] == ["reply 4", "message 5"]

    # The next trigger (round 5's end) builds on the latest *completed* memory: the chain stays linear.
    assert await memory.drain(timeout=15)
    rows = await memory.conversations.get_memory_history(f"fail-{mode}")
    assert [(r.memory_id, r.status, r.base_memory_id) for r in rows] == [
        (1, "completed", None),
        (2, "failed", 1),
        (3, "completed", 1),
    ]
    assert (rows[2].start_sequence, rows[2].end_sequence, rows[2].summarized_start) == (0, 9, 6)
    assert_linear_chain([r for r in rows if r.status != "failed"])
    assert query(database_url, "SELECT count(*) FROM messages") == [(10,)]


async def test_retries_are_bounded_and_failure_never_reaches_the_round(open_memory, database_url):
    model = FailingSummaryModel()
    memory = await open_memory(model=model, summary_max_attempts=3, summary_retry_backoff_s=0.01)
    app = with_memory(EchoChat().graph, memory)
    for n in range(1, 6):
        result = await app.ainvoke({"messages": [HumanMessage(f"m{n}")]}, {"configurable": {"thread_id": "boom"}})
        assert result["messages"][-1].text == f"reply {n}"
        assert await memory.drain(timeout=10)
    rows = query(database_url, "SELECT memory_id, status, base_memory_id, error FROM memory ORDER BY 1")
    assert [(i, s, b) for i, s, b, _ in rows] == [(1, "failed", None), (2, "failed", None), (3, "failed", None)]
    assert all("RuntimeError: model exploded" in e for *_, e in rows[:2])
    # Two failed summaries in a row: the conversation backs off, its third is recorded without a model call,
    # naming the failure's kind and the row with its whole error.
    assert "not attempted" in rows[2][3] and "not attempted" not in rows[1][3]
    assert "the last with RuntimeError (the whole error is on memory 2)" in rows[2][3]
    assert model.count == 6  # 2 summaries x 3 attempts, no more


async def test_a_slow_model_fails_the_row_before_it_is_reclaimed(fake_openai, open_memory, database_url):
    """Every call times out: the attempts stop within MEMORY_AGENT_PROCESSING_TIMEOUT_S, so the runner records the
    row `failed` with the timeout instead of the row counting as stale (a sweep reclaims it, the next round starts
    another summary beside it) while a third call is still made (before: 3 attempts x 0.6 s past the 1 s)."""
    fake_openai.mode, fake_openai.hang_s = "hang", 3.0
    memory = await open_memory(
        memory_model="slow-model",
        summary_timeout_s=0.6,
        summary_max_attempts=3,
        summary_retry_backoff_s=0.01,
        processing_timeout_s=1.0,
        sweep_interval_s=0,
    )
    app = with_memory(EchoChat().graph, memory)
    for n in range(1, 4):
        await app.ainvoke({"messages": [HumanMessage(f"m{n}")]}, {"configurable": {"thread_id": "slow"}})
    assert await memory.drain(timeout=10)
    ((status, error),) = query(database_url, "SELECT status, error FROM memory")
    assert status == "failed" and "did not answer within" in error and "PROCESSING_TIMEOUT_S" in error
    assert len(fake_openai.structured_requests()) == 2
