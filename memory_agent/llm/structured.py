"""Structured output from any chat model, degrading instead of failing: the one way summaries and consolidation ask
a model for a schema's arguments.

Three methods, in order: tool calling (one tool, the schema, which the model must call), the provider's JSON-schema
response format (`with_structured_output(method="json_schema")`), and JSON in plain text (the schema in the prompt,
the answer parsed leniently: code fences and prose around the object are ignored). A method the provider refuses
(HTTP 400/404/405/415/422/501, or a client that cannot send it) or that answers nothing usable is passed over for
the next; the first that works is remembered for that model object, so later calls make one request, and a
refused method is not asked again of that model (the remembered one included, should the provider start refusing
it: the next is tried and remembered). The answer
is untrusted input: the caller validates the arguments (a garbage answer is an error recorded on its row).

`terse=True` sends the schema as `terse_tool` makes it: types, required fields and bounds, no descriptions, titles
or defaults (the prompt explains the fields). A schema is input billed with every call; the validation on our side
stays the pydantic model's, whole.
"""

from __future__ import annotations

import json
import logging
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, HumanMessage
from pydantic import BaseModel

from memory_agent.errors import SummarizationError
from memory_agent.llm.calls import model_name

logger = logging.getLogger("memory_agent")

Method = Literal["tools", "json_schema", "text"]
METHODS: tuple[Method, ...] = ("tools", "json_schema", "text")
# Statuses that refuse the request's shape (an unknown parameter, an unsupported feature), not its moment.
REFUSING_STATUS = frozenset({400, 404, 405, 415, 422, 501})
TEXT_INSTRUCTION = (
    "Answer with one JSON object and nothing else: no prose, no code fence. It must match this JSON schema:\n{schema}"
)


_DOCUMENTING = frozenset({"description", "title", "default", "examples"})


def _terse(node: Any) -> Any:
    """A JSON schema without what only documents it; `anyOf [X, null]` (an optional field) as X."""
    if isinstance(node, list):
        return [_terse(value) for value in node]
    if not isinstance(node, dict):
        return node
    options = node.get("anyOf")
    if isinstance(options, list) and len(options) == 2 and {"type": "null"} in options:
        present = next(option for option in options if option != {"type": "null"})
        return _terse({**present, **{key: value for key, value in node.items() if key != "anyOf"}})
    return {
        key: (_terse(value) if key not in ("properties", "$defs") else {k: _terse(v) for k, v in value.items()})
        for key, value in node.items()
        if key not in _DOCUMENTING
    }


def terse_tool(schema: type[BaseModel], description: str) -> dict[str, Any]:
    """`schema` as one OpenAI-format function, its JSON schema stripped to types, required fields and bounds, the
    item shapes it repeats defined once (`$defs`); `description`: the function's, in one line."""
    parameters = _terse(schema.model_json_schema())
    return {
        "type": "function",
        "function": {"name": schema.__name__, "description": description, "parameters": parameters},
    }


@dataclass
class _Known:
    """What calls taught about one model object: the method that worked, the methods its provider refused."""

    model: weakref.ref[Any]
    method: Method | None = None
    refused: dict[Method, str] = field(default_factory=dict)  # the method -> why


# id(model) -> what is known of it, forgotten with the model.
_known: dict[int, _Known] = {}


def _knowledge(model: BaseChatModel) -> _Known:
    key = id(model)
    known = _known.get(key)
    if known is None or known.model() is not model:
        known = _Known(weakref.ref(model, lambda _: _known.pop(key, None)))
        _known[key] = known
    return known


def learned_method(model: BaseChatModel) -> Method | None:
    """The method that last worked for `model`, if any."""
    known = _known.get(id(model))
    return known.method if known is not None and known.model() is model else None


def status_of(exc: BaseException) -> int | None:
    """The HTTP status a model client's error carries (openai, anthropic and ollama name it status_code)."""
    status = getattr(exc, "status_code", None)
    if status is None:
        status = getattr(getattr(exc, "response", None), "status_code", None)
    return status if isinstance(status, int) else None


def refuses_method(exc: BaseException) -> bool:
    """Whether `exc` says the provider cannot serve this way of asking (the next method may work)."""
    if isinstance(exc, NotImplementedError):
        return True
    if "context_length" in str(exc) or "maximum context" in str(exc):
        return False  # too long a prompt is too long whatever the method
    return status_of(exc) in REFUSING_STATUS


def lenient_json(text: str) -> dict[str, Any] | None:
    """The JSON object in a model's text: the whole text, else the span from its first `{` to its last `}` (a code
    fence or a sentence around it); None when there is none."""
    text = text.strip()
    candidates = [text]
    start, end = text.find("{"), text.rfind("}")
    if 0 <= start < end:
        candidates.append(text[start : end + 1])
    for candidate in candidates:
        try:
            value = json.loads(candidate, strict=False)  # strict=False: raw newlines inside strings
        except (ValueError, RecursionError):  # RecursionError: arrays nested past the interpreter's stack
            continue
        if isinstance(value, dict):
            return value
    return None


