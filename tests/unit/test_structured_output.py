"""Reading structured output leniently, and which provider errors refuse a way of asking (llm/answers.py, llm/structured.py)."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage

from memory_agent.llm.answers import arguments, lenient_json, unwrapped
from memory_agent.llm.structured import refuses_method


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
        # Braces in the prose around the object, a second object, a reasoning model's thinking before it.
        ('{"summary": "a"}\nI left the {placeholders} out.', {"summary": "a"}),
        ('Sure {ok}, the memory: {"summary": "a"}', {"summary": "a"}),
        ('{"summary": "a"}\n{"summary": "b"}', {"summary": "a"}),
        ('<think>I will answer {"summary": "draft"}</think>\n```json\n{"summary": "a"}\n```', {"summary": "a"}),
        ('{"summary": "café — 東京 😀"}', {"summary": "café — 東京 😀"}),
        # The schema echoed before the answer (a small model repeats what it was shown): the answer is read.
        (
            'The schema: {"type": "object", "properties": {"summary": {"type": "string"}}, "required": ["summary"]}'
            '\nMy answer: {"summary": "a"}',
            {"summary": "a"},
        ),
        ('{"type": "object", "properties": {"summary": {"type": "string"}}}', None),
        # An empty object in the prose before the answer is no answer (before: taken, and the summary failed).
        ('Starting from {} as the previous memory: {"summary": "a"}', {"summary": "a"}),
        ("{}", None),
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


def test_the_call_of_the_schema_wins_over_a_call_of_a_tool_not_offered():
    """A small model calling a tool it was not offered before the schema's (before: the first call's arguments
    were taken, and the summary failed: `summary` missing)."""
    answer = AIMessage(
        content="",
        tool_calls=[
            {"name": "search", "args": {"query": "tea"}, "id": "1"},
            {"name": "MemorySummaryOutput", "args": {"summary": "tool"}, "id": "2"},
        ],
    )
    assert arguments(answer, "MemorySummaryOutput") == {"summary": "tool"}
    assert arguments(answer, "Other") == {"query": "tea"}  # none of its name: the first, as before


def test_garbage_of_any_size_is_read_in_bounded_time():
    for garbage in ("<think>" * 100_000, "{" * 200_000, '{"a": 1' * 100_000, '{"a":' * 50_000):
        assert lenient_json(garbage) is None


def test_a_call_written_in_text_is_unwrapped():
    args = {"summary": "a"}
    assert unwrapped({"name": "MemorySummaryOutput", "arguments": args}, "MemorySummaryOutput") == args
    assert unwrapped({"MemorySummaryOutput": args}, "MemorySummaryOutput") == args
    assert unwrapped({"name": "x", "arguments": args}, "MemorySummaryOutput") == {"name": "x", "arguments": args}
    assert unwrapped(args, "MemorySummaryOutput") == args


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
    # The same in other providers' words: a long prompt must not refuse tool calling for good.
    for message in (
        "prompt is too long: 210000 tokens > 200000 maximum",  # Anthropic
        "the request exceeds the available context size, try increasing it",  # llama.cpp
        "Input validation error: too many input tokens",  # text-generation-inference
        "This model's maximum context length is 4096 tokens",  # vLLM
    ):
        assert not refuses_method(StatusError(400, message))
    # A model the server does not have (yet): no way of asking is refused for good.
    for message in (
        "model 'llama3.1' not found, try pulling it first",  # Ollama
        "The model `gpt-5-mini` does not exist or you do not have access to it.",  # OpenAI
    ):
        assert not refuses_method(StatusError(404, message))
    assert refuses_method(StatusError(404, "Not Found"))  # no such route: the way of asking is not served
    # One bad tool call (Groq's 400 tool_use_failed) is that answer's failure, not tool calling refused for good.
    message = "Failed to call a function. Please adjust your prompt. See 'failed_generation' for more details."
    assert not refuses_method(
        StatusError(400, f"Error code: 400 - {{'code': 'tool_use_failed', 'message': '{message}'}}")
    )
    # A server error naming the way of asking as unsupported (llama.cpp without --jinja) refuses it; others do not.
    assert refuses_method(StatusError(500, "Error code: 500 - tools param requires --jinja flag"))
    assert refuses_method(StatusError(500, "Unsupported param: tools"))
    assert refuses_method(StatusError(500, "response_format is not supported by this backend"))
    for message in ("upstream exploded", "CUDA error: out of memory", "tools failed: worker crashed"):
        assert not refuses_method(StatusError(500, message))
    assert not refuses_method(StatusError(503, "tools not supported while loading"))
