"""4 app processes x 25 conversations x 10 rounds, 2 procrastinate worker processes: every conversation
ends with the window the design's rules predict, a linear chain, and no duplicate versions."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time

import pytest

from memory_agent import MemoryService, MemorySettings, calculate_summary_range
from tests.conftest import query
from tests.reliability.test_concurrency import assert_linear_chain

pytestmark = pytest.mark.slow

APPS, CONVERSATIONS, ROUNDS, WORKERS = 4, 25, 10, 2


def clean_env(database_url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "MEMORY_AGENT_"))}
    env["MEMORY_AGENT_DATABASE_URL"] = database_url
    env["MEMORY_AGENT_MEMORY_MODEL"] = "offline"  # workers use the offline summarizer, by name
    return env


async def wait_until_idle(url: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        (busy,) = query(
            url,
            "SELECT (SELECT count(*) FROM memory WHERE status = 'processing')"
            " + (SELECT count(*) FROM procrastinate_jobs WHERE status IN ('todo', 'doing')"
            "    AND task_name = 'memory_agent.summarize')",
        )[0]
        if busy == 0:
            return
        assert time.monotonic() < deadline, f"{busy} summaries still in flight after {timeout}s"
        await asyncio.sleep(0.2)


async def test_apps_and_workers_share_one_database(database_url):
    # The procrastinate tables must exist before workers start listening.
    async with MemoryService.from_settings(MemorySettings(database_url=database_url, executor="procrastinate")):
        pass
    env = clean_env(database_url)
    workers = [
        subprocess.Popen(
            [sys.executable, "-m", "memory_agent", "worker", "--concurrency", "4"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        for _ in range(WORKERS)
    ]
    try:
        apps = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "tests.reliability.app_process",
                    database_url,
                    f"app{i}",
                    str(CONVERSATIONS),
                    str(ROUNDS),
                ],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
            )
            for i in range(APPS)
        ]
        for app in apps:
            _, stderr = await asyncio.to_thread(app.communicate, timeout=240)
            assert app.returncode == 0, stderr.decode()[-3000:]
        await wait_until_idle(database_url, 120)

        # The last round-end of a conversation may have found a summary in flight; one more trigger per
        # conversation brings every memory up to the last message, as the next round's end would.
        settings = MemorySettings(database_url=database_url, executor="procrastinate")
        async with MemoryService.from_settings(settings) as memory:
            names = [name for (name,) in query(database_url, "SELECT conversation_id FROM conversations ORDER BY 1")]
            assert len(names) == APPS * CONVERSATIONS
            for name in names:
                await memory.conversations.trigger_summarization_if_needed(name, 2 * ROUNDS - 1)
            await wait_until_idle(database_url, 120)
            histories = {name: await memory.conversations.get_memory_history(name) for name in names}
    finally:
        for worker in workers:
            worker.send_signal(signal.SIGTERM)
        for worker in workers:
            try:
                worker.wait(timeout=30)
            except subprocess.TimeoutExpired:
                worker.kill()

    for worker in workers:
        assert worker.returncode == 0, worker.stderr.read().decode()[-3000:]
    last = 2 * ROUNDS - 1
    for name, records in histories.items():
        assert records, name
        assert all(r.status == "completed" for r in records), [(r.memory_id, r.status, r.error) for r in records]
        assert_linear_chain(records)
        for record in records:  # every version's window follows the design's rule
            assert (record.start_sequence, record.end_sequence) == calculate_summary_range(record.end_sequence, 14)
        assert (records[-1].start_sequence, records[-1].end_sequence) == (6, last) == calculate_summary_range(last, 14)
    stored = query(
        database_url,
        "SELECT conversation_id, count(*), min(sequence_number), max(sequence_number) FROM messages GROUP BY 1",
    )
    assert len(stored) == APPS * CONVERSATIONS and all(row[1:] == (2 * ROUNDS, 0, last) for row in stored)
    duplicates = query(
        database_url,
        "SELECT conversation_id, start_sequence, end_sequence, count(*) FROM memory"
        " GROUP BY 1, 2, 3 HAVING count(*) > 1",
    )
    assert duplicates == []
