"""with_memory's direct path: a plain invoke of a messages-only graph runs the round node without LangGraph's
runner, with the runner's result; anything the runner would make visible (a checkpointer, callbacks and
tracing, a parent graph, stream options) still goes through it.

Which path ran is read from inside the wrapped graph: run by the runner it is a subgraph (its node's
checkpoint namespace starts with the round node's), run directly it is a graph of its own.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Annotated, Any

import pytest
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.config import get_config
from langgraph.errors import GraphRecursionError
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.graph.message import add_messages
from langgraph.store.memory import InMemoryStore
from typing_extensions import TypedDict

from memory_agent import MemoryService, MemorySettings, with_memory
from memory_agent.errors import InvalidInputError
from memory_agent.integrations.langgraph import MemoryGraph
from tests.conftest import query
from tests.integration.agent_support import approval_graph


class EchoGraph:
    """A one-node chat graph that answers each round with "echo: <last text>" and notes, per call, the
    checkpoint namespace it ran under and the messages it was given."""

    def __init__(self, fail_on: str | None = None) -> None:
        self.namespaces: list[str] = []
        self.seen: list[list[BaseMessage]] = []

        def respond(state: MessagesState) -> dict[str, Any]:
            self.namespaces.append(get_config()["configurable"].get("checkpoint_ns", ""))
            self.seen.append(list(state["messages"]))
            last = state["messages"][-1].text
            if last == fail_on:
                raise RuntimeError("the model is down")
            return {"messages": [AIMessage(f"echo: {last}")]}

        builder = StateGraph(MessagesState)
        builder.add_node("respond", respond)
        builder.add_edge(START, "respond")
        self.graph = builder.compile()

    @property
    def last_path(self) -> str:
        return "direct" if self.namespaces[-1].startswith("respond:") else "runner"


@pytest.fixture(autouse=True)
def no_tracing(monkeypatch):
    """Tracing switched on in the environment adds a handler, and every call would take the runner."""
    for name in ("LANGSMITH_TRACING", "LANGSMITH_TRACING_V2", "LANGCHAIN_TRACING", "LANGCHAIN_TRACING_V2"):
        monkeypatch.delenv(name, raising=False)


class Recorder(BaseCallbackHandler):
    def __init__(self) -> None:
        self.chains: list[str] = []

    def on_chain_start(self, serialized: Any, inputs: Any, **kwargs: Any) -> None:
        self.chains.append(kwargs.get("name") or "")


def config(thread: str, **extra: Any) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}, **extra}


def shape(messages: list[BaseMessage]) -> list[tuple[str, str]]:
    return [(m.type, m.text) for m in messages]


def stored(url: str, thread: str) -> list[tuple[int, str, str]]:
    return query(
        url,
        "SELECT round_number, role, content FROM messages WHERE conversation_id = %s ORDER BY sequence_number",
        [thread],
    )


INPUTS: list[Any] = [
    [HumanMessage("hello")],
    [("user", "as a tuple")],
    "a bare string",
    [{"role": "user", "content": "as a dict"}],
    [HumanMessage("my name is Ann", id="m-1"), AIMessage("hi Ann", id="m-2"), HumanMessage("who am I?", id="m-3")],
]


async def test_the_direct_path_returns_and_stores_what_the_runner_does(open_memory, database_url):
    memory = await open_memory()
    echo = EchoGraph()
    app = with_memory(echo.graph, memory)
    assert isinstance(app, MemoryGraph)
    for n, messages in enumerate(INPUTS):
        direct = await app.ainvoke({"messages": messages}, config(f"d{n}"))
        assert echo.last_path == "direct"
        # stream_mode is an option of the runner's: passing its default takes the runner, same call otherwise.
        runner = await app.ainvoke({"messages": messages}, config(f"r{n}"), stream_mode="values")
        assert echo.last_path == "runner"
        assert shape(direct["messages"]) == shape(runner["messages"])
        assert list(direct) == list(runner) == ["messages"]
        assert all(m.id for m in direct["messages"])  # ids assigned as the runner's channel assigns them
        assert stored(database_url, f"d{n}") == stored(database_url, f"r{n}")
    assert [m.id for m in (await app.ainvoke({"messages": INPUTS[-1]}, config("ids")))["messages"][:3]] == [
        "m-1",
        "m-2",
        "m-3",
    ]


async def test_later_rounds_on_the_direct_path_see_memory_and_gap(open_memory, database_url):
    memory = await open_memory()
    echo = EchoGraph()
    app = with_memory(echo.graph, memory)
    for text in ["one", "two", "three"]:
        result = await app.ainvoke({"messages": [HumanMessage(text)]}, config("t"))
        assert shape(result["messages"]) == [("human", text), ("ai", f"echo: {text}")]
    await memory.drain()
    assert [m.text for m in echo.seen[-1]][-3:] == ["two", "echo: two", "three"]
    assert [(r, role) for r, role, _ in stored(database_url, "t")] == [
        (1, "user"),
        (1, "assistant"),
        (2, "user"),
        (2, "assistant"),
        (3, "user"),
        (3, "assistant"),
    ]


async def test_a_callback_handler_or_tracing_takes_the_runner(open_memory):
    memory = await open_memory()
    echo = EchoGraph()
    app = with_memory(echo.graph, memory, name="chat")
    recorder = Recorder()
    await app.ainvoke({"messages": [HumanMessage("traced")]}, config("cb", callbacks=[recorder]))
    assert echo.last_path == "runner"
    assert recorder.chains[0] == "LangGraph_with_memory"  # the runner's own run, as before
    await app.ainvoke({"messages": [HumanMessage("untraced")]}, config("cb"))
    assert echo.last_path == "direct"
    # Global debug output is a handler too: LangChain adds it, as it adds a tracer when tracing is on, in every
    # callback manager it configures, and the direct path asks that same set-up.
    from langchain_core.globals import set_debug

    set_debug(True)
    try:
        await app.ainvoke({"messages": [HumanMessage("debug")]}, config("cb"))
        await memory.drain()  # the summary it started prints its model call here, not after the test
    finally:
        set_debug(False)
    assert echo.last_path == "runner"


async def test_a_checkpointer_or_store_set_on_the_graph_takes_the_runner(open_memory):
    memory = await open_memory()
    echo = EchoGraph()
    app = with_memory(echo.graph, memory)
    app.checkpointer = InMemorySaver()
    await app.ainvoke({"messages": [HumanMessage("kept")]}, config("cp"))
    assert echo.last_path == "runner"
    state = await app.aget_state(config("cp"))
    assert shape(state.values["messages"]) == [("human", "kept"), ("ai", "echo: kept")]

    inner = EchoGraph()
    inner.graph.checkpointer = InMemorySaver()  # the wrapped graph keeps checkpoints under the node's namespace
    await with_memory(inner.graph, memory).ainvoke({"messages": [HumanMessage("sub")]}, config("cp2"))
    assert inner.last_path == "runner"

    echo_of_store = EchoGraph()
    stored_app = with_memory(echo_of_store.graph, memory)
    stored_app.store = InMemoryStore()
    await stored_app.ainvoke({"messages": [HumanMessage("store")]}, config("st1"))
    assert echo_of_store.last_path == "runner"
    inner_store = EchoGraph()
    inner_store.graph.store = InMemoryStore()  # run as a subgraph it would use the parent's (none), not its own
    await with_memory(inner_store.graph, memory).ainvoke({"messages": [HumanMessage("store")]}, config("st2"))
    assert inner_store.last_path == "runner"


async def test_an_interrupt_without_checkpointer_pauses_the_round_on_both_paths(open_memory, database_url):
    memory = await open_memory()
    app = with_memory(approval_graph(), memory)
    direct = await app.ainvoke({"messages": [HumanMessage("may I?")]}, config("i1"))
    runner = await app.ainvoke({"messages": [HumanMessage("may I?")]}, config("i2"), stream_mode="values")
    for result in (direct, runner):
        assert shape(result["messages"]) == [("human", "may I?")]
        assert [i.value for i in result["__interrupt__"]] == ["approve?"]
    # Paused, not finished: nothing stored, and the conversation is free for its next round.
    assert stored(database_url, "i1") == stored(database_url, "i2") == []
    again = await app.ainvoke({"messages": [HumanMessage("still there?")]}, config("i1"))
    assert [i.value for i in again["__interrupt__"]] == ["approve?"]


async def test_inside_a_parent_graph_it_runs_as_a_subgraph(open_memory):
    memory = await open_memory()
    echo = EchoGraph()
    app = with_memory(echo.graph, memory)

    async def call_app(state: MessagesState) -> dict[str, Any]:
        result = await app.ainvoke({"messages": state["messages"][-1:]})
        return {"messages": result["messages"][-1:]}

    parent = StateGraph(MessagesState)
    parent.add_node("call_app", call_app)
    parent.add_edge(START, "call_app")
    result = await parent.compile().ainvoke({"messages": [HumanMessage("nested")]}, config("nested"))
    assert echo.last_path == "runner"
    assert shape(result["messages"]) == [("human", "nested"), ("ai", "echo: nested")]


async def test_a_failing_graph_raises_the_same_error_and_records_the_round(open_memory, database_url):
    memory = await open_memory()
    echo = EchoGraph(fail_on="boom")
    app = with_memory(echo.graph, memory)
    with pytest.raises(RuntimeError, match="the model is down"):
        await app.ainvoke({"messages": [HumanMessage("boom")]}, config("f"))
    assert echo.last_path == "direct"
    assert stored(database_url, "f") == []
    assert query(database_url, "SELECT error_stage FROM round_metrics WHERE conversation_id = 'f'") == [("graph",)]
    # The conversation was given back: the next round runs.
    result = await app.ainvoke({"messages": [HumanMessage("fine")]}, config("f"))
    assert result["messages"][-1].text == "echo: fine"
    with pytest.raises(InvalidInputError, match="thread_id"):
        await app.ainvoke({"messages": [HumanMessage("no thread")]}, {})


class WithNotes(TypedDict):
    messages: Annotated[list[BaseMessage], add_messages]
    notes: Annotated[list[str], operator.add]


async def test_a_state_with_more_than_messages_keeps_the_runner(open_memory):
    memory = await open_memory()

    def respond(state: WithNotes) -> dict[str, Any]:
        return {"messages": [AIMessage("ok")], "notes": ["answered"]}

    builder = StateGraph(WithNotes)
    builder.add_node("respond", respond)
    builder.add_edge(START, "respond")
    app = with_memory(builder.compile(), memory)
    assert not isinstance(app, MemoryGraph)
    result = await app.ainvoke({"messages": [HumanMessage("q")], "notes": ["asked"]}, config("notes"))
    assert shape(result["messages"]) == [("human", "q"), ("ai", "ok")]


def test_sync_invoke_takes_the_direct_path_too(database_url):
    memory = MemoryService.from_settings(MemorySettings(database_url=database_url, drain_timeout_s=5)).open()
    try:
        echo = EchoGraph()
        app = with_memory(echo.graph, memory)
        direct = app.invoke({"messages": [HumanMessage("sync")]}, config("s1"))
        assert echo.last_path == "direct"
        runner = app.invoke({"messages": [HumanMessage("sync")]}, config("s2"), stream_mode="values")
        assert echo.last_path == "runner"
        assert shape(direct["messages"]) == shape(runner["messages"]) == [("human", "sync"), ("ai", "echo: sync")]
        assert (
            stored(database_url, "s1")
            == stored(database_url, "s2")
            == [(1, "user", "sync"), (1, "assistant", "echo: sync")]
        )
    finally:
        memory.close()


async def test_a_wrapped_runnable_that_returns_no_dict_fails_as_on_the_runner(open_memory):
    from langchain_core.runnables import RunnableLambda
    from langgraph.errors import InvalidUpdateError

    memory = await open_memory()
    app = with_memory(RunnableLambda(lambda state: "not a state"), memory)
    with pytest.raises(InvalidUpdateError, match="Expected dict"):
        await app.ainvoke({"messages": [HumanMessage("q")]}, config("nd1"))
    with pytest.raises(InvalidUpdateError, match="Expected dict"):
        await app.ainvoke({"messages": [HumanMessage("q")]}, config("nd2"), stream_mode="values")


def counting_graph(steps: int) -> Any:
    """A graph that adds one AI message per step until it has taken `steps` steps: more than LangChain's default
    recursion limit (25), well within LangGraph's."""

    def step(state: MessagesState) -> dict[str, Any]:
        return {"messages": [AIMessage(f"step {sum(m.type == 'ai' for m in state['messages']) + 1}")]}

    builder = StateGraph(MessagesState)
    builder.add_node("step", step)
    builder.add_edge(START, "step")
    builder.add_conditional_edges(
        "step", lambda state: END if state["messages"][-1].text == f"step {steps}" else "step"
    )
    return builder.compile()


