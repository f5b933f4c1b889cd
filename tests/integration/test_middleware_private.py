"""What MemoryMiddleware keeps of a round stays out of the agent's streams: LangGraph streams every state channel,
private ones too, so no stream mode may show the round's lease token (whoever holds it renews the conversation's
lease), its RoundInfo (input, ids, metrics) or its loaded context; and a round paused by an interrupt still
resumes, in this process or another, holding its lease."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import HumanInTheLoopMiddleware, ModelRetryMiddleware
from langchain_core.messages import HumanMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.types import Command, interrupt

from memory_agent import MemoryMiddleware, RoundInProgressError
from tests.conftest import query
from tests.integration.agent_support import ToolScriptModel, config, stored

MODES = ["values", "updates", "debug", "tasks", "checkpoints", "custom", "messages"]
# Names of RoundInfo's fields: none may reach a stream.
ROUND_FIELDS = ("input_messages", "context_fingerprints", "conversation_created_at", "stored_through", "gap_size")


def lease_reader(database_url: str, thread: str, holders: list[str]) -> Any:
    """The lookup tool, noting the conversation's lease token while the round holds it."""

    @tool
    def lookup(key: str) -> str:
        """Look a key up."""
        rows = query(database_url, "SELECT holder FROM round_leases WHERE conversation_id = %s", [thread])
        holders.extend(row[0] for row in rows)
        return f"value of {key}"

    return lookup


def assert_private(chunks: list[Any], holders: list[str], history: bool = True) -> None:
    """`history`: the state holds the earlier rounds (a checkpointer); else the loaded gap may not show."""
    assert holders and all(holders), "the tool ran while the round held its lease"
    for chunk in chunks:
        shown = repr(chunk)
        for holder in holders:
            assert holder not in shown, f"the round's lease token is in a {chunk[1]!r} chunk"
        for field in ROUND_FIELDS:
            assert field not in shown, f"the round's {field} is in a {chunk[1]!r} chunk"
        assert history or "hello there" not in shown, "the loaded gap is in the stream"


@pytest.mark.parametrize("sync", [False, True], ids=["astream", "stream"])
@pytest.mark.parametrize("checkpointer", [False, True], ids=["no-checkpointer", "checkpointer"])
async def test_no_stream_mode_shows_the_rounds_lease(open_memory, database_url, checkpointer, sync):
    memory = await open_memory()
    holders: list[str] = []
    saver = InMemorySaver() if checkpointer else None
    tools = [lease_reader(database_url, "p1", holders)]
    agent = create_agent(ToolScriptModel(), tools, middleware=[MemoryMiddleware(memory)], checkpointer=saver)
    thread = config("p1")
    await agent.ainvoke({"messages": [HumanMessage("hello there")]}, config("p1"))  # a gap for the next round
    inputs = {"messages": [HumanMessage("please tools:1:seq")]}
    if sync:
        chunks = await asyncio.to_thread(lambda: list(agent.stream(inputs, thread, stream_mode=MODES, subgraphs=True)))
    else:
        chunks = [c async for c in agent.astream(inputs, thread, stream_mode=MODES, subgraphs=True)]
    assert {c[1] for c in chunks} >= {"values", "updates", "debug", "tasks"}
    assert_private(chunks, holders, history=checkpointer)
    assert [role for _, rnd, role, _ in stored(database_url, "p1") if rnd == 2] == [
        "user",
        "assistant",
        "tool",
        "assistant",
    ]


async def test_the_agent_as_a_subgraph_streams_nothing_private(open_memory, database_url):
    memory = await open_memory()
    holders: list[str] = []
    agent = create_agent(
        ToolScriptModel(), [lease_reader(database_url, "p2", holders)], middleware=[MemoryMiddleware(memory)]
    )
    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_edge(START, "agent")
    app = builder.compile(checkpointer=InMemorySaver())
    await app.ainvoke({"messages": [HumanMessage("hello there")]}, config("p2"))
    inputs = {"messages": [HumanMessage("please tools:1:seq")]}
    chunks = [c async for c in app.astream(inputs, config("p2"), stream_mode=MODES, subgraphs=True)]
    assert any(c[0] for c in chunks), "the agent's own chunks were streamed"
    assert_private(chunks, holders)
    assert len(stored(database_url, "p2")) == 6


