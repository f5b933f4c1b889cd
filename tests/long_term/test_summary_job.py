"""The summary job writes the long-term tier: every completed version's items, in the transaction that completes
it, never in the user's round; then the clusters it touched are refreshed, or left to the periodic safety net."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from datetime import datetime
from typing import Any

import pytest
from langchain_core.messages import HumanMessage

from memory_agent import MemorySettings, with_memory
from memory_agent.jobs.base import SummaryJobs
from memory_agent.jobs.procrastinate_executor import REFRESH_CLUSTERS_TASK, build_app
from memory_agent.llm.offline import OfflineSummaryModel
from memory_agent.long_term import ItemScope, item_history
from memory_agent.service._wiring import worker_options
from tests.conftest import execute, memory_factory, query
from tests.long_term.conftest import at
from tests.support import EchoChat, GatedSummaryModel, ScriptedSummaryModel


class Clock:
    """The service's clock, moved by the test."""

    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
async def open_service(database_url: str) -> AsyncIterator[Callable[..., Any]]:
    """open_service(model, clock=..., **settings) -> an open MemoryService whose long-term times are `clock`'s."""
    async with memory_factory(database_url=database_url, drain_timeout_s=5) as factory:
        yield factory


async def say(app: Any, thread: str, texts: list[str], user: str = "ana", tenant: str | None = None) -> None:
    for text in texts:
        configurable = {"thread_id": thread, "user_id": user, **({"tenant_id": tenant} if tenant else {})}
        await app.ainvoke({"messages": [HumanMessage(text)]}, {"configurable": configurable})


async def test_an_allergy_stated_in_round_1_is_an_item_after_the_first_summary(open_service, database_url):
    model = GatedSummaryModel()  # the summary waits: the rounds are over before anything long-term exists
    memory = await open_service(model, clock=Clock(at(1)))
    app = with_memory(EchoChat().graph, memory)
    await say(app, "dinner", ["I'm allergic to peanuts.", "What should I cook tonight?", "Thanks."])
    assert query(database_url, "SELECT count(*) FROM items") == [(0,)]  # never written in the user's round

    model.release()
    assert await memory.drain(timeout=10)
    ((memory_id, stored),) = query(database_url, "SELECT memory_id, items FROM memory WHERE status = 'completed'")
    assert [(i["key"], i["content"], i["source_sequences"]) for i in stored["facts"]] == [
        ("allergies", "The user is allergic to peanuts", [0])
    ]
    (item,) = await memory.long_term.list_items("ana")
    assert (item.item_type, item.key, item.content) == ("fact", "allergies", "The user is allergic to peanuts")
    assert item.valid_from == at(1) and item.is_current
    assert [(s.conversation_id, s.memory_id, s.sequence_number) for s in item.sources] == [("dinner", memory_id, 0)]


async def test_a_changed_home_city_supersedes_the_old_one(open_service):
    clock = Clock(at(1))
    memory = await open_service(OfflineSummaryModel(), clock=clock)
    app = with_memory(EchoChat().graph, memory)
    await say(app, "move", ["I live in Lisbon.", "The weather is nice.", "Bye for now."])
    assert await memory.drain(timeout=10)
    clock.now = at(30)
    await say(app, "move", ["I moved to Porto last week."])
    assert await memory.drain(timeout=10)

    assert [i.content for i in await memory.long_term.list_items("ana")] == ["The user lives in Porto"]
    assert [i.content for i in await memory.long_term.list_items("ana", as_of=at(10))] == ["The user lives in Lisbon"]
    async with memory.backend.session() as conn:
        history = await item_history(conn, ItemScope("default", "ana"), "fact", "home_city")
    assert [(h.content, h.valid_from, h.valid_to) for h in history] == [
        ("The user lives in Lisbon", at(1), at(30)),
        ("The user lives in Porto", at(30), None),
    ]


async def test_the_same_fact_in_two_conversations_is_one_current_row_with_two_sources(open_service, database_url):
    memory = await open_service(OfflineSummaryModel(), clock=Clock(at(1)))
    app = with_memory(EchoChat().graph, memory)
    for thread in ("monday", "friday"):
        await say(app, thread, ["I'm allergic to peanuts.", "Any snack ideas?", "Thanks!"])
        assert await memory.drain(timeout=10)
    (item,) = await memory.long_term.list_items("ana")
    assert item.content == "The user is allergic to peanuts"
    assert sorted(s.conversation_id for s in item.sources) == ["friday", "monday"]
    assert query(database_url, "SELECT count(*) FROM items") == [(1,)]


