"""An app process for the scale-out test: conversations run through `with_memory`, summaries deferred
to procrastinate workers. Usage: python -m tests.reliability.app_process URL PREFIX CONVERSATIONS ROUNDS"""

from __future__ import annotations

import asyncio
import sys

from langchain_core.messages import HumanMessage

from memory_agent import MemoryService, MemorySettings, with_memory
from tests.support import EchoChat


async def main(url: str, prefix: str, conversations: int, rounds: int) -> None:
    settings = MemorySettings(database_url=url, executor="procrastinate", pool_max_size=5)
    async with MemoryService.from_settings(settings) as memory:
        app = with_memory(EchoChat().graph, memory)

        async def conversation(name: str) -> None:
            for n in range(rounds):
                await app.ainvoke(
                    {"messages": [HumanMessage(f"{name} says {n}")]}, {"configurable": {"thread_id": name}}
                )

        await asyncio.gather(*(conversation(f"{prefix}-{i}") for i in range(conversations)))


if __name__ == "__main__":
    url, prefix, conversations, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    asyncio.run(main(url, prefix, conversations, rounds))
