"""`inspect`, `stats`, `at` and `summaries` read at 80 and 120 columns: every line fits, a version row takes at most
two lines, no column of the health tables is cut, durations read as durations, null is spelled one way."""

from __future__ import annotations

import re

import pytest
from typer.testing import CliRunner

from memory_agent.cli.main import app
from memory_agent.cli.output import human_duration
from tests.integration.test_observability import run_seed_conversation


def invoke(database_url: str, width: int, *args: str) -> str:
    env = {"MEMORY_AGENT_DATABASE_URL": database_url, "COLUMNS": str(width), "NO_COLOR": "1"}
    result = CliRunner().invoke(app, list(args), env=env)
    assert result.exit_code == 0, result.output
    too_wide = [line for line in result.stdout.splitlines() if len(line) > width]
    assert too_wide == [], f"{args} at {width} columns"
    return result.stdout


def test_human_durations():
    assert human_duration(3.25) == "3.2 s"
    assert human_duration(42) == "42 s"
    assert human_duration(353) == "5 min 53 s"
    assert human_duration(3 * 3600 + 300) == "3 h 5 min"
    assert human_duration(38999838.0) == "451 days"


@pytest.mark.parametrize("width", [80, 120])
async def test_the_observability_commands_fit_the_terminal(open_memory, database_url, width):
    await run_seed_conversation(open_memory)
    inspected = invoke(database_url, width, "inspect", "conv_123")
    header = next(line for line in inspected.splitlines() if line.lstrip().startswith("id"))
    assert "error" not in header  # no version failed: no empty error column
    rows = [line for line in inspected.splitlines() if re.match(r" *\d+ +\d+ +\d+ ", line)]
    assert len(rows) == 5
    assert len(inspected.split(header, 1)[1].splitlines()) <= 1 + 2 * 5 + 2  # rule, rows of <= 2 lines, summary
    assert "None" not in inspected and "null" in inspected

    stats = invoke(database_url, width, "stats")
    assert not re.search(r"\d+\.\ds\b", stats)  # durations are human: "6 min 2 s", never "362.0s"
    conversation_header = next(line for line in stats.splitlines() if line.lstrip().startswith("conversation "))
    for column in ("rounds", "lag", "served", "age", "done", "failed"):
        assert f" {column} " in conversation_header + " "
    if width >= 120:  # every column at 120
        assert conversation_header.rstrip().endswith("stuck") and "(--json for every column)" not in stats

    at = invoke(database_url, width, "at", "conv_123", "5")
    assert "round 5" in at

    summaries = invoke(database_url, width, "summaries")
    assert summaries.strip() == "No weekly summaries."
