"""One model call as memory_agent records it (LLMCall), the log of the calls a job made (CallLog, collected in a
context variable so concurrent jobs on one model never mix their calls), the one token counter (usage_of: the
provider's usage, else an estimate) and the one name of a chat model (model_name). Model code notes its calls
here; the cost ledger (long_term/ledger.py) prices and writes them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from langchain_core.messages import AIMessage, BaseMessage
from pydantic import SecretStr

from memory_agent.tokens import count_tokens

T = TypeVar("T")

Purpose = Literal["conversation_summary", "cluster_summary", "consolidation", "batch_summary", "app"]
PURPOSES: tuple[Purpose, ...] = ("conversation_summary", "cluster_summary", "consolidation", "batch_summary", "app")


@dataclass(frozen=True)
class LLMCall:
    """One model call: why, which model, its tokens."""

    purpose: Purpose
    model: str
    input_tokens: int
    output_tokens: int


@dataclass
class CallLog:
    """The calls one job made, noted as they are answered, and whose they are once the job knows."""

    calls: list[LLMCall] = field(default_factory=list)  # not recorded in the ledger yet
    made: list[LLMCall] = field(default_factory=list)  # every call, recorded or not (the job's span reports them)
    tenant_id: str | None = None
    user_id: str | None = None


_current: ContextVar[CallLog | None] = ContextVar("memory_agent_call_log", default=None)


@contextmanager
def collecting() -> Iterator[CallLog]:
    """Note every model call made inside the block (and in tasks it starts) in the returned log."""
    log = CallLog()
    token = _current.set(log)
    try:
        yield log
    finally:
        _current.reset(token)


def note_call(call: LLMCall) -> None:
    """Add a call to the log of the running job, if any (a call outside a job is not recorded)."""
    log = _current.get()
    if log is not None:
        log.calls.append(call)
        log.made.append(call)


# More tokens than one call reports: a count past it (or negative, or not a whole number) is no count. A server's
# usage is untrusted input, and the ledger's and the memory row's integer columns refuse such a count: every
# summary failed with it.
MAX_REPORTED_TOKENS = 100_000_000


def reported_tokens(value: Any) -> int | None:
    """A provider's token count when it is one (a whole number from 1 to MAX_REPORTED_TOKENS), else None."""
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value:  # NaN is no count
        return None
    return int(value) if value == int(value) and 0 < value <= MAX_REPORTED_TOKENS else None


def usage_of(answer: Any, prompt: Sequence[BaseMessage]) -> tuple[int, int]:
    """(input, output) tokens of an answer: the provider's usage when it reports one, else an estimate."""
    usage = getattr(answer, "usage_metadata", None) or {}
    input_tokens = reported_tokens(usage.get("input_tokens")) or count_tokens(list(prompt))
    output_tokens = reported_tokens(usage.get("output_tokens"))
    if output_tokens:
        return int(input_tokens), output_tokens
    answered = answer if isinstance(answer, BaseMessage) else AIMessage(str(answer))
    return int(input_tokens), int(count_tokens([answered]))


def note_answer(purpose: Purpose, model: str, answer: Any, prompt: Sequence[BaseMessage]) -> None:
    """note_call for a model's answer to `prompt`."""
    input_tokens, output_tokens = usage_of(answer, prompt)
    note_call(LLMCall(purpose, model, input_tokens, output_tokens))


def model_name(model: Any) -> str:
    """The name a chat model's calls are recorded under: its model_name, model or model_id, else its class."""
    for attribute in ("model_name", "model", "model_id"):
        value = getattr(model, attribute, None)
        if isinstance(value, str) and value:
            return value
    return type(model).__name__


# What a client may spend between its tries (its own backoff, a rate-limited provider's Retry-After).
RETRY_ALLOWANCE_S = 10.0


def call_bound_s(model: Any) -> float | None:
    """The longest one call of `model` should take by its client's own settings: its timeout (ChatOpenAI's
    request_timeout, ChatAnthropic's default_request_timeout, ChatOllama's client timeout) for each of its tries,
    with RETRY_ALLOWANCE_S between them. That timeout is per read: a server trickling its answer never trips it,
    so the caller bounds the call with this. None when the model names no timeout as a number."""
    candidates = (
        getattr(model, "request_timeout", None),
        getattr(model, "default_request_timeout", None),
        (getattr(model, "client_kwargs", None) or {}).get("timeout"),
    )
    timeout = next((value for value in candidates if isinstance(value, int | float) and value > 0), None)
    if timeout is None:
        return None
    retries = getattr(model, "max_retries", None)
    retries = retries if isinstance(retries, int) and retries > 0 else 0
    return float(timeout) * (retries + 1) + RETRY_ALLOWANCE_S * retries


async def within_bound(call: Awaitable[T], bound_s: float | None, name: str) -> T:
    """`call`, cut after `bound_s` (call_bound_s) with a TimeoutError naming the model `name`; None: unbounded."""
    try:
        return await asyncio.wait_for(call, bound_s)
    except TimeoutError:
        if bound_s is None:
            raise
        raise TimeoutError(f"model {name!r} did not answer within {bound_s:.3g}s") from None


def secrets_of(model: Any) -> tuple[str, ...]:
    """The credentials a chat model holds: its SecretStr fields (the API key it read from its provider's variable)."""
    values = getattr(model, "__dict__", {}).values()
    found = (value.get_secret_value() for value in values if isinstance(value, SecretStr))
    return tuple(secret for secret in found if len(secret) >= 8)


def scrub(exc: BaseException, secrets: Sequence[str]) -> BaseException:
    """`exc` with each of `secrets` in its message replaced by `***`, in place: a provider or a gateway may quote
    the key it refused ("Incorrect API key provided: sk-..."), and the message is stored on the row and logged."""
    if not any(secret in str(exc) for secret in secrets):
        return exc

    def clean(text: str) -> str:
        for secret in secrets:
            text = text.replace(secret, "***")
        return text

    exc.args = tuple(clean(arg) if isinstance(arg, str) else arg for arg in exc.args)
    if isinstance(getattr(exc, "message", None), str):
        exc.message = clean(exc.message)  # type: ignore[attr-defined]
    return exc
