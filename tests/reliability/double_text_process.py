"""One round from its own OS process, for the double-texting test: its graph takes DELAY seconds and writes
the texts of the messages it was given as JSON to OUT. Usage: python -m tests.reliability.double_text_process
URL THREAD TEXT DELAY OUT"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.graph import START, MessagesState, StateGraph

from memory_agent import MemoryService, MemorySettings, with_memory


async def main(url: str, thread: str, text: str, delay: float, out: str) -> None:
    async def respond(state: MessagesState) -> dict[str, Any]:
        with open(out, "w", encoding="utf-8") as file:
            json.dump([str(m.text) for m in state["messages"]], file)
        await asyncio.sleep(delay)
        return {"messages": [AIMessage(f"reply to {text}")]}

    builder = StateGraph(MessagesState)
    builder.add_node("respond", respond)
    builder.add_edge(START, "respond")
    settings = MemorySettings(database_url=url, memory_summarize_after_seq=1000, memory_rolling_window_size=1002)
    async with MemoryService.from_settings(settings) as memory:
        app = with_memory(builder.compile(), memory)
        await app.ainvoke({"messages": [HumanMessage(text)]}, {"configurable": {"thread_id": thread}})


if __name__ == "__main__":
    url, thread, text, delay, out = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]), sys.argv[5]
    asyncio.run(main(url, thread, text, delay, out))
