"""A memory-wrapped chat graph for `langgraph dev` / LangGraph Platform (see langgraph.json).

The server keeps each thread's state with its own checkpointer; memory_agent stores every round and gives
the model the memory plus the messages after it. Configure with MEMORY_AGENT_* (the database; an embedded
PostgreSQL when MEMORY_AGENT_DATABASE_URL is unset) and OPENAI_API_KEY / OPENAI_BASE_URL / OPENAI_MODEL.
"""

from __future__ import annotations

import atexit

from langchain_core.runnables import RunnableLambda
from langgraph.graph import START, MessagesState, StateGraph

from memory_agent import MemoryService, openai_chat_model, with_memory


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


memory = MemoryService.from_settings().open()
atexit.register(memory.close)

graph = with_memory(build_chat_graph(), memory, name="chat")
