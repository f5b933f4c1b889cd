"""Stuck `processing` rows: reclaimed by the periodic sweep and by the next trigger, even when the
process that owned the row was killed with SIGKILL."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from tests.conftest import query
from tests.openai_server import FakeOpenAI
from tests.support import GatedSummaryModel


async def wait_for(predicate, timeout: float, what: str, interval: float = 0.05):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(interval)


async def test_periodic_sweep_reclaims_and_restarts_a_hung_summary(open_memory, database_url):
    # Memory 1 hangs in a process that goes away (closed mid-call: its row stays `processing`; a live process
    # fails its own row before it could be reclaimed, test_providers). Another process's sweep reclaims it and
    # starts memory 2.
    hung = await open_memory(model=GatedSummaryModel(), processing_timeout_s=1.0, sweep_interval_s=60)
    for n in range(3):
        await hung.conversations.finish_round("hung", [HumanMessage(f"m{n}"), AIMessage("ok")])
    await hung.aclose(timeout=0.1)
    model = GatedSummaryModel()
    await open_memory(model=model, processing_timeout_s=1.0, sweep_interval_s=0.2)

    def statuses():
        return query(database_url, "SELECT memory_id, status, base_memory_id, error FROM memory ORDER BY 1")

    assert [(i, s) for i, s, _, _ in statuses()] == [(1, "processing")]
    rows = await wait_for(lambda: [r for r in statuses() if r[0] == 2], 10, "the sweep to start memory 2")
    first = statuses()[0]
    assert first[1] == "failed" and first[3].startswith("reclaimed: processing for")
    assert rows[0][1] == "processing" and rows[0][2] is None  # base: the latest completed memory (none)
    model.release()
    await wait_for(lambda: statuses()[1][1] == "completed", 10, "memory 2 to complete")
    assert [(i, s) for i, s, _, _ in statuses()] == [(1, "failed"), (2, "completed")]
    assert query(database_url, "SELECT start_sequence, end_sequence FROM memory WHERE memory_id = 2") == [(0, 5)]


def start_worker(database_url: str, openai_url: str) -> subprocess.Popen:
    env = dict(os.environ)
    env.update(
        MEMORY_AGENT_DATABASE_URL=database_url,
        OPENAI_BASE_URL=openai_url,
        OPENAI_API_KEY="test-key",
        MEMORY_AGENT_MEMORY_MODEL="gpt-4.1-mini",  # the fake server's, not the tests' offline one
        MEMORY_AGENT_SUMMARY_TIMEOUT_S="120",
    )
    return subprocess.Popen(
        [sys.executable, "-m", "memory_agent", "worker", "--concurrency", "2"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


@pytest.mark.slow
async def test_worker_killed_with_sigkill_mid_summary(open_memory, database_url):
    with FakeOpenAI() as fake:
        fake.mode, fake.hang_s = "hang", 60
        memory = await open_memory(executor="procrastinate", processing_timeout_s=2.0)
        for n in range(3):
            await memory.conversations.finish_round("killed", [HumanMessage(f"m{n}"), AIMessage("ok")])

        worker = start_worker(database_url, fake.base_url)
        try:
            # The worker picks the job up and hangs inside the model call ...
            await wait_for(
                lambda: query(database_url, "SELECT started_at FROM memory WHERE memory_id = 1")[0][0],
                30,
                "the worker to start memory 1",
            )
            await wait_for(lambda: fake.structured_requests(), 10, "the model call")
            # ... and dies without a chance to clean up.
            worker.send_signal(signal.SIGKILL)
            worker.wait(timeout=10)
        finally:
            if worker.poll() is None:
                worker.kill()
        assert worker.returncode == -signal.SIGKILL
        assert query(database_url, "SELECT status FROM memory WHERE memory_id = 1") == [("processing",)]

        await asyncio.sleep(2.2)  # past processing_timeout_s
        fake.mode = "ok"
        _, trigger = await memory.conversations.finish_round("killed", [HumanMessage("m3"), AIMessage("ok")])
        assert trigger.outcome == "started" and trigger.reclaimed_memory_ids == [1]

        second = start_worker(database_url, fake.base_url)
        try:
            await wait_for(
                lambda: query(database_url, "SELECT status FROM memory WHERE memory_id = 2") == [("completed",)],
                30,
                "a new worker to complete memory 2",
            )
        finally:
            second.send_signal(signal.SIGTERM)
            second.wait(timeout=20)

    rows = query(
        database_url,
        "SELECT memory_id, status, start_sequence, end_sequence, base_memory_id, error FROM memory ORDER BY 1",
    )
    assert rows[0][:5] == (1, "failed", 0, 5, None) and "reclaimed" in rows[0][5]
    assert rows[1][:5] == (2, "completed", 0, 7, None)
    assert query(database_url, "SELECT count(*), min(sequence_number), max(sequence_number) FROM messages") == [
        (8, 0, 7)
    ]
    assert second.returncode == 0, second.stderr.read().decode()[-2000:]