async def test_the_wrapped_graph_has_langgraphs_recursion_limit_on_both_paths(open_memory):
    memory = await open_memory()
    graph = counting_graph(30)
    assert len((await graph.ainvoke({"messages": [HumanMessage("count")]}))["messages"]) == 31  # on its own
    app = with_memory(graph, memory)
    direct = await app.ainvoke({"messages": [HumanMessage("count")]}, config("rl1"))
    runner = await app.ainvoke({"messages": [HumanMessage("count")]}, config("rl2"), stream_mode="values")
    assert shape(direct["messages"]) == shape(runner["messages"])
    assert direct["messages"][-1].text == "step 30"
    sync = app.invoke({"messages": [HumanMessage("count")]}, config("rl3"), stream_mode="values")
    assert sync["messages"][-1].text == "step 30"
    # A limit the caller sets still applies to the wrapped graph, on both paths.
    for thread, options in (("rl4", {}), ("rl5", {"stream_mode": "values"})):
        with pytest.raises(GraphRecursionError, match="limit of 20"):
            await app.ainvoke({"messages": [HumanMessage("count")]}, config(thread, recursion_limit=20), **options)


async def test_a_wrapped_runnable_that_is_no_graph_has_the_runners_context(open_memory, database_url):
    """A graph makes its own run context (interrupts, stream writer, runtime); any other runnable has the round
    node's, which only LangGraph's runner gives it."""
    from langchain_core.runnables import RunnableLambda
    from langgraph.types import interrupt

    memory = await open_memory()

    def ask(state: dict[str, Any]) -> dict[str, Any]:
        return {"messages": [AIMessage(f"approved: {interrupt('approve?')}")]}

    app = with_memory(RunnableLambda(ask), memory)
    paused = await app.ainvoke({"messages": [HumanMessage("may I?")]}, config("nl1"))
    assert shape(paused["messages"]) == [("human", "may I?")]
    assert [i.value for i in paused["__interrupt__"]] == ["approve?"]
    assert stored(database_url, "nl1") == []


