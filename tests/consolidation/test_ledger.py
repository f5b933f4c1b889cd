"""The cost ledger: every LLM call memory_agent makes is a row of llm_calls with its tokens and its cost from the
price table (an unknown model costs 0, its tokens still counted); the app model's answers too; and a tenant over
its monthly ceiling gets recall without summaries, visibly."""

from __future__ import annotations

import dataclasses
import logging
from decimal import Decimal
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.graph import START, MessagesState, StateGraph

from memory_agent import llm, with_memory
from memory_agent.consolidation import ConsolidationRun, ConsolidationRunner, run_batch_summaries
from memory_agent.llm.offline import OfflineSummaryModel
from memory_agent.long_term import (
    ClusterSummaries,
    ItemOrigin,
    ItemScope,
    ledger,
    offline_cluster_summarizer,
    refresh_clusters,
    remember,
    touched_clusters,
)
from memory_agent.long_term.recall import RecallSettings
from memory_agent.long_term.recall.round_start import round_recall
from memory_agent.schemas.keys import ConversationKey
from memory_agent.service.backend import MemoryBackend
from memory_agent.settings import MemorySettings, ModelPrice
from memory_agent.summarize.agent import MemoryAgent
from tests.conftest import query
from tests.consolidation.conftest import CountingModel, day, write_day
from tests.long_term.conftest import at, items

CALLS = "SELECT purpose, model, input_tokens, output_tokens, cost, priced FROM llm_calls ORDER BY call_id"
PRICES = {"offline-consolidator": ModelPrice(input=2.0, output=8.0)}


def cost_of(input_tokens: int, output_tokens: int, price: ModelPrice) -> Decimal:
    return (Decimal(input_tokens) * Decimal(str(price.input)) + Decimal(output_tokens) * Decimal(str(price.output))) / (
        Decimal(1_000_000)
    )


async def test_every_consolidation_call_is_recorded_with_its_cost(conn, pool, database_url):
    model = CountingModel()
    for n in range(7):
        await write_day(conn, "alice", n)
    runner = ConsolidationRunner(pool, model, MemorySettings(consolidation_enabled=True, llm_prices=PRICES))
    await runner.run_due(day(7, 5))  # 7 dailies and the weekly of June 7
    rows = query(database_url, CALLS)
    assert len(rows) == len(model.calls) == 8
    for purpose, name, input_tokens, output_tokens, cost, priced in rows:
        assert (purpose, name, priced) == ("consolidation", "offline-consolidator", True)
        assert input_tokens > 50 and output_tokens > 5
        assert cost == cost_of(input_tokens, output_tokens, PRICES[name]).quantize(Decimal("1e-8"))
    total = sum(row[4] for row in rows)
    assert query(database_url, "SELECT tenant_id, month, cost, calls FROM tenant_monthly_spend") == [
        ("acme", day(0).date(), total, 8)
    ]
    assert await ledger.tenant_spend(conn, "acme", day(20)) == total
    assert await ledger.tenant_spend(conn, "acme", day(40)) == 0  # July


async def test_a_model_missing_from_the_price_table_costs_nothing_but_its_tokens_count(conn, database_url):
    for n in range(3):
        await write_day(conn, "alice", n)
    config = MemorySettings(consolidation_enabled=True, min_age_days=0, max_memories_per_batch=50)  # no price table
    report = await run_batch_summaries(conn, "acme", "alice", day(5), run=ConsolidationRun(CountingModel(), config))
    assert len(report.summaries) == 1
    ((purpose, name, input_tokens, output_tokens, cost, priced),) = query(database_url, CALLS)
    assert (purpose, name, cost, priced) == ("batch_summary", "offline-consolidator", 0, False)
    assert input_tokens > 0 and output_tokens > 0
    assert query(database_url, "SELECT cost, calls FROM tenant_monthly_spend") == [(0, 1)]


class RetriedSummaryModel(OfflineSummaryModel):
    """The offline summarizer whose first answer of every summary is unusable: the agent asks once more."""

    answered: int = 0

    async def _agenerate(self, messages, *args: Any, **kwargs: Any):
        self.answered += 1
        result = await super()._agenerate(messages, *args, **kwargs)
        if self.answered % 2 == 1:
            result.generations[0].message.tool_calls = []
            result.generations[0].message.content = "not a summary"
        return result


