"""Structured output from any chat model, degrading instead of failing: the one way summaries and consolidation ask
a model for a schema's arguments.

Three methods, in order: tool calling (one tool, the schema, which the model must call), the provider's JSON-schema
response format (`with_structured_output(method="json_schema")`), and JSON in plain text (the schema in the prompt,
the answer parsed leniently: code fences and prose around the object are ignored). A method the provider refuses
(HTTP 400/404/405/415/422/501, a 500 naming it unsupported, or a client that cannot send it) or that answers nothing usable is passed over for
the next; the first that works is remembered for that model object, so later calls make one request, and a
refused method is not asked again of that model (the remembered one included, should the provider start refusing
it: the next is tried and remembered). A remembered method that answers without an object MISSES_TO_FORGET calls in
a row is forgotten, and every method not refused is asked again. The answer
is untrusted input: the caller validates the arguments (a garbage answer is an error recorded on its row).

`terse=True` sends the schema as `terse_tool` makes it: types, required fields and bounds, no descriptions, titles
or defaults (the prompt explains the fields). A schema is input billed with every call; the validation on our side
stays the pydantic model's, whole.
"""

from __future__ import annotations

import json
import logging
import re
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, HumanMessage
from pydantic import BaseModel

from memory_agent.errors import SummarizationError
from memory_agent.llm.answers import arguments, shown, unreadable, unwrapped
from memory_agent.llm.calls import model_name, scrub, secrets_of, within_bound

logger = logging.getLogger("memory_agent")

Method = Literal["tools", "json_schema", "text"]
METHODS: tuple[Method, ...] = ("tools", "json_schema", "text")
# Statuses that refuse the request's shape (an unknown parameter, an unsupported feature), not its moment.
REFUSING_STATUS = frozenset({400, 404, 405, 415, 422, 501})
# A server error that names the way of asking as unsupported refuses it too: llama.cpp's server answers HTTP 500
# "tools param requires --jinja flag" (or "Unsupported param: tools") to every request offering tools.
# A prompt over the model's context, in each provider's words: OpenAI and vLLM ("context_length_exceeded", "maximum
# context length"), Anthropic ("prompt is too long"), llama.cpp ("exceeds the available context size"), others.
_TOO_LONG = re.compile(
    r"context[_ ](length|size|window)|maximum context|prompt is too long|too many (input )?tokens|input is too long",
    re.IGNORECASE,
)
# A model the server does not have (OpenAI's 404 "model_not_found", Ollama's "model 'x' not found, try pulling it
# first"): no way of asking works until it is there, and once it is, each must be tried again.
_NO_MODEL = re.compile(r"model_not_found|model\b.{0,120}\b(not found|does not exist)", re.IGNORECASE)
# The model called the tool badly this once (Groq's HTTP 400 "tool_use_failed"): tool calling is served.
_BAD_GENERATION = re.compile(r"tool_use_failed|failed to call a function", re.IGNORECASE)
_REFUSING_TEXT = re.compile(
    r"\b(tools?|tool_choice|response_format|json_schema)\b.{0,40}\b(requires|unsupported|not supported)\b"
    r"|\b(unsupported|not supported|does not support)\b.{0,40}\b(tools?|tool_choice|response_format|json_schema)\b",
    re.IGNORECASE,
)
MISSES_TO_FORGET = 3
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
    # Once every method answered without an object (a model answering garbage), later calls ask by the first of
    # them alone, as by a learned method: one call a try, not one per method (until a method works or is refused).
    unparsed: Method | None = None
    # Calls in a row the remembered method (learned or unparsed) answered without an object. At MISSES_TO_FORGET it
    # is forgotten: another model behind the same address may ignore that way and serve another.
    misses: int = 0


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
    said = str(exc)[:1000]
    if _TOO_LONG.search(said) or _NO_MODEL.search(said) or _BAD_GENERATION.search(said):
        return False  # not about the way of asking: it must not count as refusing one for good
    status = status_of(exc)
    return status in REFUSING_STATUS or (status == 500 and _REFUSING_TEXT.search(said) is not None)


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

    def __init__(
        self,
        model: BaseChatModel,
        schema: type[BaseModel],
        *,
        tool: dict[str, Any] | None = None,
        timeout_s: float | None = None,
    ) -> None:
        self.model = model
        self.schema = schema
        # Each model call's bound (None: the caller bounds the whole, as a summary's attempt does).
        self.timeout_s = timeout_s
        # What is sent: `tool` (an OpenAI-format function, e.g. terse_tool's) when given, else the model whole.
        self.tool: Any = tool if tool is not None else schema
        self.name = model_name(model)
        self.secrets = secrets_of(model)  # kept out of the errors it raises
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
        learned = known.method or known.unparsed
        answered: list[Method] = []  # the methods that answered without an object, in this call
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
                answer = await within_bound(runnable.ainvoke(prompt, config=config), self.timeout_s, self.name)
            except TimeoutError:
                raise  # the call's bound (or its caller's): not a refusal of this way of asking
            except Exception as exc:
                scrub(exc, self.secrets)
                # An answer its client could not read (not of its API's shape) is garbage, as one without the
                # object is: this way answered, badly. Neither the provider's error nor a bug (raised as it is).
                why = unreadable(exc, type(self.model).__name__)
                if why is None and (method == "text" or not refuses_method(exc)):
                    raise
                if why is None:
                    # The learned method refused too (the model behind a proxy changed): the next ones are tried.
                    learned = known.method = known.unparsed = None
                    known.refused[method] = f"{type(exc).__name__}: {exc}"[:300]
                    refusals.append(f"{method}: {known.refused[method]}")
                    logger.info(
                        "Model %r refused structured output by %s (%s); trying the next way",
                        self.name,
                        method,
                        known.refused[method],
                    )
                    continue
            else:
                raw = answer.get("raw") if isinstance(answer, dict) else answer
                if note is not None:
                    note(raw, prompt)
                args = arguments(raw, self.schema.__name__)
                if args is not None and method == "text":
                    args = unwrapped(args, self.schema.__name__)
                if args is not None:
                    known.method, known.unparsed, known.misses = method, None, 0
                    return StructuredAnswer(args, raw, method)
                why = f"no {self.schema.__name__} in the answer; raw: {shown(raw)}"
            refusals.append(f"{method}: {why}")
            if learned is not None:
                # A method that worked answered badly: this call failed, not the method, unless it keeps doing so
                # (the model behind the address swapped for one that ignores it): then every way is asked again.
                known.misses += 1
                if known.misses >= MISSES_TO_FORGET:
                    known.method = known.unparsed = None
                    known.misses = 0
                break
            answered.append(method)
        if answered and learned is None:
            known.unparsed = answered[0]
        # The answers quoted can hold the key too (a gateway's 200 page echoing the request's headers).
        raise scrub(
            SummarizationError(
                f"model {self.name!r} returned unparseable output (no {self.schema.__name__}): " + " | ".join(refusals)
            ),
            self.secrets,
        )
