"""A chat app: a one-node LangGraph graph calling ChatOpenAI, wrapped by `with_memory`.

Each `invoke` is one round: the graph sees the memory of the conversation plus the messages after it, never
the whole history; the round is stored and a summary starts in the background when one is due.

    OPENAI_API_KEY=sk-... python examples/chat_app.py
    python examples/chat_app.py "I am Ada" "What is my name?"     # your own turns

The database comes from MemorySettings: MEMORY_AGENT_DATABASE_URL, or an embedded PostgreSQL when unset.
OPENAI_BASE_URL points the chat model and the summarizer at any OpenAI-compatible server.
"""

from __future__ import annotations

import sys

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage
from langchain_core.runnables import RunnableLambda
from langgraph.graph import START, MessagesState, StateGraph

from memory_agent import MemoryService, openai_chat_model, with_memory

DEFAULT_TURNS = [
    "Hi! I'm planning a trip to Lisbon in May.",
    "I prefer trains to planes, and I am vegetarian.",
    "Which neighbourhood should I stay in?",
    "Remind me: how do I like to travel, and what do I eat?",
]


def build_chat_graph(model: BaseChatModel | None = None):
    """The app without memory: one node that answers from the messages it is given."""
    model = model or openai_chat_model()

    def respond(state: MessagesState) -> dict:
        return {"messages": [model.invoke(state["messages"])]}

    async def arespond(state: MessagesState) -> dict:
        return {"messages": [await model.ainvoke(state["messages"])]}

    builder = StateGraph(MessagesState)
    builder.add_node("respond", RunnableLambda(respond, afunc=arespond, name="respond"))
    builder.add_edge(START, "respond")
    return builder.compile(name="chat")


def main(turns: list[str] | None = None, thread_id: str = "chat-app-demo") -> list[str]:
    """Run the turns as rounds of one conversation; returns the replies."""
    replies = []
    with MemoryService.from_settings() as memory:  # settings from MEMORY_AGENT_* environment variables
        app = with_memory(build_chat_graph(), memory)
        config = {"configurable": {"thread_id": thread_id}}
        for text in turns or DEFAULT_TURNS:
            result = app.invoke({"messages": [HumanMessage(text)]}, config)
            replies.append(result["messages"][-1].text)
            print(f"you> {text}\nbot> {replies[-1]}\n")
        memory.call_sync(memory.drain(timeout=60))  # let the last summary finish before closing
        for version in memory.call_sync(memory.conversations.get_memory_history(thread_id)):
            print(
                f"memory {version.memory_id} ({version.status}) covers sequences "
                f"{version.start_sequence}-{version.end_sequence}"
            )
    return replies


if __name__ == "__main__":
    main(sys.argv[1:] or None)