@pytest.mark.parametrize("resume_elsewhere", [False, True], ids=["same-process", "another-middleware"])
async def test_a_paused_round_resumes_with_its_lease_and_streams_none_of_it(
    open_memory, database_url, resume_elsewhere
):
    memory = await open_memory(multitask_strategy="reject")  # a round that lost its lease would be refused
    holders: list[str] = []
    saver = InMemorySaver()

    def build() -> Any:
        middleware = [HumanInTheLoopMiddleware(interrupt_on={"lookup": True}), MemoryMiddleware(memory)]
        return create_agent(
            ToolScriptModel(), [lease_reader(database_url, "p3", holders)], middleware=middleware, checkpointer=saver
        )

    agent = build()
    await agent.ainvoke({"messages": [HumanMessage("hello there")]}, config("p3"))
    inputs = {"messages": [HumanMessage("please tools:1:seq")]}
    chunks = [c async for c in agent.astream(inputs, config("p3"), stream_mode=MODES)]
    assert any(c[0] == "updates" and "__interrupt__" in c[1] for c in chunks)
    (paused,) = query(database_url, "SELECT holder FROM round_leases WHERE conversation_id = 'p3'")
    state = await agent.aget_state(config("p3"))
    assert paused[0] not in repr(state), "the thread's state (the server's thread API) shows the lease"
    if resume_elsewhere:  # a fresh middleware (as in another process) has none of the round in memory
        agent = build()
    resume = Command(resume={"decisions": [{"type": "approve"}]})
    chunks += [c async for c in agent.astream(resume, config("p3"), stream_mode=MODES)]
    assert holders == [paused[0]], "the resumed round ran its tool under the lease it held before the pause"
    assert_private(chunks, holders)
    assert [role for _, rnd, role, _ in stored(database_url, "p3") if rnd == 2] == [
        "user",
        "assistant",
        "tool",
        "assistant",
    ]
    assert query(database_url, "SELECT count(*) FROM round_leases WHERE conversation_id = 'p3'") == [(0,)]


class FailingModel(ToolScriptModel):
    """Fails its first call, then answers as ToolScriptModel does."""

    def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kw: Any) -> Any:
        if not self.calls:
            self.calls.append(list(messages))
            raise ValueError("model down")
        return super()._generate(messages, stop, run_manager, **kw)


@tool("lookup")
def broken_lookup(key: str) -> str:
    """Look a key up."""
    raise RuntimeError("lookup service down")


@pytest.mark.parametrize("sync", [False, True], ids=["ainvoke", "invoke"])
@pytest.mark.parametrize(
    ("model", "tools", "error"),
    [(FailingModel, [], "model down"), (ToolScriptModel, [broken_lookup], "lookup service down")],
    ids=["model", "tool"],
)
async def test_a_failed_model_call_or_tool_gives_the_lease_back(open_memory, database_url, sync, model, tools, error):
    """A model call's or a tool's exception ends the run without after_agent: the conversation's next round is not
    kept waiting for the lease (600 s by default) and the failure is recorded."""
    memory = await open_memory(multitask_strategy="reject")  # a lease left held would refuse the next round
    agent = create_agent(model(), tools, middleware=[MemoryMiddleware(memory)])
    inputs = {"messages": [HumanMessage("please tools:1:seq")]}
    with pytest.raises((ValueError, RuntimeError), match=error):
        if sync:
            await asyncio.to_thread(agent.invoke, inputs, config("p4"))
        else:
            await agent.ainvoke(inputs, config("p4"))
    assert query(database_url, "SELECT count(*) FROM round_leases WHERE conversation_id = 'p4'") == [(0,)]
    assert query(database_url, "SELECT error_stage FROM round_metrics WHERE conversation_id = 'p4'") == [("graph",)]
    await agent.ainvoke({"messages": [HumanMessage("hi again")]}, config("p4"))
    assert [text for *_, text in stored(database_url, "p4")] == ["hi again", "final answer without tools"]


