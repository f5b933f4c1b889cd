"""Streaming and the sync/async entry points: the model's tokens reach the caller's stream; the loaded
context (memory and gap) and the summarizer's own model call never do, even when a summary runs while the
caller is still reading the stream. ChatOpenAI streams from FakeOpenAI over real HTTP (one chunk a word)."""

from __future__ import annotations

import asyncio

from langchain.agents import create_agent
from langchain_core.messages import AIMessageChunk, HumanMessage
from langchain_core.runnables import RunnableLambda
from langchain_openai import ChatOpenAI
from langgraph.graph import START, MessagesState, StateGraph

from memory_agent import MemoryMiddleware, with_memory
from tests.conftest import query

TURNS = ["alpha likes green tea", "bravo lives by the sea", "charlie plays the oboe", "delta asks a question"]
SUMMARY_MARKERS = ("[seq ", "Summary of the earlier conversation", "[Previous context:")


def streaming_model() -> ChatOpenAI:
    return ChatOpenAI(model="gpt-test", streaming=True, max_retries=0)


def chat_graph():
    model = streaming_model()

    async def respond(state: MessagesState) -> dict:
        return {"messages": [await model.ainvoke(state["messages"])]}

    builder = StateGraph(MessagesState)
    builder.add_node("respond", RunnableLambda(respond, name="respond"))
    builder.add_edge(START, "respond")
    return builder.compile()


async def wait_for_summary(url: str, thread: str, end_sequence: int) -> None:
    for _ in range(2000):  # up to 20 s on a loaded machine
        rows = query(
            url, "SELECT status FROM memory WHERE conversation_id = %s AND end_sequence = %s", [thread, end_sequence]
        )
        if rows and rows[0][0] == "completed":
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"no completed summary ending at {end_sequence}")


async def stream_round(app, url: str, index: int, thread: str, stored_after, **kwargs) -> list:
    """Round `index` through astream. Once `stored_after(chunk, count)` says the round is stored (its
    summary started), the test keeps reading only after that summary has finished: a summarizer that
    reported to the round's callbacks would land in this very stream."""
    chunks, waited = [], False
    inputs = {"messages": [HumanMessage(TURNS[index])]}
    async for chunk in app.astream(inputs, {"configurable": {"thread_id": thread}}, **kwargs):
        chunks.append(chunk)
        if not waited and stored_after(chunk, chunks):
            await wait_for_summary(url, thread, 2 * index + 1)  # round `index` ends at sequence 2*index+1
            waited = True
    assert waited
    return [c for c in chunks if c[-2] in ("messages", "updates")]


def after_memory_middleware(chunk, chunks) -> bool:
    return chunk[0] == "updates" and "MemoryMiddleware.after_agent" in chunk[1]


def after_memory_save(chunk, chunks) -> bool:
    # The wrapped graph's top-level values: the input, then the state after the round (stored by then).
    return sum(1 for c in chunks if c[0] == () and c[1] == "values") == 2


def check_round(chunks: list, round_index: int) -> None:
    messages = [c[-1] for c in chunks if c[-2] == "messages"]
    tokens = [m for m, _ in messages if isinstance(m, AIMessageChunk) and m.content]
    assert len(tokens) >= 3, "the model's answer arrives token by token"
    assert "".join(t.content for t in tokens) == f"echo: {TURNS[round_index]}"
    for chunk in chunks:
        shown = str(chunk)
        for marker in SUMMARY_MARKERS:
            assert marker not in shown, f"{marker!r} leaked into the stream: {shown[:300]}"
        for earlier in TURNS[:round_index]:
            assert earlier not in shown, f"loaded context {earlier!r} leaked into the stream"


async def test_agent_astream_messages_and_updates(fake_openai, open_memory, database_url):
    # The summarizer is ChatOpenAI over the same server; memory goes into a system message so the
    # echoed user text never contains it: anything summary-like in the stream is a leak.
    memory = await open_memory(memory_summarize_after_seq=1, injection_mode="system")
    agent = create_agent(streaming_model(), [], middleware=[MemoryMiddleware(memory)])
    for index, text in enumerate(TURNS):
        chunks = await stream_round(
            agent, database_url, index, "agent", after_memory_middleware, stream_mode=["messages", "updates"]
        )
        check_round(chunks, index)
        updates = [c[1] for c in chunks if c[0] == "updates"]
        assert any("model" in u and u["model"]["messages"][-1].text == f"echo: {text}" for u in updates)
    summaries = query(database_url, "SELECT count(*) FROM memory WHERE status = 'completed'")[0][0]
    assert summaries >= 3 and len(fake_openai.structured_requests()) == summaries
    # The model was given the memory each round: it was loaded, just never streamed.
    chat_requests = [r for r in fake_openai.requests if r.get("stream")]
    assert all(r["messages"][0]["content"].startswith("Summary of the earlier conversation") for r in chat_requests[1:])


async def test_with_memory_astream_messages_and_updates(fake_openai, open_memory, database_url):
    memory = await open_memory(memory_summarize_after_seq=1, injection_mode="system")
    app = with_memory(chat_graph(), memory)
    for index, text in enumerate(TURNS):
        # The wrapped graph runs as a subgraph: its model's tokens stream with subgraphs=True. ("values" is
        # the state, which holds the context by definition; it is only used to know the round is stored.)
        chunks = await stream_round(
            app,
            database_url,
            index,
            "graph",
            after_memory_save,
            stream_mode=["messages", "updates", "values"],
            subgraphs=True,
        )
        check_round(chunks, index)
        top_updates = [c[2] for c in chunks if c[0] == () and c[1] == "updates"]
        assert [list(u) for u in top_updates] == [["agent"]]  # memory_load / memory_save stay internal
        assert [m.text for m in top_updates[0]["agent"]["messages"]] == [f"echo: {text}"]
    assert query(database_url, "SELECT count(*) FROM memory WHERE status = 'completed'")[0][0] >= 3


async def test_invoke_inside_a_running_event_loop(fake_openai, open_memory, database_url):
    # A sync call made from async code (a handler that is not async-aware): the memory work runs on the
    # service's own loop, so blocking this one does not deadlock.
    memory = await open_memory()
    agent = create_agent(ChatOpenAI(model="gpt-test", max_retries=0), [], middleware=[MemoryMiddleware(memory)])
    asyncio.get_running_loop()
    result = agent.invoke({"messages": [HumanMessage("sync inside async")]}, {"configurable": {"thread_id": "mixed"}})
    assert result["messages"][-1].text == "echo: sync inside async"
    result = await agent.ainvoke({"messages": [HumanMessage("then async")]}, {"configurable": {"thread_id": "mixed"}})
    assert result["messages"][-1].text == "echo: then async"
    assert query(database_url, "SELECT count(*) FROM messages WHERE conversation_id = 'mixed'")[0][0] == 4
