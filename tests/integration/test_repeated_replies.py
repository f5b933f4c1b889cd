"""A model that returns the same message object every round (GenericFakeChatModel over `cycle([...])`, common in
tests; a proxy or cache that repeats ids): each round's reply is this round's, stored and returned, on both
integrations; replayed input is still stored once."""

from __future__ import annotations

from itertools import cycle

import pytest
from langchain.agents import create_agent
from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph

from memory_agent import MemoryMiddleware, with_memory
from tests.conftest import query

ROUNDS = 6


def chat_graph(model: GenericFakeChatModel):
    async def respond(state: MessagesState) -> dict:
        return {"messages": [await model.ainvoke(state["messages"])]}

    builder = StateGraph(MessagesState)
    builder.add_node("respond", respond)
    builder.add_edge(START, "respond")
    return builder.compile()


def stored(url: str, thread: str) -> list[tuple[str, str]]:
    return query(
        url, "SELECT role, content FROM messages WHERE conversation_id = %s ORDER BY sequence_number", [thread]
    )


def expected(rounds: int) -> list[tuple[str, str]]:
    return [row for n in range(rounds) for row in (("user", f"question {n}"), ("assistant", "same answer"))]


@pytest.mark.parametrize("checkpointer", [False, True])
async def test_with_memory_stores_and_returns_every_rounds_reply(open_memory, database_url, checkpointer):
    memory = await open_memory()
    model = GenericFakeChatModel(messages=cycle([AIMessage("same answer")]))
    app = with_memory(chat_graph(model), memory)
    if checkpointer:
        app = app.copy(update={"checkpointer": InMemorySaver()})
    config = {"configurable": {"thread_id": f"w{checkpointer}"}}
    for n in range(ROUNDS):
        result = await app.ainvoke({"messages": [HumanMessage(f"question {n}")]}, config)
        texts = [m.text for m in result["messages"]]
        assert texts[-2:] == [f"question {n}", "same answer"], (n, texts)
        if checkpointer:  # the whole history, in order: the reply is added, never put in an earlier one's place
            assert texts == [t for row in expected(n + 1) for t in row[1:]]
    assert stored(database_url, f"w{checkpointer}") == expected(ROUNDS)


@pytest.mark.parametrize("checkpointer", [False, True])
async def test_the_agent_middleware_stores_and_returns_every_rounds_reply(open_memory, database_url, checkpointer):
    memory = await open_memory()
    model = GenericFakeChatModel(messages=cycle([AIMessage("same answer")]))
    agent = create_agent(
        model, [], middleware=[MemoryMiddleware(memory)], checkpointer=InMemorySaver() if checkpointer else None
    )
    config = {"configurable": {"thread_id": f"a{checkpointer}"}}
    for n in range(ROUNDS):
        result = await agent.ainvoke({"messages": [HumanMessage(f"question {n}")]}, config)
        texts = [m.text for m in result["messages"]]
        assert texts[-2:] == [f"question {n}", "same answer"], (n, texts)
        if checkpointer:
            assert texts == [t for row in expected(n + 1) for t in row[1:]]
    assert stored(database_url, f"a{checkpointer}") == expected(ROUNDS)


async def test_replayed_input_is_still_stored_once(open_memory, database_url):
    memory = await open_memory()
    model = GenericFakeChatModel(messages=cycle([AIMessage("same answer")]))
    app = with_memory(chat_graph(model), memory)
    question = HumanMessage("question 0", id="q-0")
    config = {"configurable": {"thread_id": "replay"}}
    await app.ainvoke({"messages": [question]}, config)
    # The same input sent again (a double send): no new input is stored, so no round is; nothing twice.
    with pytest.raises(Exception, match="user message"):
        await app.ainvoke({"messages": [question]}, config)
    assert stored(database_url, "replay") == expected(1)
