"""`memory-agent demo`: a scripted conversation through a memory-wrapped graph, showing the memory evolve."""

from __future__ import annotations

import asyncio
import os
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langgraph.graph import START, MessagesState, StateGraph
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from memory_agent.integrations.langgraph import with_memory
from memory_agent.schemas import MemoryRecord
from memory_agent.service import MemoryService
from memory_agent.settings import MemorySettings
from memory_agent.summarize.models import default_summary_model

SCRIPT = [
    "Hi! I'm Ana, and I'm planning a trip to Lisbon in May.",
    "I'll travel with my partner Joao; we have 5 days.",
    "Our budget is about 2,000 euros for the two of us, flights excluded.",
    "We love seafood, but Joao is allergic to shellfish.",
    "Can you suggest a neighbourhood to stay in? We like walkable areas.",
    "Alfama sounds great. We also want one day trip outside the city.",
    "Sintra it is. How do we get there by train?",
    "What should we book in advance for Sintra?",
    "Let's plan day 3 around museums. Any must-sees?",
    "We'd like one fado evening. Where should we go?",
    "Change of plan: we now have 6 days, not 5.",
    "Can you recap our plan so far, with the allergy in mind?",
    "Thanks! Last question: what's a good day for Belem?",
    "Great, that's everything for now.",
]


class ScriptedChatModel(BaseChatModel):
    """The demo's offline assistant: a short deterministic answer that names what it was given."""

    @property
    def _llm_type(self) -> str:
        return "memory-agent-demo-assistant"

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any) -> Any:
        from langchain_core.outputs import ChatGeneration, ChatResult

        last = str(messages[-1].text).split("\n\n")[-1]
        has_memory = any("[Previous context:" in str(m.text) or m.type == "system" for m in messages)
        source = "memory + recent messages" if has_memory else f"{len(messages) - 1} earlier messages"
        reply = f"(offline assistant, seeing {source}) Noted: {last[:60]}"
        return ChatResult(generations=[ChatGeneration(message=AIMessage(reply))])


def _chat_model(settings: MemorySettings) -> tuple[BaseChatModel, str]:
    if os.environ.get("OPENAI_API_KEY") or os.environ.get("OPENAI_BASE_URL"):
        from memory_agent.summarize.models import openai_chat_model

        model = os.environ.get("MEMORY_AGENT_DEMO_CHAT_MODEL", settings.memory_model)
        return openai_chat_model(model), f"ChatOpenAI({model})"
    return ScriptedChatModel(), "offline scripted assistant (no OPENAI_API_KEY / OPENAI_BASE_URL)"


def _chat_graph(model: BaseChatModel) -> Any:
    async def respond(state: MessagesState) -> dict[str, Any]:
        return {"messages": [await model.ainvoke(state["messages"])]}

    builder = StateGraph(MessagesState)
    builder.add_node("respond", respond)
    builder.add_edge(START, "respond")
    return builder.compile()


def memory_table(records: list[MemoryRecord], title: str = "memory") -> Table:
    table = Table(title=title, title_justify="left")
    for column in ("id", "start", "end", "base_id", "status", "covers", "gen ms"):
        table.add_column(column, justify="right" if column not in ("status", "covers") else "left")
    for r in records:
        covers = f"Round {r.start_sequence // 2 + 1}-{r.end_sequence // 2 + 1}"
        if r.start_sequence > 0:
            covers += f" (R1-{r.start_sequence // 2} dropped)" if r.start_sequence > 2 else " (R1 dropped)"
        table.add_row(
            str(r.memory_id),
            str(r.start_sequence),
            str(r.end_sequence),
            "null" if r.base_memory_id is None else str(r.base_memory_id),
            r.status,
            covers,
            "" if r.generation_time_ms is None else str(r.generation_time_ms),
        )
    return table


async def _run(rounds: int, thread_id: str, console: Console) -> None:
    settings = MemorySettings()
    summarizer = default_summary_model(settings)
    chat_model, chat_label = _chat_model(settings)
    summarizer_label = (
        "OFFLINE summarizer (deterministic, extractive, no network)"
        if type(summarizer).__name__ == "OfflineSummaryModel"
        else f"{type(summarizer).__name__}({settings.memory_model})"
    )
    console.rule("memory_agent demo")
    console.print(f"database   : {'MEMORY_AGENT_DATABASE_URL' if settings.database_url else 'embedded PostgreSQL'}")
    console.print(f"summarizer : {summarizer_label}")
    console.print(f"assistant  : {chat_label}")
    console.print(
        f"window     : {settings.memory_rolling_window_size} messages, summarize from seq "
        f"{settings.memory_summarize_after_seq}, injection '{settings.injection_mode}'"
    )
    async with MemoryService.from_settings(settings, model=summarizer) as memory:
        if await memory.delete_conversation(thread_id):
            console.print(f"(removed the previous demo conversation {thread_id!r})")
        app = with_memory(_chat_graph(chat_model), memory)
        config = {"configurable": {"thread_id": thread_id}}
        script = (SCRIPT * ((rounds // len(SCRIPT)) + 1))[:rounds]
        for number, text in enumerate(script, start=1):
            context = await memory.get_context_for_workflow(thread_id)
            if context.memory_id is None:
                given = f"raw fallback: {len(context.gap_messages)} stored messages + the current one"
            else:
                gap = (
                    f"gap seq {context.gap_start_sequence}-{context.gap_end_sequence}"
                    if context.gap_messages
                    else "no gap"
                )
                given = f"memory #{context.memory_id} (seq {context.memory_start_sequence}-{context.memory_end_sequence}) + {gap} + the current one"
            result = await app.ainvoke({"messages": [HumanMessage(text)]}, config)
            console.print(f"\n[bold]Round {number}[/bold]")
            console.print(f"  user    : {text}", markup=False)
            console.print(f"  context : {given}", markup=False)
            console.print(f"  reply   : {result['messages'][-1].text[:100]}", markup=False)
            await memory.drain(timeout=120)  # only so the printed table is settled; rounds never wait
            records = await memory.get_memory_history(thread_id)
            if records:
                latest = records[-1]
                console.print(
                    f"  memory  : #{latest.memory_id} {latest.status} window {latest.start_sequence}-{latest.end_sequence}"
                    f" (base {latest.base_memory_id})"
                )
        records = await memory.get_memory_history(thread_id)
        console.print()
        console.print(memory_table(records, title=f"Memory Table Evolution ({thread_id})"))
        if records:
            console.print("\n[bold]Latest memory text[/bold]")
            console.print(records[-1].memory_text, markup=False)
        console.print(
            f"\nThe conversation's thread id is [bold]{escape(thread_id)}[/bold]. Look at it again with "
            f"`memory-agent inspect {thread_id}` or `memory-agent at {thread_id} 5`; `memory-agent db url` prints "
            "the database URL for psql."
        )


def run_demo(rounds: int = 12, thread_id: str = "demo") -> None:
    asyncio.run(_run(rounds, thread_id, Console()))