async def test_a_failing_long_term_write_leaves_the_version_not_completed(open_service, database_url):
    # The long-term write fails inside the job (the database refuses items): the completion is rolled back with
    # it and the version recorded failed; the next version covers the same window and writes the items.
    execute(
        database_url,
        "CREATE FUNCTION refuse_items() RETURNS trigger LANGUAGE plpgsql AS"
        " $$ BEGIN RAISE EXCEPTION 'items refused by the test'; END $$;"
        " CREATE TRIGGER refuse_items BEFORE INSERT ON items FOR EACH ROW EXECUTE FUNCTION refuse_items()",
    )
    memory = await open_service(OfflineSummaryModel(), clock=Clock(at(1)))
    app = with_memory(EchoChat().graph, memory)
    await say(app, "atomic", ["I'm allergic to peanuts.", "Hello.", "Bye."])
    assert await memory.drain(timeout=10)
    ((status, text, stored, error),) = query(database_url, "SELECT status, memory_text, items, error FROM memory")
    assert status == "failed" and stored is None and text == ""
    assert "long-term write failed" in error and "items refused by the test" in error
    assert query(database_url, "SELECT count(*) FROM items UNION ALL SELECT count(*) FROM item_sources") == [
        (0,),
        (0,),
    ]

    execute(database_url, "DROP TRIGGER refuse_items ON items; DROP FUNCTION refuse_items()")
    await say(app, "atomic", ["Still here."])
    assert await memory.drain(timeout=10)
    assert query(database_url, "SELECT status FROM memory ORDER BY memory_id") == [("failed",), ("completed",)]
    assert [i.content for i in await memory.long_term.list_items("ana")] == ["The user is allergic to peanuts"]


async def test_with_long_term_off_versions_keep_their_items_and_nothing_long_term_is_written(
    open_service, database_url
):
    memory = await open_service(OfflineSummaryModel(), long_term=False)
    app = with_memory(EchoChat().graph, memory)
    await say(app, "off", ["I'm allergic to peanuts.", "Hello.", "Bye."])
    assert await memory.drain(timeout=10)
    ((stored,),) = query(database_url, "SELECT items FROM memory WHERE status = 'completed'")
    assert stored["facts"][0]["key"] == "allergies"
    assert query(database_url, "SELECT count(*) FROM items") == [(0,)]


ALLERGIES = ["I'm allergic to peanuts.", "I'm allergic to shellfish.", "I'm allergic to penicillin."]


async def test_the_third_member_makes_a_cluster_summary_through_the_summary_model(open_service):
    model = ScriptedSummaryModel(cluster_text="The user is allergic to peanuts, shellfish and penicillin.")
    memory = await open_service(model, clock=Clock(at(2)))
    app = with_memory(EchoChat().graph, memory)
    await say(app, "allergies", ALLERGIES)
    assert await memory.drain(timeout=10)

    (prompt,) = model.cluster_prompts  # one model call for the one cluster the version touched
    assert all(f"- The user is allergic to {what}" in prompt for what in ("peanuts", "shellfish", "penicillin"))
    summaries = [i for i in await memory.long_term.list_items("ana") if i.is_summary]
    assert [(s.key, s.content, len(s.source_item_ids)) for s in summaries] == [
        ("allergies", "The user is allergic to peanuts, shellfish and penicillin.", 3)
    ]
    assert summaries[0].importance == 0.95 and summaries[0].updated_at is not None


async def test_the_offline_model_makes_offline_cluster_summaries(open_service):
    memory = await open_service(OfflineSummaryModel(), clock=Clock(at(2)))
    app = with_memory(EchoChat().graph, memory)
    await say(app, "allergies", ALLERGIES)
    assert await memory.drain(timeout=10)
    summaries = [i.content for i in await memory.long_term.list_items("ana") if i.is_summary]
    assert summaries == ["The user is allergic to peanuts, penicillin and shellfish"]


async def test_the_periodic_task_refreshes_a_cluster_whose_inline_refresh_failed(open_service):
    model = ScriptedSummaryModel(cluster_failures=1)
    memory = await open_service(model, clock=Clock(at(2)), sweep_interval_s=0.2)
    app = with_memory(EchoChat().graph, memory)
    await say(app, "allergies", ALLERGIES)
    assert await memory.drain(timeout=10)
    for _ in range(100):  # the inline executor's sweep loop: every 0.2 s
        summaries = [i for i in await memory.long_term.list_items("ana") if i.is_summary]
        if summaries:
            break
        await asyncio.sleep(0.1)
    assert [len(s.source_item_ids) for s in summaries] == [3]
    assert len(model.cluster_prompts) == 2  # the failed inline call, then the safety net's


async def test_the_procrastinate_app_runs_the_safety_net_periodically():
    calls: list[str] = []

    async def run_summary(memory_id: int, user_id: str, started=None) -> str:
        return "completed"

    async def sweep() -> list[int]:
        return []

    async def refresh() -> int:
        calls.append("refresh")
        return 0

    app = build_app(SummaryJobs(run_summary, sweep, refresh), worker_options(MemorySettings()))
    periodic = {task.task.name for task in app.periodic_registry.periodic_tasks.values()}
    assert REFRESH_CLUSTERS_TASK in periodic and "memory_agent.sweep" in periodic
    await app.tasks[REFRESH_CLUSTERS_TASK](timestamp=0)
    assert calls == ["refresh"]
