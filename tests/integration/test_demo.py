"""`memory-agent demo`: its memories stay in a tenant of its own (another app of the same database never recalls
them), what it prints as recalled is the round's stored record (as `memory-agent at` shows it), a second demo at
once is refused by the database, and `--clean` removes what it wrote."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys

import psycopg

from memory_agent import MemoryService, MemorySettings
from memory_agent.cli.demo import DEMO_TENANT, USER_ID
from memory_agent.llm import OfflineModel
from memory_agent.observability import reads as observability
from tests.conftest import query


def run(*args: str, database_url: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "MEMORY_AGENT_DATABASE_URL": database_url, "PYTHONPATH": os.getcwd(), "COLUMNS": "300"}
    env.pop("OPENAI_API_KEY", None)
    env.pop("OPENAI_BASE_URL", None)
    return subprocess.run(
        [sys.executable, "-m", "memory_agent", *args], capture_output=True, text=True, timeout=180, env=env
    )


def printed_recall(output: str, heading: str) -> list[str]:
    """The recalled lines the demo printed under `heading` (up to the reply)."""
    part = output.split(heading, 1)[1].split("  reply   :", 1)[0]
    return [line.strip() for line in part.splitlines() if line.startswith("    - ")]


async def stored_recall(database_url: str, thread: str, round_number: int) -> list[str]:
    settings = MemorySettings(database_url=database_url)
    async with MemoryService(settings, model=OfflineModel()) as memory:
        context = await memory.loop.arun(observability.context_at(memory.backend, thread, round_number))
    block = context.recall["block"] if context.recall else ""
    return [line for line in block.splitlines() if line.startswith("- ")]


def test_the_demo_keeps_to_its_tenant_and_prints_what_the_model_received(database_url):
    demo = run("demo", "--rounds", "12", database_url=database_url)
    assert demo.returncode == 0, demo.stderr
    out = demo.stdout
    assert f"tenant {DEMO_TENANT!r}" in out and "memory-agent demo --clean" in out
    # Every row the demo wrote is in its tenant: the default tenant's `ana` (or anyone) recalls nothing of it.
    assert query(database_url, "SELECT DISTINCT tenant_id FROM conversation_owners") == [(DEMO_TENANT,)]
    assert query(database_url, "SELECT DISTINCT tenant_id FROM items") == [(DEMO_TENANT,)]

    async def recall_in_default_tenant() -> list:
        async with MemoryService(MemorySettings(database_url=database_url), model=OfflineModel()) as memory:
            return (await memory.long_term.recall(USER_ID, "shellfish allergy Lisbon trip")).results

    assert asyncio.run(recall_in_default_tenant()) == []
    # The printed recall is the stored one, round by round (the demo once ran a recall of its own).
    for number in range(1, 13):
        heading = f"Round {number}\n"
        printed = printed_recall(out, heading)
        stored = asyncio.run(stored_recall(database_url, "demo", number))
        if not stored:
            assert "recalled: nothing (no block was given)" in out.split(heading, 1)[1].split("reply", 1)[0]
        assert printed == stored[:4], number
    second = printed_recall(out, "A second conversation")
    assert second and second == asyncio.run(stored_recall(database_url, "demo-2", 1))[:4]
    assert any("Joao is allergic to shellfish" in line for line in second)
    # The offline assistant never repeats the user: no recalled line is its own echo. A recalled assistant line is
    # the reply to a question of the user's (recall shows a question as its reply), its placeholder.
    recalled_replies = re.findall(r"^    - \[demo #\d+ assistant[^\]]*\] (.*)$", out, re.MULTILINE)
    assert all(line.startswith("(offline assistant) I was given") for line in recalled_replies), recalled_replies
    # Replies are printed whole.
    assert "with a real model this would be an answer." in out

    cleaned = run("demo", "--clean", database_url=database_url)
    assert cleaned.returncode == 0 and "2 conversations" in cleaned.stdout, cleaned.stderr
    assert query(database_url, "SELECT count(*) FROM conversation_owners") == [(0,)]
    assert query(database_url, "SELECT count(*) FROM items") == [(0,)]


def test_a_second_demo_at_once_is_refused(database_url):
    # The lock a running demo holds, taken here.
    with psycopg.connect(database_url, autocommit=True) as running:
        assert running.execute("SELECT pg_try_advisory_lock(hashtextextended('memory_agent.demo', 0))").fetchone()
        second = run("demo", database_url=database_url)
    assert second.returncode == 2
    assert "another `memory-agent demo` is running on this database" in second.stderr
    assert len(second.stderr.strip().splitlines()) <= 2 and "Traceback" not in second.stderr
    assert query(database_url, "SELECT count(*) FROM conversation_owners") == [(0,)]


def test_an_unusable_model_is_named_by_its_variable(database_url, monkeypatch):
    monkeypatch.setenv("MEMORY_AGENT_MEMORY_MODEL", "anthropic:claude")
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    refused = run("demo", database_url=database_url)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr, refused.stderr
    assert refused.stderr.startswith("error: MEMORY_AGENT_MEMORY_MODEL='anthropic:claude'"), refused.stderr
    assert query(database_url, "SELECT count(*) FROM conversation_owners") == [(0,)]