async def test_the_summarizers_calls_and_its_retries_are_recorded(open_memory, database_url):
    model = RetriedSummaryModel()
    prices = {"offline-extractive-summarizer": {"input": 1.0, "output": 1.0}}
    memory = await open_memory(model=model, llm_prices=prices, memory_summarize_after_seq=3)
    app = with_memory(_EchoGraph().graph, memory)
    for n in range(4):
        await app.ainvoke({"messages": [HumanMessage(f"message {n}")]}, {"configurable": {"thread_id": "t"}})
    assert await memory.drain(timeout=10)
    completed = query(database_url, "SELECT count(*) FROM memory WHERE status = 'completed'")[0][0]
    assert completed >= 1
    rows = query(database_url, "SELECT purpose, model, priced, cost > 0 FROM llm_calls WHERE purpose <> 'app'")
    assert len(rows) == model.answered == 2 * completed  # each summary: the unusable answer and the retry
    assert set(rows) == {("conversation_summary", "offline-extractive-summarizer", True, True)}


class _EchoGraph:
    """A chat graph whose answers carry their usage and model name, as a provider's do."""

    def __init__(self, usage: bool = False) -> None:
        def respond(state: MessagesState) -> dict[str, Any]:
            if not usage:
                return {"messages": [AIMessage("ok")]}
            answer = AIMessage(
                "ok",
                usage_metadata={"input_tokens": 1200, "output_tokens": 300, "total_tokens": 1500},
                response_metadata={"model_name": "app-model-1"},
            )
            return {"messages": [answer]}

        builder = StateGraph(MessagesState)
        builder.add_node("respond", respond)
        builder.add_edge(START, "respond")
        self.graph = builder.compile()


async def test_the_app_models_answers_are_recorded_at_round_end(open_memory, database_url):
    prices = {"app-model-1": {"input": 10.0, "output": 30.0}}
    memory = await open_memory(llm_prices=prices)
    app = with_memory(_EchoGraph(usage=True).graph, memory)
    config = {"configurable": {"thread_id": "t", "user_id": "ana", "tenant_id": "acme"}}
    for n in range(2):
        await app.ainvoke({"messages": [HumanMessage(f"question {n}")]}, config)
    rows = query(
        database_url,
        "SELECT tenant_id, user_id, purpose, model, input_tokens, output_tokens, cost, priced FROM llm_calls"
        " WHERE purpose = 'app'",
    )
    expected = cost_of(1200, 300, ModelPrice(input=10.0, output=30.0))
    assert rows == [("acme", "ana", "app", "app-model-1", 1200, 300, expected, True)] * 2
    # The app's calls are not memory_agent's: they count in the report, not toward the tenant's ceiling.
    assert query(database_url, "SELECT count(*) FROM tenant_monthly_spend")[0][0] == 0


async def test_without_prices_or_app_model_no_app_row_is_written(open_memory, database_url):
    memory = await open_memory()
    app = with_memory(_EchoGraph(usage=True).graph, memory)
    await app.ainvoke({"messages": [HumanMessage("question")]}, {"configurable": {"thread_id": "t"}})
    assert query(database_url, "SELECT count(*) FROM llm_calls WHERE purpose = 'app'")[0][0] == 0


async def remember_three_facts(conn: Any, key: str, now: Any) -> None:
    """Three facts of ana (tenant acme) under `key`, none single-valued: one pending cluster."""
    facts = [(key, f"The user {key} fact number {n}", {"single_valued": False}) for n in range(3)]
    await remember(
        conn,
        scope=ItemScope(tenant_id="acme", user_id="ana"),
        source=ItemOrigin(conversation_id=None, memory_id=None),
        items=items(facts=facts),
        now=now,
    )


async def priced_cluster_runner(open_memory: Any, made: list[list[str]], **settings: Any) -> Any:
    """The summary runner of a long-term service whose cluster summaries are offline ones noted as calls of a
    priced model (100 tokens in, 20 out); the members of each summary made are appended to `made`."""

    async def summarize(members: list[str]) -> str:
        made.append(members)
        llm.note_call(llm.LLMCall("cluster_summary", "cluster-model", 100, 20))
        return await offline_cluster_summarizer(members)

    memory = await open_memory(long_term=True, llm_prices={"cluster-model": {"input": 1, "output": 1}}, **settings)
    runner = memory._lifecycle.parts.runner
    runner.follow_ups.cluster_summarizer = summarize
    return runner


