"""Reading a model's answer for a schema's arguments: a tool call's, else the JSON object in its text, read
leniently (code fences, prose and a reasoning model's thinking around it are passed over), what it answered,
shortened, for an error, and why a client could not read an answer at all (one not of its API's shape). The answer
is untrusted input: the caller validates what is read here."""

from __future__ import annotations

import json
import re
from types import TracebackType
from typing import Any

from langchain_core.outputs import LLMResult
from pydantic import ValidationError

# A reasoning model's thinking (deepseek-r1, qwen3 through Ollama or an OpenAI-compatible server) opens its text,
# before the answer, and may hold braces or a draft of the object. Matched at the start only: one pass, whatever
# the text holds.
_THINKING = re.compile(r"\s*<(think|thinking|reasoning)>.*?</\1>", re.DOTALL | re.IGNORECASE)
MAX_JSON_STARTS = 64  # the `{` an answer's object is looked for at
_DECODER = json.JSONDecoder(strict=False)  # strict=False: raw newlines inside strings


def _echoed_schema(value: dict[str, Any]) -> bool:
    """A JSON schema (an object's type and properties) written before the answer: a small model repeats the
    schema it was shown, then answers."""
    return value.get("type") == "object" and isinstance(value.get("properties"), dict)


def lenient_json(text: str) -> dict[str, Any] | None:
    """The JSON object in a model's text: the first that parses from one of its `{` (a code fence or sentences
    around it are passed over, braces in them included) and is neither empty nor an echo of a JSON schema, a
    reasoning model's thinking left out; None when there is none."""
    thinking = _THINKING.match(text)
    text = text[thinking.end() if thinking else 0 :].strip()
    start = text.find("{")
    for _ in range(MAX_JSON_STARTS):  # bounded: each try may read to the end of a long garbage answer
        if start < 0:
            break
        try:
            value, end = _DECODER.raw_decode(text, start)
        except ValueError:
            value, end = None, start + 1
        except RecursionError:  # nested past the interpreter's stack: so is every object inside it
            return None
        if isinstance(value, dict) and value and not _echoed_schema(value):  # `{}` in prose is no answer
            return value
        # Past a whole schema (its braces are not the answer's), else past this brace.
        start = text.find("{", end if isinstance(value, dict) else start + 1)
    return None


def arguments(answer: Any, name: str | None = None) -> dict[str, Any] | None:
    """The schema's arguments in an answer: its tool call named `name` (the schema's), else its first tool call's,
    else a JSON object in its text. A small model may call a tool it was not offered before the one it was."""
    calls = [call for call in getattr(answer, "tool_calls", None) or [] if isinstance(call.get("args"), dict)]
    chosen = [call for call in calls if call.get("name") == name] or calls
    if chosen:
        return dict(chosen[0]["args"])
    text = getattr(answer, "text", None)
    if text is None:
        text = getattr(answer, "content", answer)
    return lenient_json(str(text or ""))


def unwrapped(args: dict[str, Any], name: str) -> dict[str, Any]:
    """The schema's arguments when a model wrote them as a call of it in its text (`{"name": "<schema>",
    "arguments": {...}}`, as small models imitate tool calling) or under the schema's name; else `args`."""
    inner = args.get(name) if len(args) == 1 else None
    if inner is None and args.get("name") == name and len(args) == 2:
        inner = args.get("arguments", args.get("parameters"))
    return dict(inner) if isinstance(inner, dict) else args


def shown(answer: Any) -> str:
    """What a model answered, shortened, for an error."""
    invalid = getattr(answer, "invalid_tool_calls", None) or []
    value = invalid[0].get("args") if invalid else getattr(answer, "content", answer)
    # A refusal leaves no content: OpenAI's says why in `refusal`, Anthropic's in its stop reason.
    refusal = (getattr(answer, "additional_kwargs", None) or {}).get("refusal")
    metadata = getattr(answer, "response_metadata", None) or {}
    stop = metadata.get("stop_reason")
    if refusal:
        return f"the model refused: {str(refusal)[:200]!r}"
    if stop == "refusal":
        return "the model refused (stop_reason refusal)"
    # An answer cut at the model's output limit holds half an object, one a content filter withheld nothing: said,
    # as the raw text alone reads as garbage (OpenAI's finish_reason, Anthropic's stop_reason, Ollama's done_reason).
    said = repr(str(value or "")[:200])
    for (field, reason), why in _STOPPED.items():
        if metadata.get(field) == reason:
            return f"{said} ({why}: {field} {reason})"
    return said