async def test_a_recursion_limit_below_one_fails_before_the_round_starts(open_memory, database_url):
    memory = await open_memory()
    app = with_memory(EchoGraph().graph, memory)
    for thread, options in (("rl0a", {}), ("rl0b", {"stream_mode": "values"})):
        with pytest.raises(ValueError, match="recursion_limit must be at least 1"):
            await app.ainvoke({"messages": [HumanMessage("q")]}, config(thread, recursion_limit=0), **options)
    assert query(database_url, "SELECT count(*) FROM round_metrics WHERE conversation_id LIKE 'rl0%'") == [(0,)]


@dataclass
class Caller:
    who: str = "nobody"


async def test_the_wrapped_graphs_context_schema_is_kept(open_memory):
    """A context given as a dict reaches the wrapped graph as its context_schema's type, as on its own."""
    from langgraph.runtime import Runtime

    memory = await open_memory()
    seen: list[Any] = []

    def respond(state: MessagesState, runtime: Runtime[Caller]) -> dict[str, Any]:
        seen.append(runtime.context)
        return {"messages": [AIMessage(f"hi {runtime.context.who}")]}

    builder = StateGraph(MessagesState, context_schema=Caller)
    builder.add_node("respond", respond)
    builder.add_edge(START, "respond")
    graph = builder.compile()
    app = with_memory(graph, memory)
    assert app.get_context_jsonschema() == graph.get_context_jsonschema()
    result = await app.ainvoke({"messages": [HumanMessage("q")]}, config("ctx"), context={"who": "bob"})
    assert seen == [Caller("bob")]
    assert result["messages"][-1].text == "hi bob"


