"""Each message is stored exactly once, whatever its shape and whichever integration path carries it.

Issue items: a checkpointer with a round that ends on a tool call, several messages in one input, reused
message ids, unanswered tool calls kept out of the model's context, human in the loop (interrupt/resume),
and cancelled rounds.
"""

from __future__ import annotations

import asyncio
import warnings
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import HumanInTheLoopMiddleware
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.types import Command

from memory_agent import MemoryMiddleware, with_memory
from memory_agent.llm.offline import OfflineSummaryModel
from tests.conftest import query
from tests.integration.agent_support import ToolScriptModel, approval_graph, assert_tool_pairs, config, lookup, stored


class ScriptedGraph:
    """A one-node chat graph whose replies are given per call; records the messages it was given."""

    def __init__(self, replies: list[list[BaseMessage]]) -> None:
        self.replies = list(replies)
        self.seen: list[list[BaseMessage]] = []

        def respond(state: MessagesState) -> dict[str, Any]:
            self.seen.append(list(state["messages"]))
            return {"messages": self.replies.pop(0)}

        builder = StateGraph(MessagesState)
        builder.add_node("respond", respond)
        builder.add_edge(START, "respond")
        self.graph = builder.compile()


# ---------------------------------------------------------------- 1. checkpointer + a round ending on a tool call


@tool(return_direct=True)
def finish(text: str) -> str:
    """Answer directly with a text."""
    return f"done: {text}"


async def cancelled_metrics(
    task: asyncio.Task[Any], started: asyncio.Event, database_url: str, columns: str, thread: str
) -> list[tuple[Any, ...]]:
    """Cancel `task` once its round has `started`; the `columns` of the metrics row the cancellation left."""
    await asyncio.wait_for(started.wait(), 10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    statement = f"SELECT {columns} FROM round_metrics WHERE conversation_id = %s"
    for _ in range(100):
        rows = query(database_url, statement, (thread,))
        if rows:
            break
        await asyncio.sleep(0.05)
    return rows


async def test_with_memory_and_checkpointer_round_ending_on_tool_call_is_stored_once(open_memory, database_url):
    memory = await open_memory()
    chat = ScriptedGraph(
        [
            [AIMessage("", tool_calls=[{"name": "lookup", "args": {"key": "a"}, "id": "call_1"}])],
            [AIMessage("second answer")],
        ]
    )
    app = with_memory(chat.graph, memory)
    app.checkpointer = InMemorySaver()
    await app.ainvoke({"messages": [HumanMessage("first")]}, config("t1"))
    await app.ainvoke({"messages": [HumanMessage("second")]}, config("t1"))
    rows = stored(database_url, "t1")
    assert [(seq, rnd, role, text) for seq, rnd, role, text in rows] == [
        (0, 1, "user", "first"),
        (1, 1, "assistant", ""),
        (2, 2, "user", "second"),
        (3, 2, "assistant", "second answer"),
    ]
    # The model of round 2 saw round 1 once, its unanswered call closed for it.
    assert [m.type for m in chat.seen[1]] == ["human", "ai", "tool", "human"]


async def test_middleware_with_checkpointer_and_return_direct_tool_stores_each_message_once(open_memory, database_url):
    memory = await open_memory()

    class DirectModel(ToolScriptModel):
        def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any) -> Any:
            from langchain_core.outputs import ChatGeneration, ChatResult

            self.calls.append(list(messages))
            call = {"name": "finish", "args": {"text": f"round {len(self.calls)}"}, "id": self._next_id()}
            return ChatResult(generations=[ChatGeneration(message=AIMessage("", tool_calls=[call]))])

    model = DirectModel()
    agent = create_agent(model, [finish], middleware=[MemoryMiddleware(memory)], checkpointer=InMemorySaver())
    await agent.ainvoke({"messages": [HumanMessage("one")]}, config("t2"))
    await agent.ainvoke({"messages": [HumanMessage("two")]}, config("t2"))
    rows = stored(database_url, "t2")
    assert [(rnd, role) for _, rnd, role, _ in rows] == [
        (1, "user"),
        (1, "assistant"),
        (1, "tool"),
        (2, "user"),
        (2, "assistant"),
        (2, "tool"),
    ]
    assert [text for *_, text in rows if text.startswith("done")] == ["done: round 1", "done: round 2"]


# ---------------------------------------------------------------- 2. several messages in one input