async def test_cluster_summary_calls_are_noted_and_the_safety_net_obeys_the_guards(open_memory, conn, database_url):
    agent = MemoryAgent(OfflineSummaryModel())
    with llm.collecting() as log:
        await agent.summarize_cluster(["The user is allergic to peanuts", "The user is allergic to shellfish"])
    assert [(c.purpose, c.model) for c in log.calls] == [("cluster_summary", "offline-extractive-summarizer")]
    assert log.calls[0].input_tokens > 0

    runner = await priced_cluster_runner(open_memory, [], max_summary_jobs_per_run=2)
    for key in ("allergy", "pet", "city"):
        await remember_three_facts(conn, key, at(1))
    assert await runner.follow_ups.refresh_pending() == 2  # three pending clusters of one user+project: two this run
    assert (
        query(database_url, "SELECT purpose, model, cost FROM llm_calls")
        == [("cluster_summary", "cluster-model", Decimal("0.00012"))] * 2
    )
    assert await runner.follow_ups.refresh_pending() == 1
    # Over the ceiling, the safety net writes no summary.
    guards = runner.follow_ups.options.guards.model_copy(update={"monthly_cost_ceiling": 0.0})
    runner.follow_ups.options = dataclasses.replace(runner.follow_ups.options, guards=guards)
    await remember_three_facts(conn, "food", at(2))
    assert await runner.follow_ups.refresh_pending() == 0


async def test_calls_in_flight_count_against_the_ceiling_on_the_cluster_path(open_memory, conn, database_url):
    made: list[list[str]] = []
    runner = await priced_cluster_runner(open_memory, made, monthly_cost_ceiling=1.0)
    await remember_three_facts(conn, "allergy", at(1))
    # A call of the tenant in flight elsewhere holds the whole ceiling: nothing is spent yet, and no call starts.
    held = await ledger.reserve(conn, "acme", 1.0, Decimal("5"), runner.clock())
    assert held is not None
    assert await runner.follow_ups.refresh_pending() == 0 and made == []
    await ledger.release(conn, held)
    assert await runner.follow_ups.refresh_pending() == 1 and len(made) == 1
    assert query(database_url, "SELECT count(*) FROM budget_reservations") == [(0,)]  # settled with its call
    assert query(database_url, "SELECT purpose, cost FROM llm_calls") == [("cluster_summary", Decimal("0.00012"))]


async def _summarized_cluster(conn) -> None:
    foods = ("peanuts", "shellfish", "penicillin")
    facts = [("allergies", f"The user is allergic to {food}", {"single_valued": False}) for food in foods]
    outcomes = await remember(
        conn,
        scope=ItemScope(tenant_id="default", user_id="ana"),
        source=ItemOrigin(conversation_id=None, memory_id=None),
        items=items(facts=facts),
        now=at(1),
    )
    await refresh_clusters(conn, touched_clusters(outcomes), ClusterSummaries(offline_cluster_summarizer), now=at(1))


async def test_over_the_ceiling_recall_returns_raw_items_visibly(pool, conn, caplog):
    await _summarized_cluster(conn)
    backend = MemoryBackend(pool, "memory_agent")
    key = ConversationKey("c-1", "ana", "default")
    question = "What is the user allergic to?"
    normal = await round_recall(backend, key, question, RecallSettings())
    assert normal.result is not None and normal.status is None
    assert any(hit.kind == "summary" for hit in normal.result.results)
    with caplog.at_level(logging.WARNING, logger="memory_agent"):
        fallback = await round_recall(backend, key, question, RecallSettings(), cost_ceiling=0.0)
    assert fallback.result is not None and fallback.status == "over_budget"
    kinds = {hit.kind for hit in fallback.result.results}
    assert "summary" not in kinds and "item" in kinds
    assert fallback.metrics(question)["recall_status"] == "over_budget"
    assert "tenant 'default' spent 0.0000 of its monthly cost ceiling 0.0: recall returns raw items" in caplog.text


async def test_a_round_over_the_ceiling_records_its_recall_status(open_memory, conn, database_url):
    await _summarized_cluster(conn)
    memory = await open_memory(monthly_cost_ceiling=0.0)
    app = with_memory(_EchoGraph().graph, memory)
    config = {"configurable": {"thread_id": "t", "user_id": "ana"}}
    await app.ainvoke({"messages": [HumanMessage("What is the user allergic to?")]}, config)
    rows = query(database_url, "SELECT recall_status, recall_path, context_items FROM round_metrics")
    assert rows[0][0] == "over_budget" and rows[0][2] >= 1
    unlimited = await open_memory()
    await with_memory(_EchoGraph().graph, unlimited).ainvoke(
        {"messages": [HumanMessage("What is the user allergic to?")]}, config
    )
    assert query(database_url, "SELECT recall_status FROM round_metrics ORDER BY id")[1] == (None,)
