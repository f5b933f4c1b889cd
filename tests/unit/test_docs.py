"""The README documents every setting and the two commands."""

from pathlib import Path

from memory_agent.settings import MemorySettings

README = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")


def test_every_setting_is_documented():
    missing = [name for name in MemorySettings.model_fields if f"MEMORY_AGENT_{name.upper()}" not in README]
    assert missing == []


def test_the_two_commands_are_shown():
    assert "make demo" in README and "make test" in README
