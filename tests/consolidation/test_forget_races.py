"""Forgetting wins its races against background writers: a note, a batch summary or a cluster summary whose model
call was answered after forget_user committed is not written; two runs of one rollup make one model call per note."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from langchain_core.messages import BaseMessage
from langchain_core.outputs import ChatResult
from pydantic import PrivateAttr

from memory_agent.consolidation import ConsolidationRun, Period, consolidate_period, run_batch_summaries, run_nightly
from memory_agent.llm import OfflineConsolidationModel
from memory_agent.long_term import (
    Cluster,
    ClusterSummaries,
    ItemOrigin,
    ItemScope,
    forget_item,
    forget_user,
    refresh_cluster,
    remember,
)
from memory_agent.schemas.keys import UserKey
from memory_agent.settings import MemorySettings
from tests.conftest import query
from tests.consolidation.conftest import CountingModel, day, write_day
from tests.long_term.conftest import items
from tests.long_term.test_forget import tables_holding

CONFIG = MemorySettings(consolidation_enabled=True)


class SlowCountingModel(CountingModel):
    """Counts its calls, each taking a moment: two runs of one note overlap in it unless one waits."""

    async def _agenerate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        await asyncio.sleep(0.02)
        return await super()._agenerate(messages, *args, **kwargs)


class HeldModel(OfflineConsolidationModel):
    """The offline consolidator, answering only once the test lets it (after it has run a forget)."""

    _asked: asyncio.Event = PrivateAttr(default_factory=asyncio.Event)
    _answer: asyncio.Event = PrivateAttr(default_factory=asyncio.Event)

    async def _agenerate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        self._asked.set()
        await self._answer.wait()
        return self._generate(messages, *args, **kwargs)


async def write_secret(conn: Any, canary: str, n: int, user: str = "ana") -> None:
    await remember(
        conn,
        scope=ItemScope(tenant_id="acme", user_id=user),
        source=ItemOrigin(conversation_id=None, memory_id=None),
        items=items(facts=[("allergies", f"The user is allergic to {canary} {n}", {"single_valued": False})]),
        now=day(n, 12),
    )


async def answered_after(forget: Any, job: Any, model: HeldModel) -> Any:
    """Run `job` until its model call waits, run `forget` (committed), then let the model answer."""
    running = asyncio.ensure_future(job)
    await asyncio.wait_for(model._asked.wait(), 30)
    await forget
    model._answer.set()
    return await asyncio.wait_for(running, 30)


async def test_a_daily_note_answered_after_forget_user_is_not_written(conn, connect, database_url):
    canary = f"zq{uuid.uuid4().hex[:10]}canary"
    await write_secret(conn, canary, 0)
    model = HeldModel()
    report = await answered_after(
        forget_user(await connect(), UserKey("acme", "ana")),
        run_nightly(conn, "acme", "ana", day(1, 6), run=ConsolidationRun(model, CONFIG)),
        model,
    )
    assert report.stopped == "forgotten" and [o.status for o in report.outcomes] == ["forgotten"]
    assert tables_holding(database_url, canary) == []
    assert query(database_url, "SELECT count(*) FROM consolidation_notes") == [(0,)]
    # No row names the user: no schedule, and the call is in the ledger under no user.
    assert query(database_url, "SELECT count(*) FROM consolidation_schedules") == [(0,)]
    assert query(database_url, "SELECT user_id, purpose FROM llm_calls") == [("", "consolidation")]


async def test_a_run_in_flight_when_forget_item_drops_notes_writes_nothing_more(conn, connect, database_url):
    canary = f"zq{uuid.uuid4().hex[:10]}canary"
    for n in range(6):
        await write_day(conn, "ana", n)
    await write_secret(conn, canary, 2)
    await run_nightly(
        conn, "acme", "ana", day(5, 6), run=ConsolidationRun(CountingModel(), CONFIG)
    )  # dailies of May 31..June 4
    (item_id,) = query(database_url, "SELECT item_id FROM items WHERE content LIKE %s", [f"%{canary}%"])[0]
    model = HeldModel()
    report = await answered_after(
        forget_item(await connect(), UserKey("acme", "ana"), item_id),
        run_nightly(conn, "acme", "ana", day(6, 6), run=ConsolidationRun(model, CONFIG)),
        model,
    )
    # The forget dropped the daily holding it and moved the schedule back: the run writes nothing more.
    assert report.stopped == "forgotten"
    assert tables_holding(database_url, canary) == []
    assert query(database_url, "SELECT count(*) FROM consolidation_notes WHERE period = 'weekly'") == [(0,)]
    # The next run makes the dropped daily and the weekly again, without it.
    again = await run_nightly(conn, "acme", "ana", day(6, 7), run=ConsolidationRun(CountingModel(), CONFIG))
    assert again.stopped is None and again.written("weekly") == 1
    assert tables_holding(database_url, canary) == []


async def test_a_batch_summary_answered_after_forget_user_is_not_written(conn, connect, database_url):
    canary = f"zq{uuid.uuid4().hex[:10]}canary"
    for n in range(3):
        await write_secret(conn, canary, n)
    model = HeldModel()
    config = MemorySettings(consolidation_enabled=False, batch_summaries_enabled=True, min_age_days=1)
    report = await answered_after(
        forget_user(await connect(), UserKey("acme", "ana")),
        run_batch_summaries(conn, "acme", "ana", day(8), run=ConsolidationRun(model, config)),
        model,
    )
    assert report.stopped == "forgotten" and report.summaries == []
    assert tables_holding(database_url, canary) == []
    assert query(database_url, "SELECT count(*) FROM consolidation_schedules") == [(0,)]


async def test_a_first_cluster_summary_answered_after_forget_user_is_not_written(conn, connect, database_url):
    canary = f"zq{uuid.uuid4().hex[:10]}canary"
    for n in range(3):
        await write_secret(conn, canary, n)
    asked, answer = asyncio.Event(), asyncio.Event()

    async def held_summarizer(texts: list[str]) -> str:
        asked.set()
        await answer.wait()
        return "The user is allergic to " + ", ".join(t.rsplit(" ", 2)[-2] + " " + t.rsplit(" ", 1)[-1] for t in texts)

    cluster = Cluster("acme", "ana", "", "", "fact", "allergies")
    running = asyncio.ensure_future(refresh_cluster(conn, cluster, ClusterSummaries(held_summarizer), now=day(4)))
    await asyncio.wait_for(asked.wait(), 30)
    await forget_user(await connect(), UserKey("acme", "ana"))
    answer.set()
    outcome = await asyncio.wait_for(running, 30)
    assert outcome.outcome == "failed" and outcome.reason == "members being forgotten"
    assert query(database_url, "SELECT count(*) FROM items") == [(0,)]
    assert tables_holding(database_url, canary) == []


async def test_two_runs_of_one_rollup_make_one_model_call_per_note(conn, connect, database_url):
    for n in range(14):
        await write_day(conn, "ana", n)
    model = SlowCountingModel()

    async def run() -> Any:
        return await run_nightly(await connect(), "acme", "ana", day(15, 6), run=ConsolidationRun(model, CONFIG))

    first, second = await asyncio.gather(run(), run())
    # 14 dailies (June 1..14; June 15 has nothing), the weeklies of May 31 and June 7: each made once, one call each.
    assert query(database_url, "SELECT count(*) FROM consolidation_notes") == [(16,)]
    assert len(model.calls) == 16
    assert first.written("daily") + second.written("daily") == 14


async def test_two_manual_runs_of_one_period_make_one_call(conn, connect):
    await write_day(conn, "ana", 0)
    model = SlowCountingModel()
    period = Period("daily", day(0).date(), day(0).date())

    async def run() -> Any:
        return await consolidate_period(
            await connect(), "acme", "ana", period, day(1), run=ConsolidationRun(model, CONFIG)
        )

    outcomes = await asyncio.gather(run(), run())
    assert sorted(o.status for o in outcomes) == ["complete", "exists"] and len(model.calls) == 1