async def test_several_messages_in_one_input_are_the_round(open_memory, database_url):
    memory = await open_memory()
    chat = ScriptedGraph([[AIMessage("Your name is Bob.")]])
    app = with_memory(chat.graph, memory)
    history = [HumanMessage("My name is Bob"), AIMessage("Hi Bob"), HumanMessage("What is my name?")]
    result = await app.ainvoke({"messages": history}, config("t3"))
    assert [m.text for m in chat.seen[0]] == ["My name is Bob", "Hi Bob", "What is my name?"]
    assert [text for *_, text in stored(database_url, "t3")] == [
        "My name is Bob",
        "Hi Bob",
        "What is my name?",
        "Your name is Bob.",
    ]
    assert result["messages"][-1].text == "Your name is Bob."


async def test_several_messages_through_the_middleware(open_memory, database_url):
    memory = await open_memory()
    agent = create_agent(ToolScriptModel(), [lookup], middleware=[MemoryMiddleware(memory)])
    history = [HumanMessage("My name is Bob"), AIMessage("Hi Bob"), HumanMessage("What is my name?")]
    await agent.ainvoke({"messages": history}, config("t3m"))
    assert [text for *_, text in stored(database_url, "t3m")] == [
        "My name is Bob",
        "Hi Bob",
        "What is my name?",
        "final answer without tools",
    ]


# ---------------------------------------------------------------- 3. reused message ids


async def test_replies_reusing_an_earlier_message_id_are_stored(open_memory, database_url):
    memory = await open_memory()
    chat = ScriptedGraph([[AIMessage("reply one", id="same-id")], [AIMessage("reply two", id="same-id")]])
    app = with_memory(chat.graph, memory)
    await app.ainvoke({"messages": [HumanMessage("one")]}, config("t4"))
    await app.ainvoke({"messages": [HumanMessage("two")]}, config("t4"))
    assert [text for *_, text in stored(database_url, "t4")] == ["one", "reply one", "two", "reply two"]


async def test_reused_ids_with_a_checkpointer(open_memory, database_url):
    memory = await open_memory()
    chat = ScriptedGraph([[AIMessage("reply one", id="same-id")], [AIMessage("reply two", id="same-id")]])
    app = with_memory(chat.graph, memory)
    app.checkpointer = InMemorySaver()
    await app.ainvoke({"messages": [HumanMessage("one")]}, config("t4c"))
    await app.ainvoke({"messages": [HumanMessage("two")]}, config("t4c"))
    assert [text for *_, text in stored(database_url, "t4c")] == ["one", "reply one", "two", "reply two"]


# ---------------------------------------------------------------- 4. unanswered tool calls never reach the model


async def test_unanswered_tool_call_is_closed_in_the_models_context(open_memory, database_url):
    memory = await open_memory()
    chat = ScriptedGraph(
        [
            [AIMessage("", tool_calls=[{"name": "lookup", "args": {"key": "x"}, "id": "call_open"}])],
            [AIMessage("fine")],
        ]
    )
    app = with_memory(chat.graph, memory)
    await app.ainvoke({"messages": [HumanMessage("start")]}, config("t5"))
    await app.ainvoke({"messages": [HumanMessage("next")]}, config("t5"))
    given = chat.seen[1]
    assert_tool_pairs(given)
    closing = [m for m in given if isinstance(m, ToolMessage)]
    assert [m.tool_call_id for m in closing] == ["call_open"]
    # Stored history keeps what happened: no synthetic message in the database.
    assert [role for _, _, role, _ in stored(database_url, "t5")] == ["user", "assistant", "user", "assistant"]
    (truncation,) = query(database_url, "SELECT truncation FROM round_metrics WHERE round_number = 2")[0]
    assert truncation["closed_tool_calls"] == ["call_open"]


# ---------------------------------------------------------------- 5. human in the loop


