"""An agent with tools: `create_agent` + two tools + MemoryMiddleware, run with `ainvoke` from a script.

A round is the user's message plus every AI and tool message up to the final answer; it is stored whole,
and the memory window and the context given to the model never split a tool call from its results.

    OPENAI_API_KEY=sk-... python examples/agent_with_tools.py

The database comes from MemorySettings (MEMORY_AGENT_DATABASE_URL, or an embedded PostgreSQL when unset).
"""

from __future__ import annotations

import asyncio
import sys

from langchain.agents import create_agent
from langchain_core.messages import HumanMessage
from langchain_core.tools import tool

from memory_agent import MemoryMiddleware, MemoryService, openai_chat_model

TURNS = [
    "I'm in Lisbon. What's the weather like here, and how much is 18 euros in dollars?",
    "Thanks. Which city did I say I'm in?",
]


@tool
def get_weather(city: str) -> str:
    """Today's weather for a city."""
    return f"Sunny and 24°C in {city}"


@tool
def convert_currency(amount: float, currency_from: str, currency_to: str) -> str:
    """Convert an amount between currencies (fixed demo rates)."""
    rates = {("EUR", "USD"): 1.08, ("USD", "EUR"): 0.93}
    rate = rates.get((currency_from.upper(), currency_to.upper()), 1.0)
    return f"{amount} {currency_from.upper()} = {amount * rate:.2f} {currency_to.upper()}"


async def main(turns: list[str] | None = None, thread_id: str = "agent-demo") -> list[str]:
    """Run the turns as rounds of one conversation; returns the final answers."""
    answers = []
    async with MemoryService.from_settings() as memory:
        agent = create_agent(
            openai_chat_model(),
            [get_weather, convert_currency],
            system_prompt="You are a concise travel assistant. Use the tools when they help.",
            middleware=[MemoryMiddleware(memory)],
        )
        config = {"configurable": {"thread_id": thread_id}}
        for text in turns or TURNS:
            result = await agent.ainvoke({"messages": [HumanMessage(text)]}, config)
            for message in result["messages"][1:-1]:
                for call in getattr(message, "tool_calls", None) or []:
                    print(f"  tool call: {call['name']}({call['args']})")
            answers.append(result["messages"][-1].text)
            print(f"you> {text}\nbot> {answers[-1]}\n")
        await memory.drain(timeout=60)
    return answers


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:] or None))
