"""The default summarizer (ChatOpenAI with structured output) end to end against a local HTTP server."""

from __future__ import annotations

import pytest
from langchain_core.messages import HumanMessage

from memory_agent import with_memory
from memory_agent.errors import ConfigurationError
from memory_agent.llm import OfflineModel, default_chat_model
from memory_agent.settings import MemorySettings
from tests.conftest import query
from tests.support import EchoChat


async def test_chatopenai_summarizer_over_http(fake_openai, open_memory, database_url):
    memory = await open_memory(model=None, memory_model="gpt-test-mini")  # default model: ChatOpenAI
    assert type(memory.agent.model).__name__ == "ChatOpenAI"
    app = with_memory(EchoChat().graph, memory)
    for n in range(1, 4):
        await app.ainvoke(
            {"messages": [HumanMessage(f"I like tea number {n}")]}, {"configurable": {"thread_id": "http"}}
        )
    assert await memory.drain(timeout=20)
    rows = query(
        database_url,
        "SELECT status, memory_text, model_name, input_tokens, output_tokens, generation_time_ms, error FROM memory",
    )
    assert len(rows) == 1
    status, text, model_name, input_tokens, output_tokens, generation_ms, error = rows[0]
    assert (status, error) == ("completed", None)
    assert "I like tea number 3" in text and model_name == "gpt-test-mini"
    assert input_tokens > 0 and output_tokens > 0 and generation_ms >= 0
    sent = fake_openai.structured_requests()
    assert len(sent) == 1 and sent[0]["model"] == "gpt-test-mini"
    prompt = "\n".join(m["content"] for m in sent[0]["messages"])
    assert "[seq 0] user: I like tea number 1" in prompt and "Window: sequences 0-5." in prompt


def test_no_silent_offline_model_without_openai_settings(monkeypatch):
    """A bare model name with no OpenAI variables is an error naming the settings, never the offline model."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("MEMORY_AGENT_MEMORY_MODEL")
    for role in ("summary", "consolidation"):
        with pytest.raises(ConfigurationError) as raised:
            default_chat_model(MemorySettings(), role)  # type: ignore[arg-type]
        message = str(raised.value)
        assert "MEMORY_AGENT_MEMORY_MODEL='gpt-4.1-mini'" in message
        assert "OPENAI_API_KEY or OPENAI_BASE_URL" in message and "offline" in message


def test_offline_model_when_named(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    summarizer, consolidator = (
        default_chat_model(MemorySettings(memory_model="offline")),
        default_chat_model(MemorySettings(memory_model="Offline"), "consolidation"),
    )
    # One offline model; the ledger records each role under its own name.
    assert isinstance(summarizer, OfflineModel) and isinstance(consolidator, OfflineModel)
    assert (summarizer.model_name, consolidator.model_name) == ("offline-extractive-summarizer", "offline-consolidator")
