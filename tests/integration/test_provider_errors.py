"""What a provider can answer that a deployment must survive without leaking it: an error body of any size (quoted
on the row, in the WARNING, in API errors), a base URL written without its scheme, a key quoted by the call that
makes a cluster summary."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler
from typing import Any, ClassVar

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.graph import START, MessagesState, StateGraph

from memory_agent import with_memory
from memory_agent.consolidation.model import ConsolidationOutput, call_consolidation_model
from memory_agent.errors import ConfigurationError, SummarizationError
from memory_agent.llm import chat_model_from_setting
from memory_agent.settings import ModelPrice
from memory_agent.summarize.agent import MemoryAgent
from memory_agent.summarize.failures import BACKOFF_BASE_S, MAX_SAID_CHARS
from tests.conftest import query
from tests.integration.test_provider_answers import WINDOW
from tests.local_server import LocalServer
from tests.support import EchoChat


async def test_a_huge_error_body_is_cut_on_the_row_in_the_log_and_in_consolidation(
    fake_openai, open_memory, database_url, caplog
):
    """A provider answering HTTP 500 with a 300 KB body (an HTML error page, a gateway echoing the whole request,
    and with it the conversation): the row's error, every log line and consolidation's error quote at most
    MAX_SAID_CHARS of it and say how much was cut (before: the WARNING and each attempt's INFO line held all
    300 KB, the row its first 4,000 characters without a word that it was cut)."""
    fake_openai.mode, fake_openai.error_text = "error", "upstream page " + "x" * 300_000
    caplog.set_level(logging.INFO, "memory_agent")
    memory = await open_memory(memory_model="big-error-model", summary_max_attempts=2, summary_retry_backoff_s=0)
    app = with_memory(EchoChat().graph, memory)
    for n in range(3):  # the first summary is asked for at the third round
        await app.ainvoke({"messages": [HumanMessage(f"hi {n}")]}, {"configurable": {"thread_id": "big"}})
        assert await memory.drain(timeout=20)
    ((error,),) = query(database_url, "SELECT error FROM memory WHERE status = 'failed'")
    assert error.startswith("OpenAIAPIError (HTTP 500): Error code: 500 - ")
    assert len(error) < MAX_SAID_CHARS + 100 and "more characters not shown" in error
    logged = [record.getMessage() for record in caplog.records]
    assert any("Summary of conversation 'big'" in line and "upstream page" in line for line in logged)
    assert max(len(line) for line in logged) < MAX_SAID_CHARS + 400
    with pytest.raises(SummarizationError) as raised:
        await call_consolidation_model(
            chat_model_from_setting("big-error-model", variable="X", role="consolidation", max_retries=0),
            "Consolidate.",
            "- a",
            ConsolidationOutput,
        )
    assert "HTTP 500" in str(raised.value) and len(str(raised.value)) < MAX_SAID_CHARS + 200


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("OPENAI_BASE_URL", "localhost:8000/v1"),  # the scheme left out: read as the scheme `localhost`
        ("OPENAI_BASE_URL", "127.0.0.1:8000/v1"),
        ("OPENAI_BASE_URL", "http://user:secret-pass@:8000/v1"),  # no host
        ("OPENAI_BASE_URL", "http://gateway:port/v1"),
        ("ANTHROPIC_BASE_URL", "gateway.example/anthropic"),
        ("OLLAMA_HOST", "ftp://models.example"),  # its client kept the scheme: every call a connection error
        ("OLLAMA_HOST", "models.example:port"),
    ],
)
def test_a_base_url_without_its_scheme_or_host_is_refused_at_open(monkeypatch, variable, value):
    """Such a base URL made a model, and every summary failed as `Connection error.`, retried as if the server
    were down: refused when the model is made, naming the variable, not its value (it may hold a password)."""
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-fine")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-fine")
    monkeypatch.setenv(variable, value)
    setting = {"ANTHROPIC": "anthropic:x", "OLLAMA": "ollama:llama3.1"}.get(variable.split("_")[0], "gpt-4o")
    with pytest.raises(ConfigurationError, match=f"{variable} is not an http:// or https:// URL") as raised:
        chat_model_from_setting(setting, variable="MEMORY_AGENT_MEMORY_MODEL")
    assert f"MEMORY_AGENT_MEMORY_MODEL='{setting}'" in str(raised.value) and value not in str(raised.value)


def test_base_urls_users_write_are_accepted(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-fine")
    for value in ("http://127.0.0.1:8000/v1", "https://user:pass@gateway.example/v1", "HTTPS://[::1]:8000"):
        monkeypatch.setenv("OPENAI_BASE_URL", value)
        assert chat_model_from_setting("gpt-4o", variable="MEMORY_AGENT_MEMORY_MODEL")
    for value in ("127.0.0.1:11434", "models.example", "https://models.example", "[::1]:11434"):
        monkeypatch.setenv("OLLAMA_HOST", value)  # the Ollama client's own forms, a host without its scheme too
        assert chat_model_from_setting("ollama:llama3.1", variable="MEMORY_AGENT_MEMORY_MODEL")


KEY = "sk-proj-cluster-0123456789abcdef"


class QuotesTheKey(BaseHTTPRequestHandler):
    """HTTP 401 quoting the key it was sent, as OpenAI's "Incorrect API key provided" does."""

    def log_message(self, *args: object) -> None:
        return None

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        key = self.headers.get("Authorization", "").removeprefix("Bearer ")
        data = json.dumps({"error": {"message": f"Incorrect API key provided: {key}.", "code": "invalid_api_key"}})
        self.send_response(401)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data.encode())


