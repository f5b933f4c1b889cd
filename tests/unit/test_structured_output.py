"""Reading structured output leniently, and which provider errors refuse a way of asking (llm/structured.py)."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage

from memory_agent.llm.structured import arguments, lenient_json, refuses_method


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"summary": "a"}', {"summary": "a"}),
        ('Here it is:\n```json\n{"summary": "a {b}"}\n```\nAnything else?', {"summary": "a {b}"}),
        ('{"summary": "two\nlines"}', {"summary": "two\nlines"}),  # a raw newline inside a string
        ("[1, 2]", None),
        ("no object here", None),
        ('{"summary": ', None),
        ('{"summary": "a", "facts": ' + "[" * 100_000 + "]" * 100_000 + "}", None),  # nested past the stack
    ],
)
def test_lenient_json(text, expected):
    assert lenient_json(text) == expected


def test_a_tool_call_wins_over_text():
    answer = AIMessage(
        content='{"summary": "text"}',
        tool_calls=[{"name": "MemorySummaryOutput", "args": {"summary": "tool"}, "id": "1"}],
    )
    assert arguments(answer) == {"summary": "tool"}
    assert arguments(AIMessage(content='```\n{"summary": "text"}\n```')) == {"summary": "text"}


class StatusError(Exception):
    def __init__(self, status: int, message: str = "refused") -> None:
        super().__init__(message)
        self.status_code = status


def test_which_errors_refuse_a_way_of_asking():
    assert (
        refuses_method(StatusError(400)) and refuses_method(StatusError(422)) and refuses_method(NotImplementedError())
    )
    # The moment, the key or the prompt's length: another way of asking would fail the same.
    for error in (StatusError(500), StatusError(429), StatusError(401), TimeoutError()):
        assert not refuses_method(error)
    assert not refuses_method(StatusError(400, "context_length_exceeded: too long"))
