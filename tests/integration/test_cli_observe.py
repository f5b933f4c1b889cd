"""`memory-agent inspect | at | stats` against a database filled by conversations run through `with_memory`."""

from __future__ import annotations

import json
import re
from typing import Any

from typer.testing import CliRunner

from memory_agent.cli.main import app
from memory_agent.conversation.context import escape_memory_text
from tests.conftest import query
from tests.integration.test_observability import (
    SEED_TABLE,
    build_health_scenario,
    run_seed_conversation,
    split_seen,
)


def invoke(database_url: str, *args: str) -> Any:
    # A wide terminal so rich does not wrap the cells the tests look for.
    env = {"MEMORY_AGENT_DATABASE_URL": database_url, "COLUMNS": "250", "NO_COLOR": "1"}
    return CliRunner().invoke(app, list(args), env=env)


async def test_inspect_prints_the_version_chain(open_memory, database_url):
    await run_seed_conversation(open_memory)
    result = invoke(database_url, "inspect", "conv_123")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    for memory_id, start, end, base, status, covers in SEED_TABLE:
        row = next(line for line in lines if re.match(rf" *{memory_id} ", line))
        cells = re.split(r"\s{2,}", row.strip())  # columns are two spaces apart (no borders)
        assert cells[:6] == [
            str(memory_id),
            str(start),
            str(end),
            "null" if base is None else str(base),
            status,
            covers,
        ]
        assert cells[7].isdigit()  # generation ms
    assert "10 rounds, newest sequence 19; served now: memory 5 (seq 6-19)" in result.stdout
    assert "summary lag 0 messages (0 rounds)" in result.stdout

    result = invoke(database_url, "inspect", "conv_123", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert [
        (v["memory_id"], v["start_sequence"], v["end_sequence"], v["base_memory_id"], v["status"], v["covers"])
        for v in data["versions"]
    ] == SEED_TABLE
    texts = dict(query(database_url, "SELECT memory_id, memory_text FROM memory"))
    assert {v["memory_id"]: v["memory_text"] for v in data["versions"]} == texts
    assert (data["conversation"]["rounds"], data["conversation"]["summary_lag"]) == (10, 0)


async def test_at_shows_what_the_model_was_given(open_memory, database_url):
    _, chat = await run_seed_conversation(open_memory)
    for round_number in (4, 5, 10):
        result = invoke(database_url, "at", "conv_123", str(round_number), "--json")
        assert result.exit_code == 0, result.output
        data = json.loads(result.stdout)
        memory_text, texts = split_seen(chat.seen[round_number - 1])
        assert (escape_memory_text(data["memory"]["memory_text"]) if data["memory"] else None) == memory_text
        assert [m["content"] for m in data["messages"]] == texts
        assert data["messages"][-1]["part"] == "input"
        assert data["retrieval_path"] == ("raw" if memory_text is None else "memory+gap")
    assert data["memory"]["memory_id"] == 4 and data["gap"] == [16, 17] and data["input"] == [18, 18]

    result = invoke(database_url, "at", "conv_123", "5")
    assert result.exit_code == 0, result.output
    assert "path memory+gap, gap seq 6-7 (2 messages), input seq 8-8" in result.stdout
    assert "memory 1 (seq 0-5)" in result.stdout
    assert "[seq 5] assistant: reply 3" in result.stdout  # the memory text, in its panel
    assert "message 5" in result.stdout

    result = invoke(database_url, "at", "conv_123", "2")
    assert "No memory served" in result.stdout and "reply 1" in result.stdout


async def test_unknown_thread_and_round_exit_2(open_memory, database_url):
    await run_seed_conversation(open_memory)
    for args in (("inspect", "nope"), ("at", "nope", "1"), ("inspect", "nope", "--json")):
        result = invoke(database_url, *args)
        assert result.exit_code == 2
        assert "no conversation 'nope' is stored" in result.stderr
        assert result.stdout == ""
    result = invoke(database_url, "at", "conv_123", "11")
    assert result.exit_code == 2 and "10 stored round(s); round 11" in result.stderr


async def test_stats_reports_health_and_stuck_rows(open_memory, database_url):
    await build_health_scenario(open_memory)
    result = invoke(database_url, "stats", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    totals = data["totals"]
    assert (totals["rounds"], totals["completed"], totals["failed"], totals["processing"]) == (9, 1, 2, 1)
    assert totals["fallback_share"] == 0.7778 and totals["failure_rate"] == 0.6667
    assert [(c["conversation_id"], c["summary_lag"]) for c in data["conversations"]] == [("bad", 8), ("ok", 4)]
    assert {m["model_name"] for m in data["models"]} == {"gated-test-summarizer", "failing-test-summarizer"}
    assert data["stuck"] == [] and data["stuck_after_s"] == 300
    recent = data["last_hour"]  # everything above happened within the hour
    assert (recent["completed"], recent["failed"], recent["failure_rate"], recent["rounds"]) == (1, 2, 0.6667, 9)

    (processing_id,) = query(database_url, "SELECT memory_id FROM memory WHERE status = 'processing'")[0]
    result = invoke(database_url, "stats", "--json", "--stuck-after", "0")
    data = json.loads(result.stdout)
    assert [(s["conversation_id"], s["memory_id"]) for s in data["stuck"]] == [("ok", processing_id)]
    assert data["stuck"][0]["quiet_for"] >= 0

    result = invoke(database_url, "stats", "--stuck-after", "0", "--limit", "1")
    assert result.exit_code == 0, result.output
    for title in (
        "Memory health",
        "Last hour",
        "Conversations (most lagging first)",
        "Summarizer models",
        "Stuck processing rows",
    ):
        assert title in result.stdout
    assert "failing-test-summarizer" in result.stdout
    conversations = result.stdout.split("Conversations (most lagging first)")[1].split("Summarizer models")[0]
    assert "bad" in conversations and "│ ok " not in conversations  # --limit 1 keeps the most lagging
    result = invoke(database_url, "stats")
    assert "No stuck processing rows (quiet > 300s)." in result.stdout


ATTACKS = {
    "clipboard": "\x1b]52;c;ZWNobyBwd25lZA==\x07",  # OSC 52: write the clipboard
    "clear": "\x1b[2J\x1b[H",  # clear the screen
    "title": "\x1b]0;owned\x07",  # set the window title
    "c1": "\x9b31m",  # CSI as one C1 byte
}


async def test_control_sequences_in_stored_text_never_reach_the_terminal(open_memory, database_url):
    from langchain_core.messages import HumanMessage

    from memory_agent import with_memory
    from tests.support import EchoChat

    memory = await open_memory()
    app = with_memory(EchoChat().graph, memory)
    thread = "evil" + ATTACKS["title"]
    for n in range(3):
        text = f"hi {n} " + "".join(ATTACKS.values())
        await app.ainvoke({"messages": [HumanMessage(text)]}, {"configurable": {"thread_id": thread}})
    assert await memory.drain(timeout=10)
    for args in (
        ("inspect", thread),
        ("at", thread, "3"),
        ("stats",),
        ("inspect", thread, "--json"),
        ("at", thread, "3", "--json"),
    ):
        result = invoke(database_url, *args)
        assert result.exit_code == 0, result.output
        for forbidden in ("\x1b", "\x07", "\x9b"):
            assert forbidden not in result.stdout, (args, forbidden)
    shown = invoke(database_url, "at", thread, "3").stdout
    assert "\\x1b]52;c;" in shown  # shown, escaped, not executed