async def test_an_agent_with_a_long_tool_loop_runs_as_on_its_own(open_memory, database_url):
    """create_agent's graph (a state of more than messages: always LangGraph's runner) with 15 tool calls in a row:
    31 steps, within LangGraph's default limit, as the agent has on its own."""
    from langchain.agents import create_agent

    from tests.integration.agent_support import ToolScriptModel, lookup

    memory = await open_memory()
    app = with_memory(create_agent(ToolScriptModel(), [lookup]), memory)
    result = await app.ainvoke({"messages": [HumanMessage("look up tools:15:seq")]}, config("loop"))
    assert len(result["messages"]) == 32  # the input, 15 calls and their results, the answer
    assert len(stored(database_url, "loop")) == 32


async def test_a_failed_round_carries_the_runners_notes_on_both_paths(open_memory):
    """LangGraph notes the task an error came from; a traceback reads the same whichever path ran."""
    memory = await open_memory()
    app = with_memory(EchoGraph(fail_on="boom").graph, memory, name="chat")
    notes = []
    for thread, options in (("n1", {}), ("n2", {"stream_mode": "values"})):
        with pytest.raises(RuntimeError) as raised:
            await app.ainvoke({"messages": [HumanMessage("boom")]}, config(thread), **options)
        notes.append([note.split("' and id")[0] for note in raised.value.__notes__])
    with pytest.raises(InvalidInputError) as no_user:
        app.invoke({"messages": []}, config("n3"))
    assert notes[0] == notes[1] == ["During task with name 'respond", "During task with name 'chat"]
    assert no_user.value.__notes__[0].startswith("During task with name 'chat' and id '")
