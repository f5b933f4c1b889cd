"""OpenTelemetry spans of memory work, through `opentelemetry-api` only: the app configures the SDK (a tracer
provider, exporters); without one every span is the API's non-recording span and nothing is emitted.

Spans: `memory_agent.round_start`, `memory_agent.round_end`, `memory_agent.recall`, `memory_agent.summary` and
`memory_agent.consolidation`. Attributes follow OpenTelemetry's GenAI conventions where they name one
(`gen_ai.operation.name` with the memory operations, `gen_ai.conversation.id`, `gen_ai.memory.record.count`,
`gen_ai.request.model`, `gen_ai.usage.input_tokens` / `output_tokens`); the rest are `memory_agent.*`. Who a
span is about — user, tenant, conversation — is hashed by default (SHA-256, 16 hex digits: the same id gives the
same value, so spans still correlate), plain or omitted by MEMORY_AGENT_TRACE_IDENTITY: a process-wide policy, as
the tracer provider it feeds is. No query or message text is ever an attribute.

A summary runs after its round, usually in another task or process: its span starts a trace of its own, linked
to the round_end span that triggered it when it runs in the round's process (the inline executor).

A base module: imports nothing of memory_agent but errors, so every tier can trace.
"""

from __future__ import annotations

import contextvars
import functools
import hashlib
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Literal, ParamSpec, TypeVar

from opentelemetry import context as otel_context
from opentelemetry import trace

from memory_agent.errors import InvalidInputError

IdentityMode = Literal["hashed", "plain", "omitted"]
IDENTITY_MODES: tuple[IdentityMode, ...] = ("hashed", "plain", "omitted")
TRACER = trace.get_tracer("memory_agent")
PROVIDER = "memory_agent"

P = ParamSpec("P")
R = TypeVar("R")

_identity: IdentityMode = "hashed"
# The round_end span a summary dispatched during it is linked to (copied into the summary's task).
_triggering_round: contextvars.ContextVar[trace.SpanContext | None] = contextvars.ContextVar(
    "memory_agent_triggering_round", default=None
)


def configure(identity: str) -> None:
    """How spans name users, tenants and conversations from now on, in this process (MEMORY_AGENT_TRACE_IDENTITY)."""
    global _identity
    if identity not in IDENTITY_MODES:
        raise InvalidInputError(
            f"MEMORY_AGENT_TRACE_IDENTITY must be one of {', '.join(IDENTITY_MODES)}, got {identity!r}"
        )
    _identity = identity


def identity_value(value: str) -> str | None:
    """`value` as the identity policy lets a span carry it (None: not at all)."""
    if _identity == "omitted":
        return None
    if _identity == "plain":
        return value
    return hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def _who(tenant_id: str | None, user_id: str | None, conversation_id: str | None) -> dict[str, Any]:
    named = {
        "memory_agent.tenant.id": tenant_id,
        "memory_agent.user.id": user_id,
        "gen_ai.conversation.id": conversation_id,
    }
    shown = {name: identity_value(value) for name, value in named.items() if value is not None}
    return {name: value for name, value in shown.items() if value is not None}


def settable(value: Any) -> bool:
    return isinstance(value, bool | int | float | str) or (
        isinstance(value, list | tuple) and all(isinstance(v, bool | int | float | str) for v in value)
    )


def record(span: trace.Span, **attributes: Any) -> None:
    """Set the attributes that have a value (None and unsupported types are skipped); a no-op span ignores them."""
    if not span.is_recording():
        return
    for name, value in attributes.items():
        if value is not None and settable(value):
            span.set_attribute(name, list(value) if isinstance(value, tuple) else value)


@contextmanager
def memory_span(
    name: str,
    operation: str,
    *,
    tenant_id: str | None = None,
    user_id: str | None = None,
    conversation_id: str | None = None,
    linked_to_round: bool = False,
    attributes: Mapping[str, Any] | None = None,
) -> Iterator[trace.Span]:
    """A span of memory work, current for the block: failures are recorded on it (and raised on). With
    `linked_to_round`, the span starts a trace of its own linked to the round that triggered the work, if any.
    Without an SDK (the API's proxy provider) nothing is built: the block gets the API's invalid span."""
    if isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        yield trace.INVALID_SPAN
        return
    base = {"gen_ai.operation.name": operation, "gen_ai.provider.name": PROVIDER}
    base.update(_who(tenant_id, user_id, conversation_id))
    base.update({k: v for k, v in (attributes or {}).items() if v is not None and settable(v)})
    links, parent = None, None
    if linked_to_round:
        triggering = _triggering_round.get()
        if triggering is not None and triggering.is_valid:
            links, parent = [trace.Link(triggering)], otel_context.Context()
    with TRACER.start_as_current_span(
        name, context=parent, links=links, attributes=base, record_exception=False, set_status_on_exception=False
    ) as span:
        try:
            yield span
        except GeneratorExit:
            raise
        except BaseException as exc:  # cancellation too, as the SDK's own recording does
            failed(span, exc)
            raise


