"""`memory-agent worker` as an operator meets it: it says it runs, and a stop is quiet and clean."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from langchain_core.messages import HumanMessage

from memory_agent import with_memory
from tests.conftest import query
from tests.support import EchoChat


def start_worker(database_url: str, *options: str, **variables: str) -> subprocess.Popen[str]:
    """`memory-agent [options] worker --concurrency 1` on the test's database, in a process of its own, with
    `variables` in its environment."""
    env = {**os.environ, "MEMORY_AGENT_DATABASE_URL": database_url, "PYTHONPATH": os.getcwd(), **variables}
    return subprocess.Popen(
        [sys.executable, "-m", "memory_agent", *options, "worker", "--concurrency", "1"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_worker_announces_itself_and_stops_cleanly(database_url, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    worker = start_worker(database_url)
    try:
        deadline = time.monotonic() + 30
        assert worker.stderr is not None
        line = ""
        while "worker running" not in line and time.monotonic() < deadline:
            line = worker.stderr.readline()
        assert "memory_agent worker running: concurrency 1" in line
        time.sleep(1)  # let it settle into waiting for jobs
        worker.send_signal(signal.SIGTERM)
        _, rest = worker.communicate(timeout=30)
    finally:
        if worker.poll() is None:
            worker.kill()
    assert worker.returncode == 0, rest
    assert "Traceback" not in rest and "AppNotOpen" not in rest, rest
    assert "memory_agent worker stopped" in rest


async def test_a_stop_waits_the_drain_timeout_for_a_hanging_model(fake_openai, open_memory, database_url):
    """SIGTERM while a summary waits on a model that hangs: the worker stops after MEMORY_AGENT_DRAIN_TIMEOUT_S,
    the summary cancelled and its row left `processing` for the sweep (before: it waited for the summary's own
    timeout, MEMORY_AGENT_SUMMARY_TIMEOUT_S x its attempts, past an orchestrator's grace period)."""
    fake_openai.mode, fake_openai.hang_s = "hang", 20.0
    memory = await open_memory(executor="procrastinate", memory_model="hanging-model")
    app = with_memory(EchoChat().graph, memory)
    for n in range(3):
        await app.ainvoke({"messages": [HumanMessage(f"m{n}")]}, {"configurable": {"thread_id": "hung"}})
    worker = start_worker(
        database_url,
        MEMORY_AGENT_MEMORY_MODEL="hanging-model",
        MEMORY_AGENT_SUMMARY_TIMEOUT_S="30",
        MEMORY_AGENT_DRAIN_TIMEOUT_S="1",
    )
    try:
        deadline = time.monotonic() + 30
        while not fake_openai.structured_requests() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert fake_openai.structured_requests(), "the worker asked no summary"
        stopping = time.monotonic()
        worker.send_signal(signal.SIGTERM)
        _, rest = worker.communicate(timeout=15)
    finally:
        if worker.poll() is None:
            worker.kill()
    assert time.monotonic() - stopping < 8, rest
    assert worker.returncode == 0 and "memory_agent worker stopped" in rest, rest
    assert "Traceback" not in rest, rest
    assert query(database_url, "SELECT status FROM memory") == [("processing",)]


async def test_a_verbose_worker_logs_no_credentials_of_the_base_url(fake_openai, open_memory, database_url):
    """`memory-agent -v worker` shows the HTTP client's request lines: a gateway's credentials in OPENAI_BASE_URL
    are written `***` there (before: `POST http://gw-user:gw-password-123@...` in the log)."""
    memory = await open_memory(executor="procrastinate", memory_model="gated-model")
    app = with_memory(EchoChat().graph, memory)
    for n in range(3):
        await app.ainvoke({"messages": [HumanMessage(f"m{n}")]}, {"configurable": {"thread_id": "gated"}})
    base = fake_openai.base_url.replace("http://", "http://gw-user:gw-password-123@")
    worker = start_worker(database_url, "-v", MEMORY_AGENT_MEMORY_MODEL="gated-model", OPENAI_BASE_URL=base)
    try:
        deadline = time.monotonic() + 30
        while query(database_url, "SELECT status FROM memory") != [("completed",)] and time.monotonic() < deadline:
            time.sleep(0.1)
        worker.send_signal(signal.SIGTERM)
        _, rest = worker.communicate(timeout=15)
    finally:
        if worker.poll() is None:
            worker.kill()
    assert query(database_url, "SELECT status FROM memory") == [("completed",)], rest
    assert "HTTP Request: POST http://***@127.0.0.1" in rest, rest
    assert "gw-password-123" not in rest and "gw-user" not in rest
