"""What real providers answer besides the happy path, through the real LangChain client: a rate limit with
Retry-After, JSON written in text the way small and reasoning models write it."""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from http.server import BaseHTTPRequestHandler

import httpx
import openai
import pytest
from langchain_core.messages import HumanMessage

from memory_agent import with_memory
from memory_agent.consolidation.model import ConsolidationOutput, call_consolidation_model
from memory_agent.errors import SummarizationError, is_transient
from memory_agent.llm import chat_model_from_setting
from memory_agent.llm.structured import learned_method
from memory_agent.summarize.agent import MemoryAgent, Retries, SequencedMessage
from memory_agent.summarize.failures import retry_after_s
from tests.conftest import query
from tests.local_server import LocalServer
from tests.support import EchoChat

WINDOW = {
    "previous_summary": None,
    "base_end_sequence": None,
    "new_messages": [SequencedMessage(0, HumanMessage("I like green tea"))],
    "window_start_seq": 0,
    "window_end_seq": 0,
}


def agent() -> MemoryAgent:
    return MemoryAgent(chat_model_from_setting("limited-model", variable="MEMORY_AGENT_MEMORY_MODEL"))


async def test_a_rate_limited_provider_is_not_asked_before_its_retry_after(fake_openai):
    """HTTP 429 with Retry-After: the next attempt waits as long (before: 3 calls within the 1 s backoffs), and
    when the wait does not fit in the time the summary has, it fails at once with the provider's error."""
    fake_openai.mode, fake_openai.retry_after = "rate_limited", "0.4"
    started = time.monotonic()
    with pytest.raises(openai.RateLimitError):
        await agent().summarize_with_retries(Retries(2, 5.0, 0.01, budget_s=10.0), "m", **WINDOW)
    assert len(fake_openai.structured_requests()) == 2 and time.monotonic() - started >= 0.4
    fake_openai.requests.clear()
    fake_openai.retry_after = "30"
    started = time.monotonic()
    with pytest.raises(openai.RateLimitError, match="Rate limit reached"):
        await agent().summarize_with_retries(Retries(3, 5.0, 0.01, budget_s=10.0), "m", **WINDOW)
    assert len(fake_openai.structured_requests()) == 1 and time.monotonic() - started < 5


async def test_a_long_retry_after_fails_the_row_at_once_and_backs_the_conversation_off(
    fake_openai, open_memory, database_url
):
    """HTTP 429 with Retry-After: 100, the default settings: the row is `failed` within seconds, its error naming
    the status and the wait, and the conversation's next summaries are not asked of the model before then (before:
    the row stayed `processing` while the summary slept 100 s, twice)."""
    fake_openai.mode, fake_openai.retry_after = "rate_limited", "100"
    memory = await open_memory(memory_model="limited-model")
    app = with_memory(EchoChat().graph, memory)
    started = time.monotonic()
    for n in range(4):
        await app.ainvoke({"messages": [HumanMessage(f"I like tea number {n}")]}, {"configurable": {"thread_id": "rl"}})
        assert await memory.drain(timeout=5)
    assert time.monotonic() - started < 5
    (first, *later) = query(database_url, "SELECT status, error FROM memory ORDER BY memory_id")
    assert first[0] == "failed" and "(HTTP 429)" in first[1] and "retry after 100 s" in first[1]
    assert later and all(status == "failed" and "not attempted" in error for status, error in later)
    assert "HTTP 429" in later[0][1] and len(fake_openai.structured_requests()) == 1


async def test_json_in_text_as_small_and_reasoning_models_write_it(fake_openai):
    """A server without tools or response_format, whose model thinks aloud with braces first and writes the call
    of the schema out: the summary is read (before: no JSON object found, the summary failed)."""
    fake_openai.refuse_tools = fake_openai.refuse_response_format = True
    fake_openai.text_answer = (
        '<think>The user likes {tea}. Draft: {"summary": "draft"}</think>\n'
        'Sure! {"name": "MemorySummaryOutput", "arguments": {"summary": "The user likes green tea 🍵."}}\n'
        "Let me know if you need {anything} else."
    )
    result = await agent().summarize(**WINDOW)
    assert result.text == "The user likes green tea 🍵."


