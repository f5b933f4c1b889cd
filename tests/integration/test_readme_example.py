"""The README's example runs as a newcomer runs it: its code as written, offline (FakeOpenAI over real HTTP for
the chat model and the summarizer) on the test's PostgreSQL through MEMORY_AGENT_DATABASE_URL."""

from __future__ import annotations

import re
from pathlib import Path

from tests.conftest import query

README = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")


def example_code() -> str:
    section = README.split("\n## Example\n", 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match, "the README's Example section has no python block"
    return match.group(1)


def test_the_readme_example_runs(fake_openai, database_url, monkeypatch, capsys):
    monkeypatch.setenv("MEMORY_AGENT_DATABASE_URL", database_url)
    code = example_code()
    assert len(code.strip().splitlines()) <= 16, "the README promises a short example"
    exec(compile(code, "README.md", "exec"), {"__name__": "readme_example"})
    assert capsys.readouterr().out.strip() == "echo: I'm allergic to peanuts."
    rows = query(
        database_url,
        "SELECT user_id, role, content FROM messages WHERE conversation_id = 'conv-1' ORDER BY sequence_number",
    )
    assert rows == [
        ("maya", "user", "I'm allergic to peanuts."),
        ("maya", "assistant", "echo: I'm allergic to peanuts."),
    ]