_CUT, _FILTERED = "cut at the model's output limit", "withheld by the provider's content filter"
_STOPPED = {
    ("finish_reason", "length"): _CUT,
    ("stop_reason", "max_tokens"): _CUT,
    ("done_reason", "length"): _CUT,
    ("finish_reason", "content_filter"): _FILTERED,
}
# What openai's parse of a JSON-schema answer raises for such an answer (an answer without the object, not an error).
_STOPPED_ERRORS = {
    "LengthFinishReasonError": f"{_CUT} (finish_reason length)",
    "ContentFilterFinishReasonError": f"{_FILTERED} (finish_reason content_filter)",
}


# What a client raises reading an answer not of its API's shape (a field missing, a string where a list of blocks
# or an object belongs, a body that is no JSON, or JSON nested past the interpreter's stack): the integration's own
# reading code fails on it, in its words.
_READING_ERRORS = (TypeError, KeyError, AttributeError, IndexError, ValueError, RecursionError)
# What a client raises once a streamed answer (HTTP 200) ended without a chunk: its stream is read by then, so the
# response is no longer on the stack. In its words: langchain-ollama's.
_NOTHING_STREAMED = ("No data received from Ollama stream",)


def _received(traceback: TracebackType | None) -> tuple[bool, str | None]:
    """Whether the frames an error went through held a successful HTTP response or the result read from one (the
    answer had arrived: the client failed reading it, not asking), and its body when it was read whole. The response is looked for by its traits,
    as each provider's SDK has a response class of its own (some under `http_response`)."""
    found, body = False, None
    while traceback is not None:
        for value in list(traceback.tb_frame.f_locals.values()):
            # The client's result, read: what failed after it read an answer without a message (no choice).
            found = found or isinstance(value, LLMResult)
            for candidate in (value, getattr(value, "http_response", None)):
                status = getattr(candidate, "status_code", None)
                if not (isinstance(status, int) and 200 <= status < 300 and hasattr(candidate, "headers")):
                    continue
                found = True
                try:
                    text = candidate.text  # type: ignore[union-attr]
                except Exception:  # a streamed body, not read whole
                    text = None
                body = body or (text if isinstance(text, str) else None)
        traceback = traceback.tb_next
    return found, body


def unreadable(exc: BaseException, client: str) -> str | None:
    """Why an answer could not be read, when `exc`, raised by the chat model `client` while asking, failed on an
    answer that arrived (HTTP 2xx) not of its API's shape: the client's error, and the answer, shortened, when at
    hand. None for anything else (an HTTP error, the network, a request refused before it was sent)."""
    if type(exc).__name__ in _STOPPED_ERRORS:
        return f"its answer was {_STOPPED_ERRORS[type(exc).__name__]}"
    if not isinstance(exc, _READING_ERRORS) or getattr(exc, "status_code", None) is not None:
        return None
    received, body = _received(exc.__traceback__)
    if not received and not str(exc).startswith(_NOTHING_STREAMED):
        return None
    if isinstance(exc, ValidationError):  # pydantic's: the fields, without its help links
        why = f"{exc.title} " + "; ".join(
            f"{'.'.join(map(str, e['loc']))}: {e['msg']}" if e["loc"] else e["msg"] for e in exc.errors()
        )
    else:
        why = f"{type(exc).__name__}: {exc}"
    why = why.replace("\n", " ")[:300]
    raw = f"; raw: {body[:200]!r}" if body else ""
    return f"its answer was not of the expected shape ({client} could not read it: {why}){raw}"