def test_retry_after_in_each_form_a_provider_sends():
    class Refused(Exception):
        def __init__(self, **headers: str) -> None:
            self.response = httpx.Response(429, headers=headers)

    later = format_datetime(datetime.now(UTC) + timedelta(seconds=60), usegmt=True)
    assert retry_after_s(Refused(**{"retry-after": "7"})) == 7
    assert retry_after_s(Refused(**{"retry-after-ms": "250", "retry-after": "1"})) == 0.25
    assert 50 < (retry_after_s(Refused(**{"retry-after": later})) or 0) <= 60
    assert retry_after_s(Refused(**{"retry-after": "soon"})) is None and retry_after_s(Refused()) is None
    assert retry_after_s(RuntimeError("no response")) is None


async def test_a_server_refusing_tools_with_http_500_degrades(fake_openai):
    """llama.cpp's server without --jinja answers HTTP 500 "tools param requires --jinja flag" to a request with
    tools: the JSON-schema format is asked next and remembered (before: every summary failed with that 500)."""
    fake_openai.refuse_tools, fake_openai.refusal = True, (500, "tools param requires --jinja flag")
    summarizer = agent()
    for _ in range(2):
        assert (await summarizer.summarize(**WINDOW)).text
    assert [bool(r.get("tools")) for r in fake_openai.requests] == [True, False, False]


async def test_a_model_pulled_late_gets_tool_calling(fake_openai):
    """The server does not have the model yet (HTTP 404 "model ... not found"): the summary fails with that, and
    once the model is there tool calling is asked again (before: tools and the JSON-schema format counted as
    refused for good, and every later summary went through JSON in text)."""
    fake_openai.refuse_tools = fake_openai.refuse_response_format = True
    fake_openai.refusal = (404, "model 'limited-model' not found, try pulling it first")
    summarizer = agent()
    with pytest.raises(openai.NotFoundError):
        await summarizer.summarize(**WINDOW)
    fake_openai.refuse_tools = fake_openai.refuse_response_format = False
    fake_openai.requests.clear()
    assert (await summarizer.summarize(**WINDOW)).text
    assert learned_method(summarizer.model) == "tools" and len(fake_openai.requests) == 1


async def test_a_key_the_provider_quotes_is_kept_out_of_rows_and_logs(
    fake_openai, open_memory, database_url, monkeypatch, caplog
):
    """A gateway that quotes the key it refused: the failed row's error and the WARNING say `***` (before: the
    key was stored on every failed row and logged). Consolidation's error too."""
    key = "sk-proj-quoted-0123456789abcdef"
    monkeypatch.setenv("OPENAI_API_KEY", key)
    fake_openai.mode, fake_openai.error_text = "error", f"Incorrect API key provided: {key}."
    caplog.set_level(logging.INFO, "memory_agent")
    memory = await open_memory(memory_model="gated-model", summary_max_attempts=2, summary_retry_backoff_s=0)
    app = with_memory(EchoChat().graph, memory)
    for n in range(3):
        await app.ainvoke({"messages": [HumanMessage(f"hi {n}")]}, {"configurable": {"thread_id": "keyed"}})
        assert await memory.drain(timeout=20)
    errors = [error for (error,) in query(database_url, "SELECT error FROM memory WHERE status = 'failed'")]
    assert errors and "Incorrect API key provided: ***." in errors[0]
    logged = [record.getMessage() for record in caplog.records]
    assert any("Incorrect API key provided: ***." in line for line in logged)
    assert not [text for text in errors + logged if key in text]
    with pytest.raises(SummarizationError) as raised:
        await call_consolidation_model(
            chat_model_from_setting("consolidator", variable="X"), "Consolidate.", "- a", ConsolidationOutput
        )
    assert key not in str(raised.value) and "***" in str(raised.value)


async def test_a_key_quoted_in_a_garbage_answer_is_kept_out_of_the_error(fake_openai, monkeypatch):
    """A server that answers garbage quoting the key (a gateway page echoing the request's headers): the error,
    stored on the row and logged, says `***` (before: the key, in the answer quoted after `raw:`)."""
    key = "sk-proj-echoed-0123456789abcdef"
    monkeypatch.setenv("OPENAI_API_KEY", key)
    fake_openai.refuse_tools = fake_openai.refuse_response_format = True
    fake_openai.text_answer = f"Request headers: Authorization: Bearer {key}"
    with pytest.raises(SummarizationError) as raised:
        await MemoryAgent(chat_model_from_setting("echoing-model", variable="X")).summarize(**WINDOW)
    assert "raw: 'Request headers: Authorization: Bearer ***'" in str(raised.value)
    assert key not in str(raised.value)