async def test_a_key_quoted_to_a_cluster_summary_is_kept_out_of_its_error(monkeypatch):
    """The cluster summary's plain call (not asked through the structured caller) failed with the provider's error
    as it was: the key it quoted went to the WARNING of the cluster's refresh (before: the key in the message)."""
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with LocalServer(QuotesTheKey) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", f"{server.url}/v1")
        agent = MemoryAgent(chat_model_from_setting("revoked-model", variable="X"))
        with pytest.raises(Exception, match=r"Incorrect API key provided: \*\*\*\.") as raised:
            await agent.summarize_cluster(["I like tea", "I like green tea"])
    assert KEY not in str(raised.value) and KEY not in repr(raised.value)


async def test_a_backed_off_conversation_recovers_once_the_model_answers(fake_openai, open_memory, database_url):
    """HTTP 500 on every summary: after two failures the model is not asked (backing off, 60 s); it answers again,
    and once the backoff has passed (the service's clock) the next summary is asked, completes and ends the
    backoff: the summaries after it are asked at once, and the rounds get the memory again."""
    now = [datetime(2026, 3, 2, 9, tzinfo=UTC)]
    fake_openai.mode = "error"
    memory = await open_memory(memory_model="flaky-model", summary_max_attempts=1, clock=lambda: now[0])
    chat = EchoChat()
    app = with_memory(chat.graph, memory)

    async def rounds(count: int) -> None:
        for n in range(count):
            await app.ainvoke(
                {"messages": [HumanMessage(f"I like tea number {n}")]}, {"configurable": {"thread_id": "r"}}
            )
            assert await memory.drain(timeout=20)

    await rounds(5)
    assert len(fake_openai.structured_requests()) == 2  # two failures, then backing off
    fake_openai.mode = "ok"
    await rounds(2)
    assert len(fake_openai.structured_requests()) == 2  # still within the backoff
    now[0] += timedelta(seconds=BACKOFF_BASE_S + 1)
    await rounds(3)
    statuses = [status for (status,) in query(database_url, "SELECT status FROM memory ORDER BY memory_id")]
    assert statuses[-3:] == ["completed"] * 3 and len(fake_openai.structured_requests()) == 5
    assert chat.seen[-1][0].text.startswith("[Previous context:") and len(chat.seen[-1]) < len(chat.seen[-4])


def answer_completion(
    handler: BaseHTTPRequestHandler, message: dict[str, Any], finish: str, usage: dict[str, Any]
) -> None:
    """An OpenAI chat completion of one choice, written whole as `handler`'s answer."""
    choice = {"index": 0, "message": message, "finish_reason": finish}
    completion = {
        "id": "c",
        "object": "chat.completion",
        "created": 1,
        "model": "m",
        "choices": [choice],
        "usage": usage,
    }
    data = json.dumps(completion).encode()
    handler.send_response(200)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)


class CutShort(BaseHTTPRequestHandler):
    """Every answer stopped short, `finish_reason` saying why: at the model's output limit (`length`: a tool call's
    arguments or the text end halfway through the object), or by a content filter (`content_filter`)."""

    asked: ClassVar[list[dict]] = []
    finish_reason: ClassVar[str] = "length"

    def log_message(self, *args: object) -> None:
        return None

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        CutShort.asked.append(body)
        half = '{"summary": "The user likes green'
        message: dict = {"role": "assistant", "content": None if body.get("tools") else half}
        if body.get("tools"):
            call = {"name": "MemorySummaryOutput", "arguments": half}
            message["tool_calls"] = [{"id": "call_1", "type": "function", "function": call}]
        usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
        answer_completion(self, message, CutShort.finish_reason, usage)


