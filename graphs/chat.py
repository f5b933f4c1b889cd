"""A memory-wrapped chat graph for `langgraph dev` / LangSmith Deployment (see langgraph.json).

The server keeps each thread's state with its own checkpointer; memory_agent stores every round and gives
the model the memory plus the messages after it. The round's user is the server's authenticated user, else the
run's context or configurable `user_id`; none (Studio without auth): the thread's own scope. Configure with
MEMORY_AGENT_* (the database; an embedded PostgreSQL when MEMORY_AGENT_DATABASE_URL is unset; the summarizer,
MEMORY_AGENT_MEMORY_MODEL, any provider: docs/how-to/models.md) and OPENAI_API_KEY / OPENAI_BASE_URL / OPENAI_MODEL for
the chat model. See docs/how-to/langgraph-server.md.
"""

from __future__ import annotations

from langchain_core.runnables import RunnableLambda
from langgraph.graph import START, MessagesState, StateGraph

from memory_agent import openai_chat_model, with_memory
from memory_agent.langgraph_server import shared_memory


def build_chat_graph():
    model = openai_chat_model()

    def respond(state: MessagesState) -> dict:
        return {"messages": [model.invoke(state["messages"])]}

    async def arespond(state: MessagesState) -> dict:
        return {"messages": [await model.ainvoke(state["messages"])]}

    builder = StateGraph(MessagesState)
    builder.add_node("respond", RunnableLambda(respond, afunc=arespond, name="respond"))
    builder.add_edge(START, "respond")
    return builder.compile(name="chat")


memory = shared_memory()
graph = with_memory(build_chat_graph(), memory, name="chat")