async def test_a_service_opened_again_summarizes_at_once(fake_openai, open_memory, database_url):
    """Closed and opened again in one process (a new memory loop): the first summary of the new service completes
    (before: it failed with "Event loop is closed", the summarizer reusing a connection pooled on the closed loop).
    """
    fake_openai.keep_alive = True
    for opening in range(2):
        memory = await open_memory(memory_model="reopened-model", summary_max_attempts=1, memory_summarize_after_seq=1)
        app = with_memory(EchoChat().graph, memory)
        for n in range(2):
            config = {"configurable": {"thread_id": f"opened-{opening}"}}
            await app.ainvoke({"messages": [HumanMessage(f"I like tea number {n}")]}, config)
            assert await memory.drain(timeout=20)
        await memory.aclose()
    assert {row for row in query(database_url, "SELECT status, error FROM memory")} == {("completed", None)}


async def test_a_refusal_is_named_in_the_failed_row(fake_openai, open_memory, database_url):
    """The model refuses (OpenAI's `refusal`, no content): the row's error quotes the refusal (before: `raw: ''`
    for each way of asking, the reason lost)."""
    fake_openai.mode, fake_openai.error_text = "refusal", "I can't help with summarizing this."
    memory = await open_memory(memory_model="refusing-model", summary_max_attempts=1, memory_summarize_after_seq=1)
    app = with_memory(EchoChat().graph, memory)
    for n in range(2):
        await app.ainvoke({"messages": [HumanMessage(f"hi {n}")]}, {"configurable": {"thread_id": "refused"}})
        assert await memory.drain(timeout=20)
    ((error,),) = query(database_url, "SELECT error FROM memory WHERE status = 'failed' LIMIT 1")
    assert 'the model refused: "I can\'t help with summarizing this."' in error and "raw: ''" not in error


class Trickling(BaseHTTPRequestHandler):
    """HTTP 200 headers, then a space every 0.2 s for 3 s: each read within any timeout, the answer never whole."""

    def log_message(self, *args: object) -> None:
        return None

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        try:
            for _ in range(15):
                self.wfile.write(b" ")
                self.wfile.flush()
                time.sleep(0.2)
        except OSError:
            pass  # the client gave up


async def test_a_consolidation_call_to_a_trickling_server_is_bounded(monkeypatch):
    """A server that trickles its answer never trips the client's timeout (it is per read): consolidation's call
    ends after the client's timeout, as a transient error naming it (before: after 3 s a way of asking, 9 s here,
    and as long as the server went on: a database connection and the tenant's slot held meanwhile)."""
    with LocalServer(Trickling) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", f"{server.url}/v1")
        model = chat_model_from_setting("slow-model", variable="X", role="consolidation", timeout_s=0.5, max_retries=0)
        started = time.monotonic()
        with pytest.raises(SummarizationError) as raised:
            await call_consolidation_model(model, "Consolidate.", "- a", ConsolidationOutput)
    assert time.monotonic() - started < 2.5
    assert "model 'slow-model' did not answer within 0.5s" in str(raised.value) and is_transient(raised.value)


async def test_a_cluster_summary_from_a_trickling_server_is_bounded(monkeypatch):
    """The cluster summary's plain call, made holding the cluster's lock, ends after the client's timeout too
    (before: after the 3 s the server trickled, and as long as it would go on)."""
    with LocalServer(Trickling) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", f"{server.url}/v1")
        model = chat_model_from_setting("slow-model", variable="X", timeout_s=0.5, max_retries=0)
        started = time.monotonic()
        with pytest.raises(TimeoutError, match="model 'slow-model' did not answer within 0.5s"):
            await MemoryAgent(model).summarize_cluster(["I like tea", "I like green tea", "Tea at five"])
    assert time.monotonic() - started < 2.5


class NestedPastTheStack(BaseHTTPRequestHandler):
    """HTTP 200 with a JSON body nested deeper than the interpreter's stack."""

    def log_message(self, *args: object) -> None:
        return None

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        data = b'{"choices": ' + b"[" * 50_000 + b"]" * 50_000 + b"}"
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


async def test_an_answer_nested_past_the_stack_is_garbage(monkeypatch):
    """A body the client's JSON reader cannot read (RecursionError) is an answer without the object, each way of
    asking passed over (before: the RecursionError was raised at the first, named `HTTP 200` on the row and logged
    as a bug of the code)."""
    with LocalServer(NestedPastTheStack) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", f"{server.url}/v1")
        with pytest.raises(SummarizationError) as raised:
            await MemoryAgent(chat_model_from_setting("deep-model", variable="X")).summarize(**WINDOW)
    said = str(raised.value)
    assert said.startswith("model 'deep-model' returned unparseable output") and "RecursionError" in said
