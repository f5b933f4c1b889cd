"""`memory-agent demo --days 35`: a simulated month of one user under a manual clock, on the offline models.

The user chats on some days (a short conversation each, through a memory-wrapped graph); every simulated
night at 05:00 UTC the nightly consolidation runs for them, as a worker's tick would: that day's note, the
Sunday weekly rollup, the monthly rollup on the 1st, the compaction of dailies older than retain_days. The
clock starts on Monday, September 1 2025, so 35 nights meet 5 Sundays and one 1st. At the end a past night is
run again to show it writes nothing.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from langchain_core.messages import HumanMessage
from rich.console import Console
from rich.table import Table

from memory_agent.cli.demo import DEMO_TENANT, MONTH_USER_ID, ScriptedChatModel, _chat_graph, demo_lock
from memory_agent.consolidation import (
    ConsolidationRun,
    ManualClock,
    consolidate_period,
    list_notes,
    run_nightly,
)
from memory_agent.consolidation.periods import PERIODS, Period, rollups_due_after
from memory_agent.integrations.langgraph import with_memory
from memory_agent.llm import OfflineConsolidationModel, OfflineModel
from memory_agent.service import MemoryService
from memory_agent.settings import MemorySettings

# The conversation demo's tenant, so `memory-agent demo --clean` removes this user too.
TENANT, USER = DEMO_TENANT, MONTH_USER_ID
LEGACY_TENANT = "demo"
START = datetime(2025, 9, 1, tzinfo=UTC)  # a Monday
FOLLOW_UPS = ["Thanks, can you keep that in mind?", "Great, that's all for today."]
# What the user says on the days they chat (day 0 = START); the other days they are away.
CHATS: dict[int, str] = {
    0: "My name is Sam and I live in Porto. Remind me to renew my passport.",
    1: "I prefer dark mode in every app. My sister is Marta.",
    2: "We decided to run the team offsite in Braga.",
    3: "I work at Acme Robotics. Remind me to book the Braga venue.",
    4: "I'm allergic to peanuts, so no satay at the offsite.",
    9: "Done: book the Braga venue. My boss is Rita, she approved it.",
    11: "I moved to Lisbon last weekend.",
    15: "I prefer light mode now, dark mode strains my eyes.",
    17: "Remind me to call the Lisbon landlord.",
    22: "We decided to hire two more engineers.",
    24: "I work for Beta Labs since Monday.",
    29: "Remind me to plan the October retro.",
    31: "We decided to move the offsite to October.",
    33: "I'm vegetarian these days.",
}


def at(day: int, hour: int) -> datetime:
    return START + timedelta(days=day, hours=hour)


def _thread(day: int) -> str:
    return f"month-{USER}-{(START + timedelta(days=day)).date().isoformat()}"


async def _free_legacy_threads(memory: MemoryService, days: int) -> int:
    """Earlier versions ran the month in a tenant named 'demo', which still owns those thread ids: delete the
    run's threads that owner holds (and only those), else the first day's round is refused."""
    removed = 0
    for day in range(days):
        if CHATS.get(day % 35) is None:
            continue
        owner = await memory.loop.arun(memory.backend.conversations.conversation_owner(_thread(day)))
        if owner == (LEGACY_TENANT, USER):
            removed += await memory.delete_conversation(_thread(day), user_id=USER, tenant_id=LEGACY_TENANT)
    return removed


async def _chat(memory: MemoryService, app: Any, day: int, text: str) -> None:
    thread = _thread(day)
    config = {"configurable": {"thread_id": thread, "user_id": USER, "tenant_id": TENANT}}
    for said in [text, *FOLLOW_UPS]:
        await app.ainvoke({"messages": [HumanMessage(said)]}, config)
    # The summary writes the day's items at the clock's time: let it finish before the clock moves on.
    await memory.drain(timeout=60)


async def _snapshot(conn: Any) -> list[list[dict[str, Any]]]:
    return [await list_notes(conn, period, tenant_id=TENANT, user_id=USER, limit=1000) for period in PERIODS]


async def _simulate(days: int, console: Console) -> dict[str, int]:
    clock = ManualClock(at(0, 9))
    settings = MemorySettings()
    model = OfflineConsolidationModel()
    config = settings
    totals = {"daily": 0, "weekly": 0, "monthly": 0, "compacted": 0}
    # The demo's lock: two runs at once would forget each other's user and interleave their nights.
    async with MemoryService(settings, model=OfflineModel(), clock=clock) as memory, demo_lock(memory):
        forgotten = await memory.long_term.forget_user(USER, tenant_id=TENANT)
        if forgotten.items_deleted or forgotten.notes_deleted:
            console.print(f"(forgot the previous run's user {USER!r}: its items, notes and conversations)")
        if legacy := await _free_legacy_threads(memory, days):
            console.print(f"(removed {legacy} conversations an earlier version left in tenant {LEGACY_TENANT!r})")
        app = with_memory(_chat_graph(ScriptedChatModel()), memory)
        table = Table("day", "chat", "nightly run", "daily note", "weekly", "monthly", "compacted")
        table.title = (
            f"{days} simulated days of {TENANT}/{USER} (runs at 05:00 UTC; daily notes older than "
            f"{config.consolidation.retain_days} days, MEMORY_AGENT_RETAIN_DAYS, are compacted)"
        )
        for day in range(days):
            text = CHATS.get(day % 35)
            if text is not None:
                clock.set(at(day, 9))
                await _chat(memory, app, day, text)
            now = clock.set(at(day + 1, 5))
            async with memory.backend.session() as conn:
                report = await run_nightly(conn, TENANT, USER, now, run=ConsolidationRun(model, config))
            written = {period: report.written(period) for period in PERIODS}
            for period, count in written.items():
                totals[period] += count
            totals["compacted"] += len(report.compacted)
            # A daily's inputs: the long-term items the day's conversation wrote.
            inputs = sum(o.notes_consolidated for o in report.outcomes if o.period.name == "daily")
            table.add_row(
                f"{(START + timedelta(days=day)).date():%a %b %d}",
                "yes" if text is not None else "",
                f"{now:%b %d %H:%M}",
                f"{inputs} input{'s' if inputs != 1 else ''}" if written["daily"] else "",
                *(str(written[period] or "") for period in ("weekly", "monthly")),
                str(len(report.compacted) or ""),
            )
        console.print(table)
        async with memory.backend.session() as conn:
            await _print_rollups(conn, console)
            await _rerun(conn, console, clock.now, days, model, config)
    return totals


async def _print_rollups(conn: Any, console: Console) -> None:
    for period in ("weekly", "monthly"):
        notes = sorted(
            await list_notes(conn, period, tenant_id=TENANT, user_id=USER, limit=1000),
            key=lambda note: note["period_start"],
        )
        console.rule(f"{len(notes)} {period} rollup{'s' if len(notes) != 1 else ''} (kept forever)")
        for note in notes:
            console.print(
                f"[bold]{note['period_start']:%a %b %d} .. {note['period_end']:%a %b %d}[/bold]"
                f" ({note['notes_consolidated']} notes consolidated), key insights:"
            )
            for insight in note["key_insights"]:
                console.print(f"  - {insight}", markup=False)


async def _rerun(conn: Any, console: Console, now: datetime, days: int, model: Any, config: MemorySettings) -> None:
    """The last night again, and the night of a rollup's day again: every note exists, nothing is written."""
    before = await _snapshot(conn)
    again = await run_nightly(conn, TENANT, USER, now, run=ConsolidationRun(model, config))
    first = START.date()
    covered = next(
        (first + timedelta(days=d) for d in reversed(range(days)) if rollups_due_after(first + timedelta(days=d))),
        first,
    )
    periods = [Period("daily", covered, covered), *rollups_due_after(covered)]
    statuses = [
        (await consolidate_period(conn, TENANT, USER, period, now, run=ConsolidationRun(model, config))).status
        for period in periods
    ]
    unchanged = await _snapshot(conn) == before
    console.rule("Re-running a day")
    console.print(f"the night of {now:%b %d} again: {len(again.days)} days to cover")
    names = ", ".join(f"{p.name} {p.start:%b %d}: {s}" for p, s in zip(periods, statuses, strict=True))
    console.print(f"the night after {covered:%b %d} again: {names}")
    console.print(f"notes unchanged: {'yes' if unchanged else 'NO'}")


def run_month_demo(days: int = 35) -> dict[str, int]:
    """Simulate `days` days and print what consolidation wrote; the totals (daily, weekly, monthly, compacted)."""
    import asyncio

    console = Console()
    console.rule(f"memory_agent consolidation demo: {days} simulated days")
    console.print("models     : offline summarizer and consolidator (deterministic, no network)")
    console.print("clock      : manual, from Mon Sep 01 2025 (UTC); SQL gets its time as a parameter")
    totals = asyncio.run(_simulate(days, console))
    console.rule("Totals")
    console.print(
        f"daily notes: {totals['daily']}, compacted: {totals['compacted']}, weekly rollups: {totals['weekly']}, "
        f"monthly rollups: {totals['monthly']}"
    )
    console.print(
        "compacted: a daily note older than MEMORY_AGENT_RETAIN_DAYS keeps only its consolidated text (its raw "
        "material is dropped); the rollups are kept whole."
    )
    console.print(f"`memory-agent summaries --period weekly --tenant {TENANT}` lists them again.")
    return totals