@pytest.mark.parametrize("resume_elsewhere", [False, True], ids=["same-process", "another-middleware"])
async def test_middleware_human_in_the_loop_resume_stores_the_round_once(open_memory, database_url, resume_elsewhere):
    memory = await open_memory()
    model = ToolScriptModel()
    saver = InMemorySaver()

    def build() -> Any:
        middleware = [HumanInTheLoopMiddleware(interrupt_on={"lookup": True}), MemoryMiddleware(memory)]
        return create_agent(model, [lookup], middleware=middleware, checkpointer=saver)

    agent = build()
    await agent.ainvoke({"messages": [HumanMessage("hello")]}, config("t6"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an unregistered type in the checkpoint warns
        result = await agent.ainvoke({"messages": [HumanMessage("please tools:1:seq")]}, config("t6"))
        assert "__interrupt__" in result
        assert len(stored(database_url, "t6")) == 2  # the interrupted round is not stored yet
        if resume_elsewhere:  # a fresh middleware (as in another process) has none of the run's context cached
            agent = build()
        result = await agent.ainvoke(Command(resume={"decisions": [{"type": "approve"}]}), config("t6"))
    assert result["messages"][-1].text == "final answer after 1 tool results"
    rows = stored(database_url, "t6")
    assert [(rnd, role) for _, rnd, role, _ in rows] == [
        (1, "user"),
        (1, "assistant"),
        (2, "user"),
        (2, "assistant"),
        (2, "tool"),
        (2, "assistant"),
    ]
    # The model call after the resume was given memory + gap + the run's own messages, tools paired.
    assert [m.text for m in model.calls[-1]][:3] == ["hello", "final answer without tools", "please tools:1:seq"]
    assert_tool_pairs(model.calls[-1])
    await agent.ainvoke({"messages": [HumanMessage("and now")]}, config("t6"))
    assert len(stored(database_url, "t6")) == 8


async def test_with_memory_interrupt_and_resume_store_the_round_once(open_memory, database_url):
    memory = await open_memory()
    app = with_memory(approval_graph(), memory)
    app.checkpointer = InMemorySaver()
    result = await app.ainvoke({"messages": [HumanMessage("do it")]}, config("t7"))
    assert "__interrupt__" in result
    assert stored(database_url, "t7") == []
    result = await app.ainvoke(Command(resume="yes"), config("t7"))
    assert [text for *_, text in stored(database_url, "t7")] == ["do it", "approved: yes"]
    await app.ainvoke({"messages": [HumanMessage("again")]}, config("t7"))
    # the next round interrupts again; only the completed round is stored
    assert [text for *_, text in stored(database_url, "t7")] == ["do it", "approved: yes"]


async def test_a_round_resumed_after_a_summary_made_during_its_pause_stores_only_itself(open_memory, database_url):
    # Each round pauses; the summary its predecessor started completes during the pause, so the resumed round's
    # context (memory + gap) is not the one its restored state holds. Only the round itself is stored: before,
    # the whole history was stored again, and the injected "[Previous context: …]" as a user turn.
    memory = await open_memory(model=OfflineSummaryModel(), memory_summarize_after_seq=2, memory_min_new_messages=2)
    app = with_memory(approval_graph(), memory)
    app.checkpointer = InMemorySaver()
    for n in range(6):
        assert "__interrupt__" in await app.ainvoke({"messages": [HumanMessage(f"question {n}")]}, config("t7b"))
        await memory.drain()
        await app.ainvoke(Command(resume=f"yes {n}"), config("t7b"))
    assert [text for *_, text in stored(database_url, "t7b")] == [
        text for n in range(6) for text in (f"question {n}", f"approved: yes {n}")
    ]
    assert (
        query(database_url, "SELECT count(*) FROM memory WHERE conversation_id = 't7b' AND status = 'completed'")[0][0]
        >= 2
    )


# ---------------------------------------------------------------- 7. cancelled rounds


async def test_cancelled_round_leaves_a_metrics_row(open_memory, database_url):
    memory = await open_memory()
    started = asyncio.Event()

    async def slow(state: MessagesState) -> dict[str, Any]:
        started.set()
        await asyncio.sleep(30)
        return {"messages": [AIMessage("too late")]}

    builder = StateGraph(MessagesState)
    builder.add_node("slow", slow)
    builder.add_edge(START, "slow")
    app = with_memory(builder.compile(), memory)
    task = asyncio.create_task(app.ainvoke({"messages": [HumanMessage("hi")]}, config("t8")))
    rows = await cancelled_metrics(task, started, database_url, "error_stage, round_number", "t8")
    assert rows == [("cancelled", None)]
    assert stored(database_url, "t8") == []


async def test_cancelled_agent_run_leaves_a_metrics_row(open_memory, database_url):
    memory = await open_memory()
    started = asyncio.Event()

    class SlowModel(ToolScriptModel):
        async def _agenerate(
            self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
        ) -> Any:
            started.set()
            await asyncio.sleep(30)
            return self._generate(messages)

    agent = create_agent(SlowModel(), [lookup], middleware=[MemoryMiddleware(memory)])
    task = asyncio.create_task(agent.ainvoke({"messages": [HumanMessage("hi")]}, config("t9")))
    assert await cancelled_metrics(task, started, database_url, "error_stage", "t9") == [("cancelled",)]
