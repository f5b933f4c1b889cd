"""`memory-agent demo`: a scripted conversation through a memory-wrapped graph, showing the memory evolve."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import psycopg
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langgraph.graph import START, MessagesState, StateGraph
from psycopg.rows import dict_row
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from memory_agent.errors import MemoryAgentError
from memory_agent.integrations.langgraph import with_memory
from memory_agent.llm import (
    OFFLINE,
    OfflineModel,
    chat_model,
    default_chat_model,
    openai_chat_model,
    openai_configured,
)
from memory_agent.llm.models import MEMORY_MODEL_VARIABLE
from memory_agent.observability import reads as observability
from memory_agent.observability.queries import ObservabilityQueries
from memory_agent.schemas import MemoryRecord
from memory_agent.schemas.keys import DEFAULT_TENANT_ID
from memory_agent.service import MemoryService
from memory_agent.settings import MemorySettings

# The demo's user, in a tenant of its own: an app on the same database (the embedded one is shared by every app
# of one OS user) never recalls the demo's memories; `memory-agent demo --clean` removes them.
USER_ID = "ana"
MONTH_USER_ID = "sam"  # the user of `memory-agent demo --days` (demo_month.py), in the same tenant
DEMO_TENANT = "memory-agent-demo"
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
    """The demo's offline assistant: a short deterministic answer saying what it was given. It never repeats the
    user's words, so recall finds what the user said, not the assistant's echo of it (an answer of its own is
    recalled as the reply to a question the user asked: recall shows a question as its reply)."""

    @property
    def _llm_type(self) -> str:
        return "memory-agent-demo-assistant"

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any) -> Any:
        from langchain_core.outputs import ChatGeneration, ChatResult

        has_memory = any("[Previous context:" in str(m.text) or m.type == "system" for m in messages)
        recalled = any("[Long-term memory:" in str(m.text) or "<long_term_memory>" in str(m.text) for m in messages)
        given = "a summary and the newest messages" if has_memory else f"{len(messages) - 1} earlier messages"
        if recalled:
            given += ", and a recalled block"
        reply = f"(offline assistant) I was given {given}; with a real model this would be an answer."
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


class DemoRunningError(MemoryAgentError):
    """Another `memory-agent demo` holds the demo's lock on this database."""


async def take_demo_lock(database_url: str) -> psycopg.AsyncConnection[Any]:
    """A connection holding the demo's advisory lock (freed when it closes, even if this process dies): two demos
    at once would clear and interleave each other's rounds."""
    conn = await psycopg.AsyncConnection.connect(database_url, autocommit=True, row_factory=dict_row)
    if await ObservabilityQueries.try_demo_lock(conn):
        return conn
    await conn.close()
    raise DemoRunningError(
        "another `memory-agent demo` is running on this database; wait for it to end, or give this one a "
        "database of its own (MEMORY_AGENT_DATA_DIR=<another directory>)"
    )


@asynccontextmanager
async def demo_lock(memory: MemoryService) -> AsyncIterator[None]:
    """The demo's lock held for the block (DemoRunningError when another demo holds it)."""
    lock = await take_demo_lock(str(memory.database_url))
    try:
        yield
    finally:
        await lock.close()


async def _clean(memory: MemoryService, thread_id: str) -> int:
    """Remove everything the demo wrote (its tenant's user and her conversations); the conversations removed."""
    forgotten = await memory.long_term.forget_user(USER_ID, tenant_id=DEMO_TENANT)
    removed = len(forgotten.conversations_deleted)
    # Earlier versions ran the demo in the default tenant, where its thread ids would now belong to another owner.
    for thread in (thread_id, f"{thread_id}-2"):
        if await memory.loop.arun(memory.backend.conversations.conversation_owner(thread)) == (
            DEFAULT_TENANT_ID,
            USER_ID,
        ):
            removed += await memory.delete_conversation(thread, user_id=USER_ID, tenant_id=DEFAULT_TENANT_ID)
    return removed


async def _run(rounds: int, thread_id: str, console: Console, clean: bool = False) -> None:
    settings = MemorySettings()
    # Named explicitly: the demo runs offline unless an OpenAI key or base URL is set, whatever the default model.
    # MEMORY_AGENT_MEMORY_MODEL's model when it is set or OpenAI is configured, else the offline one, by name (the
    # demo runs without a model; a service never falls back to it on its own).
    named = MEMORY_MODEL_VARIABLE in os.environ or openai_configured()
    # (default_chat_model: an unusable one is named by its variable, MEMORY_AGENT_MEMORY_MODEL.)
    summarizer = default_chat_model(settings) if named else chat_model(OFFLINE, settings)
    async with MemoryService.from_settings(settings, model=summarizer) as memory, demo_lock(memory):
        removed = await _clean(memory, thread_id)
        if clean:
            removed += len(
                (await memory.long_term.forget_user(MONTH_USER_ID, tenant_id=DEMO_TENANT)).conversations_deleted
            )
            console.print(f"removed the demo's memory (tenant {DEMO_TENANT!r}: {removed} conversations)")
            return
        await _converse(memory, summarizer, rounds, thread_id, console, removed)


def _header(console: Console, settings: MemorySettings, summarizer: BaseChatModel, chat_label: str) -> None:
    summarizer_label = (
        "offline summarizer (deterministic, extractive, no network)"
        if isinstance(summarizer, OfflineModel)
        else f"{type(summarizer).__name__}({settings.memory.model})"
    )
    where = "MEMORY_AGENT_DATABASE_URL" if settings.database.database_url else "the embedded PostgreSQL"
    console.rule("memory_agent demo")
    console.print(f"database   : {where}, tenant {DEMO_TENANT!r} (its own: `memory-agent demo --clean` removes it)")
    console.print(f"summarizer : {summarizer_label}")
    console.print(f"assistant  : {chat_label}")
    console.print(
        f"window     : each summary covers the last {settings.memory.rolling_window_size} messages; the first one "
        f"once the conversation reaches message {settings.memory.summarize_after_seq}, then one every "
        f"{settings.summary_cadence} new messages"
    )
    console.print("Each round shows what the model received, read back from the round's record (as `memory-agent at`).")


