"""OpenTelemetry spans of memory work, recorded with the SDK's in-memory exporter while a test switches it on (a
sampler that drops every span otherwise, so the rest of the suite runs as without an SDK)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import Decision, Sampler, SamplingResult

from memory_agent import tracing, with_memory
from memory_agent.llm.offline import OfflineSummaryModel
from memory_agent.tracing import memory_span, record
from tests.support import EchoChat


class Switch(Sampler):
    on = False

    def should_sample(self, parent, trace_id, name, kind=None, attributes=None, *args: Any, **kwargs: Any):
        # The span's first attributes are the ones the sampler passes on.
        return SamplingResult(Decision.RECORD_AND_SAMPLE if self.on else Decision.DROP, attributes)

    def get_description(self) -> str:
        return "on while a tracing test runs"


SWITCH = Switch()
EXPORTER = InMemorySpanExporter()


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    current = trace.get_tracer_provider()
    if not isinstance(current, TracerProvider):
        provider = TracerProvider(sampler=SWITCH)
        provider.add_span_processor(SimpleSpanProcessor(EXPORTER))
        trace.set_tracer_provider(provider)
    EXPORTER.clear()
    SWITCH.on = True
    try:
        yield EXPORTER
    finally:
        SWITCH.on = False
        EXPORTER.clear()
        tracing.configure("hashed")


def _named(finished: list[ReadableSpan], name: str) -> list[ReadableSpan]:
    return [span for span in finished if span.name == name]


def hashed(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()[:16]


async def test_a_round_and_its_summary_are_traced_with_hashed_ids(open_memory, spans):
    memory = await open_memory(model=OfflineSummaryModel())
    app = with_memory(EchoChat().graph, memory)
    config = {"configurable": {"thread_id": "trip-ana@example.com", "user_id": "ana@example.com"}}
    from langchain_core.messages import HumanMessage

    for n in range(1, 5):
        await app.ainvoke({"messages": [HumanMessage(f"I plan a trip to Lisbon, note {n}")]}, config)
    assert await memory.drain(timeout=10)
    finished = list(spans.get_finished_spans())

    starts, ends = _named(finished, "memory_agent.round_start"), _named(finished, "memory_agent.round_end")
    assert len(starts) == len(ends) == 4
    start = starts[-1].attributes
    assert start["gen_ai.operation.name"] == "search_memory" and start["gen_ai.provider.name"] == "memory_agent"
    assert start["gen_ai.conversation.id"] == hashed("trip-ana@example.com")
    assert start["memory_agent.user.id"] == hashed("ana@example.com")
    assert start["memory_agent.tenant.id"] == hashed("default")
    assert start["memory_agent.context.tokens"] > 0
    # Round 2 starts on round 1's messages, before any summary (the first comes after round 3): its gap holds them.
    # (Round 4's gap is 0 when round 3's summary finished before it started, as it may on a fast machine.)
    assert starts[1].attributes["memory_agent.gap.size"] == 2
    triggered = [span for span in ends if span.attributes["memory_agent.summary.trigger"] == "started"]
    assert triggered and ends[0].attributes["gen_ai.memory.record.count"] == 2  # the user's turn and the reply

    summaries = _named(finished, "memory_agent.summary")
    assert summaries and summaries[0].attributes["memory_agent.summary.status"] == "completed"
    summary = summaries[0]
    # Its own trace, linked to the round end that triggered it.
    assert [link.context.span_id for link in summary.links] == [triggered[0].context.span_id]
    assert summary.context.trace_id != triggered[0].context.trace_id
    assert summary.attributes["gen_ai.operation.name"] == "update_memory"
    assert summary.attributes["gen_ai.usage.input_tokens"] > 0 and summary.attributes["gen_ai.request.model"]
    assert (
        summary.attributes["memory_agent.window.end_sequence"]
        >= summary.attributes["memory_agent.window.start_sequence"]
    )

    # Recall ran at round start, inside the round's span; no text of the conversation is on any span.
    recalls = _named(finished, "memory_agent.recall")
    assert recalls and all(r.parent is not None for r in recalls)
    every_value = json.dumps([dict(span.attributes) for span in finished], default=str)
    for secret in ("Lisbon", "ana@example.com", "trip-ana"):
        assert secret not in every_value


@pytest.mark.parametrize(("mode", "shown"), [("plain", "ana"), ("omitted", None)])
async def test_the_identity_setting_decides_how_ids_appear(open_memory, spans, mode, shown):
    memory = await open_memory(model=OfflineSummaryModel(), trace_identity=mode)
    await memory.long_term.recall("ana", "anything at all")
    (span,) = _named(list(spans.get_finished_spans()), "memory_agent.recall")
    assert span.attributes.get("memory_agent.user.id") == shown
    assert span.attributes["gen_ai.operation.name"] == "search_memory"
    assert span.attributes["gen_ai.memory.record.count"] == 0


async def test_a_failure_is_recorded_on_the_span(spans):
    with pytest.raises(RuntimeError), memory_span("memory_agent.recall", "search_memory", user_id="u"):
        raise RuntimeError("the database is away")
    (span,) = spans.get_finished_spans()
    assert span.status.status_code == trace.StatusCode.ERROR
    assert span.events[0].name == "exception"


async def test_a_failed_round_carries_its_error_type_but_not_its_message(open_memory, spans):
    from langchain_core.messages import HumanMessage

    from memory_agent.errors import ConversationOwnerError

    memory = await open_memory(model=OfflineSummaryModel())
    app = with_memory(EchoChat().graph, memory)
    thread = {"thread_id": "trip-ana@example.com"}
    await app.ainvoke(
        {"messages": [HumanMessage("Lisbon")]}, {"configurable": {**thread, "user_id": "ana@example.com"}}
    )
    with pytest.raises(ConversationOwnerError, match="bob@x.org"):  # the message names both ids
        await app.ainvoke({"messages": [HumanMessage("Porto")]}, {"configurable": {**thread, "user_id": "bob@x.org"}})
    finished = list(spans.get_finished_spans())
    shown = json.dumps(
        [[dict(s.attributes), s.status.description, [dict(e.attributes) for e in s.events]] for s in finished]
    )
    for secret in ("Lisbon", "Porto", "ana@example.com", "bob@x.org", "trip-ana"):
        assert secret not in shown
    # The round's span, among what the process recorded meanwhile (background work of earlier tests may end now).
    (failed,) = [
        span
        for span in finished
        if span.status.status_code == trace.StatusCode.ERROR
        and span.attributes.get("error.type") == "ConversationOwnerError"
    ]
    assert [event.name for event in failed.events] == ["exception"]


def test_without_an_sdk_spans_record_nothing():
    # The API's default: a non-recording span, on which record() does nothing (and costs nothing).
    span = trace.NonRecordingSpan(trace.INVALID_SPAN_CONTEXT)
    record(span, **{"memory_agent.gap.size": 3})
    assert not span.is_recording()


def test_a_bad_identity_setting_is_named():
    from memory_agent import MemorySettings
    from memory_agent.errors import ConfigurationError

    with pytest.raises(ConfigurationError, match="MEMORY_AGENT_TRACE_IDENTITY"):
        MemorySettings(trace_identity="sometimes")


async def test_consolidation_is_traced(open_memory, spans):
    from datetime import UTC, datetime

    from memory_agent.consolidation import ConsolidationRun, consolidate_period, latest_period
    from memory_agent.llm import OfflineConsolidationModel

    memory = await open_memory(model=OfflineSummaryModel())
    now = datetime.now(UTC)

    async def run() -> Any:
        async with memory.backend.session() as conn:
            run = ConsolidationRun(OfflineConsolidationModel(), memory.settings)
            return await consolidate_period(conn, "default", "ana", latest_period("daily", now), now, run=run)

    outcome = await memory.loop.arun(run())
    (span,) = _named(list(spans.get_finished_spans()), "memory_agent.consolidation")
    assert span.attributes["memory_agent.consolidation.status"] == outcome.status == "empty"
    assert span.attributes["memory_agent.period"] == "daily" and span.attributes["gen_ai.request.model"]