async def test_a_round_paused_by_the_earlier_state_layout_resumes(open_memory, database_url):
    """A thread paused by a release that kept {"token", "info", "start"} in its state resumes after an upgrade."""
    memory = await open_memory(multitask_strategy="reject")
    saver = InMemorySaver()
    middleware = [HumanInTheLoopMiddleware(interrupt_on={"lookup": True}), MemoryMiddleware(memory)]
    holders: list[str] = []
    agent = create_agent(
        ToolScriptModel(), [lease_reader(database_url, "p5", holders)], middleware=middleware, checkpointer=saver
    )
    result = await agent.ainvoke({"messages": [HumanMessage("please tools:1:seq")]}, config("p5"))
    assert "__interrupt__" in result
    (paused,) = query(database_url, "SELECT holder FROM round_leases WHERE conversation_id = 'p5'")
    # The checkpoint as the earlier release wrote it (its round record, lease included, in the state).
    saved = await saver.aget_tuple(config("p5"))
    version = saved.checkpoint["channel_versions"]["memory_round"]
    key = ("p5", "", "memory_round", version)
    start = saver.serde.loads_typed(saver.blobs[key])["start"]
    earlier = {"token": "cache-key", "info": {"lease": paused[0], "conversation_id": "p5"}, "start": start}
    saver.blobs[key] = saver.serde.dumps_typed(earlier)
    fresh = create_agent(
        ToolScriptModel(),
        [lease_reader(database_url, "p5", holders)],
        middleware=[HumanInTheLoopMiddleware(interrupt_on={"lookup": True}), MemoryMiddleware(memory)],
        checkpointer=saver,
    )
    result = await fresh.ainvoke(Command(resume={"decisions": [{"type": "approve"}]}), config("p5"))
    assert result["messages"][-1].text == "final answer after 1 tool results"
    assert holders == [paused[0]]
    assert [role for *_, role, _ in stored(database_url, "p5")] == ["user", "assistant", "tool", "assistant"]


async def test_a_retried_model_call_takes_the_lease_again(open_memory, database_url):
    """A retry middleware around this one: the failed call gave the lease back, the retry prepares the round again."""
    memory = await open_memory(multitask_strategy="reject")
    retry = ModelRetryMiddleware(max_retries=1, initial_delay=0, jitter=False)
    agent = create_agent(FailingModel(), [], middleware=[retry, MemoryMiddleware(memory)])
    result = await agent.ainvoke({"messages": [HumanMessage("hi")]}, config("p6"))
    assert result["messages"][-1].text == "final answer without tools"
    assert [text for *_, text in stored(database_url, "p6")] == ["hi", "final answer without tools"]
    assert query(database_url, "SELECT count(*) FROM round_leases WHERE conversation_id = 'p6'") == [(0,)]


