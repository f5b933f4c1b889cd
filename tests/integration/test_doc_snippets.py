"""Every Python block of README.md and docs/ runs as written, in a fresh interpreter, against the test database
and a local OpenAI-compatible server; a block that cannot (a fragment, a module a server loads) is marked with
`<!-- not run: <reason> -->` on the line above it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BLOCK = re.compile(r"(?:<!--\s*not run:(?P<reason>[^>]*)-->\n)?```python\n(?P<code>.*?)```", re.DOTALL)


def blocks() -> list[tuple[str, str, str | None]]:
    """(where, code, the reason it is not run) of every Python block."""
    found = []
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        text = page.read_text(encoding="utf-8")
        for match in BLOCK.finditer(text):
            line = text[: match.start("code")].count("\n")
            reason = match.group("reason")
            found.append((f"{page.relative_to(ROOT)}:{line}", match.group("code"), reason and reason.strip()))
    return found


BLOCKS = blocks()
RUN = [(where, code) for where, code, reason in BLOCKS if reason is None]


def test_every_block_runs_or_says_why_not():
    assert len(RUN) >= 5  # README, wrap-a-graph, agents, store, the settings reference
    for where, _, reason in BLOCKS:
        assert reason is None or len(reason) > 10, f"{where}: say why the block is not run"


@pytest.mark.parametrize(("where", "code"), RUN, ids=[where for where, _ in RUN])
def test_the_block_runs(where, code, fake_openai, database_url, tmp_path):
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "MEMORY_AGENT_DATABASE_URL": database_url,
        "OPENAI_BASE_URL": fake_openai.base_url,
        "OPENAI_API_KEY": "test-key",
    }
    script = tmp_path / "snippet.py"
    script.write_text(code, encoding="utf-8")
    run = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path
    )
    assert run.returncode == 0, f"{where}:\n{run.stderr[-3000:]}"