async def _converse(
    memory: MemoryService, summarizer: BaseChatModel, rounds: int, thread_id: str, console: Console, removed: int
) -> None:
    chat_model, chat_label = _chat_model(memory.settings)
    _header(console, memory.settings, summarizer, chat_label)
    if removed:
        console.print(f"(removed the previous demo's {removed} conversations)")
    app = with_memory(_chat_graph(chat_model), memory)
    tenant_key = memory.settings.rounds.tenant_id_key
    config = {"configurable": {"thread_id": thread_id, "user_id": USER_ID, tenant_key: DEMO_TENANT}}
    script = (SCRIPT * ((rounds // len(SCRIPT)) + 1))[:rounds]
    for number, text in enumerate(script, start=1):
        result = await app.ainvoke({"messages": [HumanMessage(text)]}, config)
        console.print(f"\n[bold]Round {number}[/bold]")
        await _print_round(console, memory, thread_id, number, text, result["messages"][-1].text)
        await memory.drain(timeout=120)  # only so the printed table is settled; rounds never wait
        records = await memory.conversations.get_memory_history(thread_id, user_id=USER_ID, tenant_id=DEMO_TENANT)
        if records:
            latest = records[-1]
            base = "null" if latest.base_memory_id is None else f"#{latest.base_memory_id}"
            console.print(
                f"  summary : #{latest.memory_id} {latest.status}, messages {latest.start_sequence}-"
                f"{latest.end_sequence}, built on {base}"
            )
    records = await memory.conversations.get_memory_history(thread_id, user_id=USER_ID, tenant_id=DEMO_TENANT)
    console.print()
    console.print(memory_table(records, title=f"Memory Table Evolution ({thread_id})"))
    if records:
        console.print("\n[bold]Latest memory text[/bold]")
        console.print(records[-1].memory_text, markup=False)
    items = await memory.long_term.list_items(USER_ID, tenant_id=DEMO_TENANT)
    console.print(f"\n[bold]Long-term items of user {USER_ID!r}[/bold] (written by the summaries, never in a round)")
    for item in items:
        said = sorted({(s.conversation_id, s.sequence_number) for s in item.sources}, key=str)
        sources = ", ".join(f"{c} message {n}" for c, n in said) or "-"
        console.print(f"  {item.item_type:<10} {item.key:<14} {item.content}  ({sources})", markup=False)
    second_thread = f"{thread_id}-2"
    console.rule(f"A second conversation of {USER_ID!r}: {second_thread}")
    second = {"configurable": {"thread_id": second_thread, "user_id": USER_ID, tenant_key: DEMO_TENANT}}
    result = await app.ainvoke({"messages": [HumanMessage(SECOND_CONVERSATION)]}, second)
    await _print_round(console, memory, second_thread, 1, SECOND_CONVERSATION, result["messages"][-1].text)
    console.print(
        f"\nThe conversation's thread id is [bold]{escape(thread_id)}[/bold]. Look at it again with "
        f"`memory-agent inspect {thread_id}` or `memory-agent at {thread_id} 5`; `memory-agent db url` prints "
        "the database URL for psql; `memory-agent demo --clean` removes the demo's memory."
    )


async def _print_round(
    console: Console, memory: MemoryService, thread_id: str, number: int, text: str, reply: str
) -> None:
    """The round as its record holds it: what `memory-agent at` reads, so the two always agree."""
    context = await memory.loop.arun(observability.context_at(memory.backend, thread_id, number))
    row = context.round
    if row["memory_id"] is None:
        stored = f"the {row['gap_size']} stored messages" if row["gap_size"] else "no stored messages"
        given = f"no summary yet: {stored} + the new one"
    else:
        gap = (
            f"{row['gap_size']} newer messages ({row['gap_start_sequence']}-{row['gap_end_sequence']})"
            if row["gap_size"]
            else "no newer messages"
        )
        given = f"summary #{row['memory_id']} (messages {row['memory_start_sequence']}-{row['memory_end_sequence']}) + {gap} + the new one"
    console.print(f"  user    : {text}", markup=False)
    console.print(f"  context : {given}", markup=False)
    _print_recalled(console, context.recall)
    console.print(f"  reply   : {reply}", markup=False)


def _print_recalled(console: Console, recall: dict[str, Any] | None, most: int = 4) -> None:
    """The recalled block's hit lines as the model got them (each cut to the width), `most` of them."""
    if recall is None:
        console.print("  recalled: nothing (no block was given)", markup=False)
        return
    hits = [line for line in recall["block"].splitlines() if line.startswith("- ")]
    memories = f"{len(hits)} memor{'y' if len(hits) == 1 else 'ies'}"
    console.print(f"  recalled: a block of {memories}, ~{recall['tokens']} tokens:", markup=False)
    width = max(40, console.width - 6)
    for line in hits[:most]:
        console.print("    " + (line if len(line) <= width else line[: width - 1] + "…"), markup=False)
    if len(hits) > most:
        console.print(f"    (+{len(hits) - most} more: `memory-agent at` shows them all)", markup=False)


def run_demo(rounds: int = 12, thread_id: str = "demo", clean: bool = False) -> None:
    asyncio.run(_run(rounds, thread_id, Console(), clean))
