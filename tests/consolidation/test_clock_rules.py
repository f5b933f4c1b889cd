"""The service's clock reaches every rule that reads time: a summary's finished_at (which day's material its
memory is for consolidation) and the month the round's recall checks the cost ceiling against."""

from __future__ import annotations

from langchain_core.messages import HumanMessage

from memory_agent import llm, with_memory
from memory_agent.consolidation import ConsolidationRun, ManualClock, run_nightly
from memory_agent.llm.offline import OfflineSummaryModel
from memory_agent.long_term import ledger
from memory_agent.settings import MemorySettings, ModelPrice
from tests.conftest import query
from tests.consolidation.conftest import CountingModel, day
from tests.long_term.test_summary_job import open_service  # noqa: F401 (fixture)
from tests.support import EchoChat


async def test_a_days_daily_note_holds_that_days_conversation_memory(open_service, database_url, conn):
    clock = ManualClock(day(0, 9))
    memory = await open_service(OfflineSummaryModel(), clock=clock)
    app = with_memory(EchoChat().graph, memory)
    for text in ("I live in Lisbon.", "I like jazz.", "I work at Acme."):
        await app.ainvoke({"messages": [HumanMessage(text)]}, {"configurable": {"thread_id": "t", "user_id": "ana"}})
    assert await memory.drain(timeout=10)
    assert query(database_url, "SELECT status, finished_at FROM memory") == [("completed", day(0, 9))]
    report = await run_nightly(
        conn,
        "default",
        "ana",
        day(1, 6),
        run=ConsolidationRun(CountingModel(), MemorySettings(consolidation_enabled=True)),
    )
    assert [o.status for o in report.outcomes] == ["complete"]
    ((content,),) = query(database_url, "SELECT content FROM consolidation_notes")
    (memory_text,) = query(database_url, "SELECT memory_text FROM memory")[0]
    assert " ".join(memory_text.split()) in content


async def test_round_recall_checks_the_ceiling_in_the_clocks_month(open_service, database_url, conn):
    # The tenant spent over its ceiling in June 2026 (the clock's month), nothing in the wall clock's.
    price = {"m": ModelPrice(input=1000.0, output=1000.0)}
    await ledger.record_calls(
        conn, "default", "ana", [llm.LLMCall("consolidation", "m", 1000, 1000)], now=day(0), prices=price
    )
    memory = await open_service(OfflineSummaryModel(), clock=ManualClock(day(2, 9)), monthly_cost_ceiling=1.0)
    await with_memory(EchoChat().graph, memory).ainvoke(
        {"messages": [HumanMessage("Where do I live?")]}, {"configurable": {"thread_id": "t", "user_id": "ana"}}
    )
    assert query(database_url, "SELECT recall_status FROM round_metrics") == [("over_budget",)]