@pytest.mark.parametrize(
    ("finish_reason", "why"),
    [("length", "cut at the model's output limit"), ("content_filter", "withheld by the provider's content filter")],
)
async def test_an_answer_stopped_short_is_named_so(monkeypatch, finish_reason, why):
    """A model that stops at its output limit, or whose answer a content filter withheld: each way of asking is
    passed over like one answering without the object, and the error says why the answer stopped (before: the
    JSON-schema way raised openai's LengthFinishReasonError or ContentFilterFinishReasonError, named `HTTP 200`,
    without trying JSON in text, and the tool call's half object read as plain garbage)."""
    CutShort.asked, CutShort.finish_reason = [], finish_reason
    with LocalServer(CutShort) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", f"{server.url}/v1")
        model = chat_model_from_setting("terse-model", variable="X")
        with pytest.raises(SummarizationError) as raised:
            await MemoryAgent(model).summarize(**WINDOW)
    said = str(raised.value)
    assert "tools: no MemorySummaryOutput in the answer" in said and f"{why}: finish_reason {finish_reason}" in said
    assert [bool(body.get("tools")) or "response_format" in body for body in CutShort.asked][:3] == [True, True, False]


@pytest.mark.parametrize("name", ["gpt-4o\u200b", "\ufeffgpt-4o", "anthropic:claude-x\u200d", "offline\u2060"])
def test_a_model_setting_with_an_invisible_character_is_refused(monkeypatch, name):
    """A zero-width space or byte order mark pasted with the value was sent as part of the model's name: HTTP 404
    on every summary, the name looking right in the log (before: the model was made)."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-fine")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-fine")
    with pytest.raises(ConfigurationError, match="holds a control or invisible character"):
        chat_model_from_setting(name, variable="MEMORY_AGENT_MEMORY_MODEL")


class OddUsage(BaseHTTPRequestHandler):
    """A summary answered as asked, its usage not a count: negative input tokens, output tokens past any column."""

    def log_message(self, *args: object) -> None:
        return None

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        arguments = json.dumps({"summary": "The user likes green tea."})
        call = {"id": "call_1", "type": "function", "function": {"name": "MemorySummaryOutput", "arguments": arguments}}
        message = {"role": "assistant", "content": None, "tool_calls": [call]}
        if not body.get("tools"):
            message = {"role": "assistant", "content": "A cluster of tea preferences."}
        usage = {"prompt_tokens": -1, "completion_tokens": 3_000_000_000, "total_tokens": 0}
        answer_completion(self, message, "stop", usage)


async def test_a_usage_that_is_no_count_is_estimated(monkeypatch, open_memory, database_url):
    """A server reporting negative or impossible token counts (its usage is untrusted input too): the summary
    completes and its calls are recorded with estimates (before: the ledger's checks refused the counts, and every
    summary failed with `completion failed: NumericValueOutOfRange`)."""
    with LocalServer(OddUsage) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", f"{server.url}/v1")
        monkeypatch.setenv("OPENAI_API_KEY", "sk-fine")
        memory = await open_memory(memory_model="odd-usage-model")
        app = with_memory(EchoChat().graph, memory)
        for n in range(3):
            await app.ainvoke({"messages": [HumanMessage(f"I like tea {n}")]}, {"configurable": {"thread_id": "odd"}})
            assert await memory.drain(timeout=20)
    assert {status for (status,) in query(database_url, "SELECT status FROM memory")} == {"completed"}
    calls = query(database_url, "SELECT input_tokens, output_tokens FROM llm_calls WHERE purpose <> 'app'")
    assert calls and all(0 < tokens < 10_000 for row in calls for tokens in row)


async def test_an_app_answer_whose_usage_is_no_count_does_not_fail_its_round(open_memory, database_url):
    """With a price table, each round records its app model's answers that report their usage: one reporting a
    count past the integer range (or a negative one) is recorded as 0 tokens (before: the round failed with
    NumericValueOutOfRange, nothing of it stored)."""
    usages = iter([3_000_000_000, -4, 7])

    def respond(state: MessagesState) -> dict[str, Any]:
        usage = {"input_tokens": next(usages), "output_tokens": 5, "total_tokens": 5}
        return {"messages": [AIMessage("hi", usage_metadata=usage, response_metadata={"model_name": "app-m"})]}

    builder = StateGraph(MessagesState)
    builder.add_node("respond", respond)
    builder.add_edge(START, "respond")
    memory = await open_memory(llm_prices={"app-m": ModelPrice(input=1.0, output=1.0)})
    app = with_memory(builder.compile(), memory)
    for n in range(3):
        await app.ainvoke({"messages": [HumanMessage(f"x {n}")]}, {"configurable": {"thread_id": "usage"}})
    assert query(database_url, "SELECT count(*) FROM messages") == [(6,)]
    recorded = query(database_url, "SELECT input_tokens, output_tokens FROM llm_calls WHERE purpose = 'app'")
    assert sorted(recorded) == [(0, 5), (0, 5), (7, 5)]
