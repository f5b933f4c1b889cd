"""The README documents every setting and the two commands."""

from pathlib import Path

from memory_agent.settings import MemorySettings

README = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")


def test_every_setting_is_documented():
    missing = [name for name in MemorySettings.model_fields if f"MEMORY_AGENT_{name.upper()}" not in README]
    assert missing == []


def test_the_two_commands_are_shown():
    assert "make demo" in README and "make test" in README


def python_blocks() -> list[str]:
    blocks, inside, lines = [], False, []
    for line in README.splitlines():
        if line.strip() == "```python":
            inside, lines = True, []
        elif inside and line.strip() == "```":
            inside = False
            blocks.append("\n".join(lines))
        elif inside:
            lines.append(line)
    return blocks


def test_readme_python_snippets_compile():
    import ast

    blocks = python_blocks()
    assert blocks
    for block in blocks:  # top-level `async with` / `await` as in a notebook or an async main
        compile(block, "README.md", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)


def test_readme_snippets_import_what_exists():
    import importlib
    import re

    for block in python_blocks():
        for module, names in re.findall(r"^from (memory_agent[\w.]*) import ([\w, ]+)$", block, re.M):
            imported = importlib.import_module(module)
            for name in (n.strip() for n in names.split(",")):
                assert hasattr(imported, name), f"README imports {name} from {module}, which has no such name"
