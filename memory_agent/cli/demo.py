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
from memory_agent.llm import OfflineModel, default_chat_model, openai_chat_model, openai_configured
from memory_agent.long_term.recall.block import RecallHit
from memory_agent.schemas import MemoryRecord
from memory_agent.service import MemoryService
from memory_agent.settings import MemorySettings

USER_ID = "ana"  # the demo's user: both of its conversations belong to her
SECOND_CONVERSATION = "Back again! Any seafood restaurant ideas that are safe for Joao's shellfish allergy?"

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
    "Can you recap our plan so far, with Joao's shellfish allergy in mind?",
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
        recalled = any("[Long-term memory:" in str(m.text) or "<long_term_memory>" in str(m.text) for m in messages)
        source = "memory + recent messages" if has_memory else f"{len(messages) - 1} earlier messages"
        if recalled:
            source += " + long-term memory"
        reply = f"(offline assistant, seeing {source}) Noted: {last[:60]}"
        return ChatResult(generations=[ChatGeneration(message=AIMessage(reply))])


def _chat_model(settings: MemorySettings) -> tuple[BaseChatModel, str]:
    if openai_configured():
        model = os.environ.get("MEMORY_AGENT_DEMO_CHAT_MODEL", settings.memory.model)
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
    summarizer = default_chat_model(settings)
    chat_model, chat_label = _chat_model(settings)
    summarizer_label = (
        "OFFLINE summarizer (deterministic, extractive, no network)"
        if isinstance(summarizer, OfflineModel)
        else f"{type(summarizer).__name__}({settings.memory.model})"
    )
    console.rule("memory_agent demo")
    console.print(
        f"database   : {'MEMORY_AGENT_DATABASE_URL' if settings.database.database_url else 'embedded PostgreSQL'}"
    )
    console.print(f"summarizer : {summarizer_label}")
    console.print(f"assistant  : {chat_label}")
    console.print(
        f"window     : {settings.memory.rolling_window_size} messages, summarize from seq "
        f"{settings.memory.summarize_after_seq}, then every {settings.memory.summary_cadence} new messages, "
        f"injection '{settings.rounds.injection_mode}'"
    )
    async with MemoryService.from_settings(settings, model=summarizer) as memory:
        second_thread = f"{thread_id}-2"
        for thread in (thread_id, second_thread):  # a thread id belongs to one user: start both afresh
            if await memory.delete_conversation(thread):
                console.print(f"(removed the previous demo conversation {thread!r})")
        forgotten = await memory.forget_user(USER_ID)
        if forgotten.items_deleted:
            console.print(f"(forgot {len(forgotten.items_deleted)} long-term items of the previous demo)")
        app = with_memory(_chat_graph(chat_model), memory)
        config = {"configurable": {"thread_id": thread_id, "user_id": USER_ID}}
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
            recalled = await _recalled(memory, text, context)
            result = await app.ainvoke({"messages": [HumanMessage(text)]}, config)
            console.print(f"\n[bold]Round {number}[/bold]")
            console.print(f"  user    : {text}", markup=False)
            console.print(f"  context : {given}", markup=False)
            _print_recalled(console, recalled)
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
        items = await memory.list_items(USER_ID)
        console.print(
            f"\n[bold]Long-term items of user {USER_ID!r}[/bold] (written by the summaries, never in a round)"
        )
        for item in items:
            said = sorted({(s.conversation_id, s.sequence_number) for s in item.sources}, key=str)
            sources = ", ".join(f"{c} seq {n}" for c, n in said) or "-"
            console.print(f"  {item.item_type:<10} {item.key:<14} {item.content}  ({sources})", markup=False)
        console.rule(f"A second conversation of {USER_ID!r}: {second_thread}")
        second = {"configurable": {"thread_id": second_thread, "user_id": USER_ID}}
        context = await memory.get_context_for_workflow(second_thread)
        recalled = await _recalled(memory, SECOND_CONVERSATION, context)
        result = await app.ainvoke({"messages": [HumanMessage(SECOND_CONVERSATION)]}, second)
        console.print(f"  user    : {SECOND_CONVERSATION}", markup=False)
        console.print("  context : a new conversation: no memory, no gap", markup=False)
        _print_recalled(console, recalled)
        console.print(f"  reply   : {result['messages'][-1].text[:100]}", markup=False)
        console.print(
            f"\nThe conversation's thread id is [bold]{escape(thread_id)}[/bold]. Look at it again with "
            f"`memory-agent inspect {thread_id}` or `memory-agent at {thread_id} 5`; `memory-agent db url` prints "
            "the database URL for psql."
        )


async def _recalled(memory: MemoryService, text: str, context: Any) -> list[RecallHit]:
    """What the round's long-term recall finds (the round itself leaves out turns its gap already holds)."""
    gap = {
        (context.conversation_id, s)
        for s in range(context.gap_start_sequence or 0, (context.gap_end_sequence or -1) + 1)
    }
    hits = await memory.recall(USER_ID, text)
    return [hit for hit in hits if not (hit.kind == "turn" and set(hit.sources) <= gap)]


def _print_recalled(console: Console, hits: list[RecallHit], most: int = 4) -> None:
    """Items and summaries first (what recall is for), then the best turns; `most` lines in all."""
    ordered = sorted(hits, key=lambda hit: hit.kind == "turn")
    for hit in ordered[:most]:
        if hit.kind == "turn":
            origin = f"turn {hit.conversation_id} seq {hit.sequences[0]}"
        elif hit.note_id is not None:
            origin = f"{hit.period} note #{hit.note_id} of {hit.period_start}"
        else:
            origin = f"{hit.kind} #{hit.item_ids[0]} from " + (
                ", ".join(f"{c} seq {s}" for c, s in sorted(set(hit.sources))) or "its source items"
            )
        console.print(f"  recalled: {hit.text[:80]}  <- {origin}", markup=False)


def run_demo(rounds: int = 12, thread_id: str = "demo") -> None:
    asyncio.run(_run(rounds, thread_id, Console()))
