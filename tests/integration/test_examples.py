"""Every example runs offline: FakeOpenAI (real HTTP) for the chat model and the summarizer, the test's
PostgreSQL through MEMORY_AGENT_DATABASE_URL, exactly as a user runs them against their own servers."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from langchain_core.messages import HumanMessage

from memory_agent.langgraph_server import close_shared_memory
from tests.conftest import query

ROOT = Path(__file__).resolve().parents[2]


def load(relative: str) -> ModuleType:
    path = ROOT / relative
    spec = importlib.util.spec_from_file_location(f"example_{path.stem}", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(params=["api-key", "base-url-only"])
def offline(request, monkeypatch, fake_openai, database_url):
    """FakeOpenAI for every OpenAI call, and the test database for MemorySettings; with an API key, and with
    only OPENAI_BASE_URL (a local server needs no key: the README offers either)."""
    monkeypatch.setenv("MEMORY_AGENT_DATABASE_URL", database_url)
    if request.param == "base-url-only":
        monkeypatch.delenv("OPENAI_API_KEY")
    return fake_openai


def roles(url: str, thread: str) -> list[str]:
    rows = query(url, "SELECT role FROM messages WHERE conversation_id = %s ORDER BY sequence_number", [thread])
    return [r[0] for r in rows]


def assert_wire_tool_pairs(requests: list[dict]) -> None:
    """In every chat request sent over HTTP, each tool result follows the assistant message that called it."""
    for body in requests:
        called: set[str] = set()
        for message in body.get("messages", []):
            if message["role"] == "assistant":
                called |= {call["id"] for call in message.get("tool_calls") or []}
            if message["role"] == "tool":
                assert message["tool_call_id"] in called


def test_chat_app_sync_invoke_from_a_plain_script(offline, database_url):
    turns = ["I am Ada and I like tea.", "I live in Porto.", "I work on compilers.", "What do you know about me?"]
    replies = load("examples/chat_app.py").main(turns, thread_id="chat")
    assert len(replies) == 4 and all(r.endswith(t) for r, t in zip(replies, turns))
    assert roles(database_url, "chat") == ["user", "assistant"] * 4
    memory = query(
        database_url, "SELECT status, memory_text FROM memory WHERE conversation_id = 'chat' ORDER BY memory_id"
    )
    assert memory and memory[-1][0] == "completed" and "I am Ada and I like tea." in memory[-1][1]
    assert offline.structured_requests(), "the summarizer ran through ChatOpenAI over HTTP"


def test_chat_app_runs_as_a_script(offline, database_url):
    completed = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "chat_app.py"), "hello from a script"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ},
        cwd=ROOT,
    )
    assert completed.returncode == 0, completed.stderr
    assert "bot> echo: hello from a script" in completed.stdout
    assert roles(database_url, "chat-app-demo") == ["user", "assistant"]


async def test_agent_with_tools(offline, database_url):
    offline.tool_plan = {
        "get_weather": {"city": "Lisbon"},
        "convert_currency": {"amount": 18, "currency_from": "EUR", "currency_to": "USD"},
    }
    answers = await load("examples/agent_with_tools.py").main(thread_id="tools")
    assert "Sunny and 24°C in Lisbon" in answers[0] and "18.0 EUR = 19.44 USD" in answers[0]
    assert roles(database_url, "tools") == ["user", "assistant", "tool", "tool", "assistant"] * 2
    chat_requests = [r for r in offline.requests if r.get("tools") and r not in offline.structured_requests()]
    assert len(chat_requests) == 4
    # Round 2's first request carried round 1 (its parallel calls and both results) as the gap.
    assert [m["role"] for m in chat_requests[2]["messages"]] == [
        "system",
        "user",
        "assistant",
        "tool",
        "tool",
        "assistant",
        "user",
    ]
    assert_wire_tool_pairs(offline.requests)


def test_fastapi_chat_one_request_one_round(offline, database_url):
    from fastapi.testclient import TestClient

    module = load("examples/fastapi_chat.py")
    with TestClient(module.app) as client:  # runs the lifespan: the MemoryService opens and closes with the app
        for n in range(4):
            response = client.post("/chat/alice", json={"message": f"alice says {n}"})
            assert response.status_code == 200, response.text
            assert response.json()["reply"].endswith(f"alice says {n}")
        assert client.post("/chat/bob", json={"message": "bob here"}).json() == {
            "thread_id": "bob",
            "reply": "echo: bob here",
        }
        assert client.post("/chat/alice", json={"message": ""}).status_code == 422
        assert client.post("/chat/a%00b", json={"message": "hi"}).status_code == 422
        assert client.get("/chat/a%00b/memory").status_code == 422
        assert module.app.state.memory.call_sync(module.app.state.memory.drain(timeout=20))
        versions = client.get("/chat/alice/memory").json()
    assert versions and versions[-1]["status"] == "completed" and "alice says 0" in versions[-1]["memory_text"]
    assert roles(database_url, "alice") == ["user", "assistant"] * 4
    assert roles(database_url, "bob") == ["user", "assistant"]


def test_langgraph_dev_graph(offline, database_url):
    from langgraph.checkpoint.memory import InMemorySaver

    assert (ROOT / "langgraph.json").read_text().count("./graphs/chat.py:graph") == 1
    module = load("graphs/chat.py")
    try:
        graph = module.graph
        graph.checkpointer = InMemorySaver()  # what the LangGraph server does: a checkpointer per deployment
        config = {"configurable": {"thread_id": "studio"}}
        first = graph.invoke({"messages": [HumanMessage("first question")]}, config)
        second = graph.invoke({"messages": [HumanMessage("second question")]}, config)
    finally:
        close_shared_memory()  # the server process's service: the next test's database gets a new one
    assert first["messages"][-1].text == "echo: first question"
    assert second["messages"][-1].text == "echo: second question"
    # The thread's checkpointed state carried round 1 into round 2; it was not stored a second time.
    assert query(database_url, "SELECT content FROM messages ORDER BY sequence_number") == [
        ("first question",),
        ("echo: first question",),
        ("second question",),
        ("echo: second question",),
    ]