def failed(span: trace.Span, exc: BaseException) -> None:
    """A failure on `span` by its type only: an error's message may quote the ids the policy hides or the text
    of the conversation (the SDK's own recording would put it, and its traceback, on the span)."""
    kind = type(exc).__qualname__
    span.set_attribute("error.type", kind)
    span.add_event("exception", {"exception.type": kind})
    span.set_status(trace.Status(trace.StatusCode.ERROR, kind))


@contextmanager
def round_end_scope(span: trace.Span) -> Iterator[None]:
    """While a round ends: summaries it dispatches link their span to `span`."""
    token = _triggering_round.set(span.get_span_context())
    try:
        yield
    finally:
        _triggering_round.reset(token)


def summary_span(memory_id: int, tenant_id: str | None, user_id: str, row: Mapping[str, Any]) -> Any:
    """The span of one summary job (`row`: the memory row as its round picked it up, or empty), linked to the
    round that triggered it."""
    return memory_span(
        "memory_agent.summary",
        "update_memory",
        tenant_id=tenant_id,
        user_id=user_id,
        conversation_id=row.get("conversation_id"),
        linked_to_round=True,
        attributes={
            "memory_agent.memory.id": memory_id,
            "memory_agent.window.start_sequence": row.get("start_sequence"),
            "memory_agent.window.end_sequence": row.get("end_sequence"),
        },
    )


def summary_attributes(status: str, error: str | None, calls: Any) -> dict[str, Any]:
    """What a summary span records: where its row ended, and its model calls (model, tokens)."""
    calls = list(calls or ())
    models = sorted({call.model for call in calls})
    return {
        "memory_agent.summary.status": status,
        "error.type": (error or "").split(":", 1)[0] or None if status == "failed" else None,
        "gen_ai.request.model": models[-1] if len(models) == 1 else (",".join(models) or None),
        "gen_ai.usage.input_tokens": sum(call.input_tokens for call in calls) if calls else None,
        "gen_ai.usage.output_tokens": sum(call.output_tokens for call in calls) if calls else None,
        "memory_agent.summary.model_calls": len(calls),
    }


def context_linked_to_round() -> contextvars.Context:
    """A fresh context for a job dispatched now that carries only the round span to link to (if any)."""
    fresh = contextvars.Context()
    triggering = _triggering_round.get()
    if triggering is not None:
        fresh.run(_triggering_round.set, triggering)
    return fresh


def traced_recall(function: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R]]:
    """Recall's span around `function` (search.recall): the user, the limit, and what it found."""

    @functools.wraps(function)
    async def traced(*args: P.args, **kwargs: P.kwargs) -> R:
        with memory_span(
            "memory_agent.recall",
            "search_memory",
            tenant_id=kwargs.get("tenant_id"),  # type: ignore[arg-type]
            user_id=kwargs.get("user_id"),  # type: ignore[arg-type]
            conversation_id=kwargs.get("conversation_id"),  # type: ignore[arg-type]
            attributes={"gen_ai.retrieval.top_k": kwargs.get("limit")},
        ) as span:
            result = await function(*args, **kwargs)
            found = getattr(result, "results", None)
            record(
                span,
                **{
                    "gen_ai.memory.record.count": len(found) if found is not None else None,
                    "memory_agent.recall.path": getattr(result, "retrieval_path", None),
                    "memory_agent.recall.fts_hits": getattr(result, "fts_hits", None),
                    "memory_agent.recall.vector_hits": getattr(result, "vector_hits", None),
                    "memory_agent.recall.tokens": getattr(result, "estimated_tokens", None),
                    "memory_agent.recall.truncated": getattr(result, "truncated", None),
                },
            )
            return result

    return traced