def arguments(answer: Any) -> dict[str, Any] | None:
    """The schema's arguments in an answer: its first tool call's, else a JSON object in its text."""
    for call in getattr(answer, "tool_calls", None) or []:
        if isinstance(call.get("args"), dict):
            return dict(call["args"])
    text = getattr(answer, "text", None)
    if text is None:
        text = getattr(answer, "content", answer)
    return lenient_json(str(text or ""))


def shown(answer: Any) -> str:
    """What a model answered, shortened, for an error."""
    invalid = getattr(answer, "invalid_tool_calls", None) or []
    value = invalid[0].get("args") if invalid else getattr(answer, "content", answer)
    return repr(str(value or "")[:200])


def _order(learned: Method | None, refused: dict[Method, str]) -> list[Method]:
    """The methods to try: the learned one first, then (should the provider refuse it now) the rest it has not
    refused, in order."""
    rest = [method for method in METHODS if method not in refused and method != learned]
    return [learned, *rest] if learned is not None else rest


@dataclass(frozen=True)
class StructuredAnswer:
    """The arguments a model gave, its raw answer (for its usage), and the method that got them."""

    args: dict[str, Any]
    raw: Any
    method: Method


Noter = Callable[[Any, Sequence[BaseMessage]], None]


class StructuredCaller:
    """Asks `model` for `schema`'s arguments by the first method that works (the module docstring)."""

    def __init__(self, model: BaseChatModel, schema: type[BaseModel], *, tool: dict[str, Any] | None = None) -> None:
        self.model = model
        self.schema = schema
        # What is sent: `tool` (an OpenAI-format function, e.g. terse_tool's) when given, else the model whole.
        self.tool: Any = tool if tool is not None else schema
        self.name = model_name(model)
        self._runnables: dict[Method, Any] = {}

    def _runnable(self, method: Method) -> Any:
        if method not in self._runnables:
            if method == "tools":
                self._runnables[method] = self.model.bind_tools([self.tool], tool_choice="any")
            elif method == "json_schema":
                self._runnables[method] = self.model.with_structured_output(
                    self._json_schema(), method="json_schema", include_raw=True
                )
            else:
                self._runnables[method] = self.model
        return self._runnables[method]

    def _json_schema(self) -> Any:
        """The schema as the JSON-schema response format takes it: a titled JSON schema, or the model."""
        if not isinstance(self.tool, dict):
            return self.schema
        function = self.tool["function"]
        return {"title": function["name"], "description": function["description"], **function["parameters"]}

    def _messages(self, method: Method, messages: Sequence[BaseMessage]) -> list[BaseMessage]:
        if method != "text":
            return list(messages)
        sent = self.tool["function"]["parameters"] if isinstance(self.tool, dict) else self.schema.model_json_schema()
        schema = json.dumps(sent, ensure_ascii=False)
        return [*messages, HumanMessage(TEXT_INSTRUCTION.format(schema=schema))]

    async def ainvoke(
        self, messages: Sequence[BaseMessage], *, config: dict[str, Any] | None = None, note: Noter | None = None
    ) -> StructuredAnswer:
        """The arguments of the first method that works; `note(answer, prompt)` is told of every answered call.
        Raises the provider's error when it is not a refusal of the method (a timeout, a 500, a 401), and
        SummarizationError when no method got an answer holding a JSON object."""
        known = _knowledge(self.model)
        learned = known.method
        refusals = [f"{method} (refused earlier): {why}" for method, why in known.refused.items()]
        for method in _order(learned, known.refused):
            try:
                runnable = self._runnable(method)
            except Exception as exc:  # the client has no such method (NotImplementedError, an unknown argument)
                known.refused[method] = f"{type(exc).__name__}: {exc}"[:300]
                refusals.append(f"{method}: {known.refused[method]}")
                continue
            prompt = self._messages(method, messages)
            try:
                answer = await runnable.ainvoke(prompt, config=config)
            except Exception as exc:
                if method == "text" or not refuses_method(exc):
                    raise
                # The learned method refused too (the model behind a proxy changed): the next ones are tried.
                learned = known.method = None
                known.refused[method] = f"{type(exc).__name__}: {exc}"[:300]
                refusals.append(f"{method}: {known.refused[method]}")
                logger.info(
                    "Model %r refused structured output by %s (%s); trying the next way", self.name, method, exc
                )
                continue
            raw = answer.get("raw") if isinstance(answer, dict) else answer
            if note is not None:
                note(raw, prompt)
            args = arguments(raw)
            if args is None:
                refusals.append(f"{method}: no {self.schema.__name__} in the answer; raw: {shown(raw)}")
                if learned is not None:
                    break  # a method that worked answered badly once: this call failed, not the method
                continue
            known.method = method
            return StructuredAnswer(args, raw, method)
        raise SummarizationError(
            f"model {self.name!r} returned unparseable output (no {self.schema.__name__}): " + " | ".join(refusals)
        )
