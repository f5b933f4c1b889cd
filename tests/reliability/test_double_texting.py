"""Double texting: rounds of one conversation started while another runs, in one process or several.
`enqueue` (default) runs them one after the other, each seeing the one before; `reject` refuses the second."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.graph import START, MessagesState, StateGraph

from memory_agent import RoundInProgressError, with_memory
from tests.conftest import execute, query


class SlowChat:
    """A chat graph that takes `delay` seconds and records what it was given."""

    def __init__(self, delay: float = 0.4, fail_on: str | None = None) -> None:
        self.seen: list[list[str]] = []

        async def respond(state: MessagesState) -> dict[str, Any]:
            texts = [str(m.text) for m in state["messages"]]
            self.seen.append(texts)
            if fail_on and texts[-1] == fail_on:
                raise RuntimeError("graph exploded")
            await asyncio.sleep(delay)
            return {"messages": [AIMessage(f"reply to {texts[-1]}")]}

        builder = StateGraph(MessagesState)
        builder.add_node("respond", respond)
        builder.add_edge(START, "respond")
        self.graph = builder.compile()


def config(thread: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}}


def stored(url: str, thread: str) -> list[tuple[int, str]]:
    return query(
        url, "SELECT round_number, content FROM messages WHERE conversation_id = %s ORDER BY sequence_number", [thread]
    )


async def test_enqueue_runs_a_double_text_after_the_first_round(open_memory, database_url):
    memory = await open_memory()
    chat = SlowChat()
    app = with_memory(chat.graph, memory)
    first = asyncio.create_task(app.ainvoke({"messages": [HumanMessage("first")]}, config("dt")))
    await asyncio.sleep(0.1)  # the first round is inside its graph
    second = asyncio.create_task(app.ainvoke({"messages": [HumanMessage("second")]}, config("dt")))
    await asyncio.gather(first, second)
    assert stored(database_url, "dt") == [(1, "first"), (1, "reply to first"), (2, "second"), (2, "reply to second")]
    # The second round started from the history the first one left, not from a stale one.
    assert chat.seen[1] == ["first", "reply to first", "second"]


async def test_reject_refuses_a_double_text_and_writes_nothing_of_it(open_memory, database_url):
    memory = await open_memory(multitask_strategy="Reject")
    app = with_memory(SlowChat().graph, memory)
    first = asyncio.create_task(app.ainvoke({"messages": [HumanMessage("first")]}, config("rj")))
    await asyncio.sleep(0.1)
    with pytest.raises(RoundInProgressError, match="MULTITASK_STRATEGY=reject"):
        await app.ainvoke({"messages": [HumanMessage("second")]}, config("rj"))
    await first
    assert stored(database_url, "rj") == [(1, "first"), (1, "reply to first")]
    await app.ainvoke({"messages": [HumanMessage("third")]}, config("rj"))  # free again once it ended
    assert len(stored(database_url, "rj")) == 4


async def test_a_failing_round_releases_the_conversation(open_memory, database_url):
    memory = await open_memory(multitask_strategy="reject")
    app = with_memory(SlowChat(delay=0, fail_on="boom").graph, memory)
    with pytest.raises(RuntimeError, match="graph exploded"):
        await app.ainvoke({"messages": [HumanMessage("boom")]}, config("fail"))
    await app.ainvoke({"messages": [HumanMessage("fine")]}, config("fail"))
    assert stored(database_url, "fail") == [(1, "fine"), (1, "reply to fine")]


async def test_a_dead_holder_blocks_only_until_its_lease_expires(open_memory, database_url):
    memory = await open_memory()
    # A round whose process died mid-graph: its lease is still there, expiring in 1 s.
    execute(
        database_url,
        "INSERT INTO round_leases (tenant_id, user_id, conversation_id, holder, expires_at)"
        " VALUES ('default', 'conversation:dead', 'dead', 'gone', now() + interval '1 second')",
    )
    app = with_memory(SlowChat(delay=0).graph, memory)
    started = time.monotonic()
    await app.ainvoke({"messages": [HumanMessage("after")]}, config("dead"))
    waited = time.monotonic() - started
    assert 0.8 < waited < 5, waited
    assert len(stored(database_url, "dead")) == 2


async def test_enqueue_waits_at_most_the_timeout(open_memory, database_url):
    memory = await open_memory(multitask_timeout_s=0.3)
    execute(
        database_url,
        "INSERT INTO round_leases (tenant_id, user_id, conversation_id, holder, expires_at)"
        " VALUES ('default', 'conversation:busy', 'busy', 'other', now() + interval '1 hour')",
    )
    app = with_memory(SlowChat(delay=0).graph, memory)
    with pytest.raises(RoundInProgressError, match="MEMORY_AGENT_MULTITASK_TIMEOUT_S"):
        await app.ainvoke({"messages": [HumanMessage("waiting")]}, config("busy"))
    assert stored(database_url, "busy") == []


def test_double_text_from_two_processes(database_url, tmp_path: Path):
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    outputs = [tmp_path / "a.json", tmp_path / "b.json"]
    processes = []
    for text, out in zip(("from A", "from B"), outputs):
        processes.append(
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "tests.reliability.double_text_process",
                    database_url,
                    "two",
                    text,
                    "1.0",
                    str(out),
                ],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
        )
    for process in processes:
        _, err = process.communicate(timeout=60)
        assert process.returncode == 0, err.decode()[-2000:]
    rows = stored(database_url, "two")
    assert [r for r, _ in rows] == [1, 1, 2, 2]  # one round after the other, each whole
    first, second = rows[0][1], rows[2][1]
    seen = {json.loads(out.read_text())[-1]: json.loads(out.read_text()) for out in outputs}
    assert seen[second] == [first, f"reply to {first}", second]  # the later round saw the earlier one
    assert seen[first] == [first]