async def test_an_interrupt_inside_a_tool_keeps_the_lease_until_the_round_resumes(open_memory, database_url):
    memory = await open_memory(multitask_strategy="reject")

    @tool
    def lookup(key: str) -> str:
        """Look a key up, once a person approves."""
        return f"value of {key}: {interrupt('approve the lookup?')}"

    agent = create_agent(
        ToolScriptModel(), [lookup], middleware=[MemoryMiddleware(memory)], checkpointer=InMemorySaver()
    )
    result = await agent.ainvoke({"messages": [HumanMessage("please tools:1:seq")]}, config("p8"))
    assert "__interrupt__" in result
    leases = "SELECT count(*) FROM round_leases WHERE conversation_id = 'p8'"
    assert query(database_url, leases) == [(1,)]  # paused, not failed: the round still holds its conversation
    assert query(database_url, "SELECT count(*) FROM round_metrics WHERE conversation_id = 'p8'") == [(0,)]
    result = await agent.ainvoke(Command(resume="approved"), config("p8"))
    assert result["messages"][-1].text == "final answer after 1 tool results"
    assert query(database_url, leases) == [(0,)]
    assert [role for *_, role, _ in stored(database_url, "p8")] == ["user", "assistant", "tool", "assistant"]


@pytest.mark.parametrize("pause", ["tool", "human_in_the_loop", "tool, the new message in another process"])
async def test_a_new_message_instead_of_a_resume_takes_the_paused_rounds_lease_over(open_memory, database_url, pause):
    # The paused round kept its lease; a new message on the thread (not a resume) was refused at once
    # ("another round is running", multitask_strategy "reject") or waited for the lease to expire (600 s).
    memory = await open_memory(multitask_strategy="reject")

    @tool
    def lookup(key: str) -> str:
        """Look a key up, once a person approves."""
        return f"value of {key}: {interrupt('approve the lookup?') if pause.startswith('tool') else 'ok'}"

    def agent() -> Any:  # a new middleware: another process's, which does not have the paused round
        middleware = [MemoryMiddleware(memory)]
        if pause == "human_in_the_loop":
            middleware.insert(0, HumanInTheLoopMiddleware(interrupt_on={"lookup": True}))
        return create_agent(ToolScriptModel(), [lookup], middleware=middleware, checkpointer=saver)

    saver = InMemorySaver()
    first = agent()
    result = await first.ainvoke({"messages": [HumanMessage("please tools:1:seq")]}, config("p9"))
    assert "__interrupt__" in result
    leases = "SELECT count(*) FROM round_leases WHERE conversation_id = 'p9'"
    assert query(database_url, leases) == [(1,)]
    second = agent() if pause.endswith("process") else first
    result = await second.ainvoke({"messages": [HumanMessage("never mind, hi")]}, config("p9"))
    assert result["messages"][-1].text == "final answer without tools"
    assert query(database_url, leases) == [(0,)]
    # Nothing lost: the paused run's input and tool call are stored with the round that replaced it.
    texts = [text for *_, text in stored(database_url, "p9")]
    assert texts[0] == "please tools:1:seq" and texts[-2:] == ["never mind, hi", "final answer without tools"]


async def test_two_runs_naming_the_same_paused_round_do_not_both_hold_its_lease(open_memory, database_url):
    # Two new messages at once on a paused thread, each in its own process: both read the lease the state names,
    # and both renewed it as theirs, two rounds on one lease. It passes once now, decided by the database.
    memory = await open_memory(multitask_strategy="reject")

    @tool
    def lookup(key: str) -> str:
        """Look a key up, once a person approves."""
        return f"value of {key}: {interrupt('approve the lookup?')}"

    saver = InMemorySaver()

    def agent() -> Any:
        return create_agent(ToolScriptModel(), [lookup], middleware=[MemoryMiddleware(memory)], checkpointer=saver)

    assert "__interrupt__" in await agent().ainvoke({"messages": [HumanMessage("please tools:1:seq")]}, config("p10"))
    outcomes = await asyncio.gather(
        agent().ainvoke({"messages": [HumanMessage("first")]}, config("p10")),
        agent().ainvoke({"messages": [HumanMessage("second")]}, config("p10")),
        return_exceptions=True,
    )
    refused = [o for o in outcomes if isinstance(o, RoundInProgressError)]
    assert len(refused) == 1, outcomes
    assert query(database_url, "SELECT count(*) FROM round_leases WHERE conversation_id = 'p10'") == [(0,)]
