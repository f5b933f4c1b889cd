"""What the summary runner remembers of conversations whose summaries fail, in this process.

A WARNING per failed summary naming the conversation, the model and the cause, at most one per conversation per
LOG_INTERVAL_S (the failures in between are counted into the next one) and MAX_WARNINGS_PER_INTERVAL for all of
them: a model that fails every round must not flood the log, nor a provider that is down for every conversation,
and one that fails must not go unseen. A conversation whose summaries keep failing backs off: after
BACKOFF_AFTER failures in a row, its next summaries are recorded `failed` without a model call until BACKOFF_BASE_S
(doubled for each further failure, at most BACKOFF_MAX_S) has passed; its rounds meanwhile get the raw gap, bounded
by max_gap_messages. A provider that asks to be called again later (a 429 or 503 with Retry-After) is not asked
for the conversation's next summary before then. A completed summary clears the conversation. At most MAX_TRACKED conversations are held (the
longest untouched go first); a process that restarts starts afresh.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime

from memory_agent.errors import MemoryAgentError, is_transient
from memory_agent.llm.structured import status_of

logger = logging.getLogger("memory_agent")

LOG_INTERVAL_S = 300.0
# At most this many WARNINGs every LOG_INTERVAL_S for all conversations together: a provider that is down fails
# every active conversation's summary at once, a line each (thousands in minutes) without this. The next one
# allowed counts those held back.
MAX_WARNINGS_PER_INTERVAL = 20
BACKOFF_AFTER = 2
BACKOFF_BASE_S = 60.0
BACKOFF_MAX_S = 1800.0
MAX_TRACKED = 10_000
# The most of an error's message a row, the WARNING or an API error quotes: a provider's error body is untrusted
# and unbounded (a 1 MB HTML page, a gateway echoing the whole request, and with it the conversation).
MAX_SAID_CHARS = 2000

# (tenant_id, user_id, conversation_id): a thread id is free again once its conversation is erased, and then
# another tenant's user of the same id may start it.
Key = tuple[str, str, str]


@dataclass
class _Streak:
    failures: int = 0
    retry_at: datetime | None = None
    logged_at: datetime | None = None
    unlogged: int = 0
    kind: str = ""  # the last model call's failure, its kind only (the error class, the HTTP status)
    memory_id: int | None = None  # the row that holds that failure's whole error


class FailingConversations:
    """The failure streak of each conversation: when to log, when to call the model again."""

    def __init__(self, clock: Callable[[], datetime]) -> None:
        self.clock = clock
        self._streaks: OrderedDict[Key, _Streak] = OrderedDict()
        self._warned: list[datetime] = []  # the WARNINGs of the last LOG_INTERVAL_S, all conversations
        self._held_back = 0  # WARNINGs not written since the last one, MAX_WARNINGS_PER_INTERVAL being reached

    def backing_off(self, key: Key) -> str | None:
        """Why the conversation's summary is not asked of the model now (None: ask it)."""
        streak = self._streaks.get(key)
        if streak is None or streak.retry_at is None or self.clock() >= streak.retry_at:
            return None
        return (
            f"not attempted: the last {streak.failures} summaries of this conversation failed, the last with "
            f"{streak.kind} (the whole error is on memory {streak.memory_id}); the model is asked again after "
            f"{streak.retry_at.isoformat(timespec='seconds')}"
        )

    def completed(self, key: Key) -> None:
        self._streaks.pop(key, None)

    def failed(
        self,
        key: Key,
        model: str,
        cause: str,
        *,
        memory_id: int,
        attempted: bool = True,
        raised: BaseException | None = None,
    ) -> None:
        """Count a failed summary (`attempted`: the model was asked) and log it unless one was logged lately.
        `raised`: what failed it. A provider's Retry-After holds the conversation's next summaries until then; an
        error no model or provider causes (a bug) puts its traceback in the WARNING."""
        now = self.clock()
        streak = self._streaks.pop(key, None) or _Streak()
        self._streaks[key] = streak  # most recently touched last
        while len(self._streaks) > MAX_TRACKED:
            self._streaks.popitem(last=False)
        if attempted:
            streak.failures += 1
            # Not the message: it may quote the model's answer, and so the conversation, and rows recorded
            # without a model call outlive what they would quote (an erased conversation, its thread id reused).
            streak.kind, streak.memory_id = cause.split(": ", 1)[0][:200], memory_id
            waits = [retry_after_s(raised) or 0.0] if raised is not None else []
            if streak.failures >= BACKOFF_AFTER:
                waits.append(BACKOFF_BASE_S * 2 ** (streak.failures - BACKOFF_AFTER))
            if any(waits):
                streak.retry_at = now + timedelta(seconds=min(max(waits), BACKOFF_MAX_S))
        interval = timedelta(seconds=LOG_INTERVAL_S)
        if streak.logged_at is not None and now - streak.logged_at < interval:
            streak.unlogged += 1
            return
        self._warned = [at for at in self._warned if now - at < interval]
        if len(self._warned) >= MAX_WARNINGS_PER_INTERVAL:
            streak.unlogged += 1
            self._held_back += 1
            return
        since = f" ({streak.unlogged} more failed since the last warning)" if streak.unlogged else ""
        if self._held_back:
            since += (
                f" ({self._held_back} warnings about failed summaries held back: at most "
                f"{MAX_WARNINGS_PER_INTERVAL} every {LOG_INTERVAL_S:.0f} s)"
            )
        later = (
            f"; backing off: the model is asked again after {streak.retry_at.isoformat(timespec='seconds')}"
            if streak.retry_at is not None and streak.retry_at > now
            else ""
        )
        logger.warning(
            "Summary of conversation %r (user %r) failed with model %r: %s%s%s",
            key[2],
            key[1],
            model,
            cause,
            since,
            later,
            exc_info=raised if raised is not None and not expected(raised) else None,
        )
        streak.logged_at, streak.unlogged, self._held_back = now, 0, 0
        self._warned.append(now)


@dataclass(frozen=True)
class Outcome:
    """Where a summary left its row: the status, and for `failed` or `processing` the error (and what raised it)."""

    status: str
    error: str | None = None
    cause: BaseException | None = None


def expected(exc: BaseException) -> bool:
    """Whether a summary may fail with `exc` with the code right: the model answered unusably (our errors say so),
    its provider answered an HTTP error, or the call could not be made (the network, a timeout). Anything else is
    a bug, logged with its traceback."""
    return isinstance(exc, MemoryAgentError) or status_of(exc) is not None or is_transient(exc)


def describe(exc: BaseException) -> str:
    """A failure as a row's error names it: the exception's type, the provider's HTTP status, its message (at most
    MAX_SAID_CHARS of it)."""
    status = status_of(exc)  # the provider's HTTP status, named alike for every client
    name = f"{type(exc).__name__} (HTTP {status})" if status is not None else type(exc).__name__
    asked = retry_after_s(exc)
    later = f" (the provider asked to retry after {asked:.3g} s)" if asked else ""
    said = str(exc)
    if len(said) > MAX_SAID_CHARS:
        said = f"{said[:MAX_SAID_CHARS]}... ({len(said) - MAX_SAID_CHARS} more characters not shown)"
    return (f"{name}: {said}" if said else name) + later


def retry_after_s(exc: BaseException) -> float | None:
    """The wait a provider asked for with its error (a 429 or 503's `retry-after-ms` or `Retry-After`, in seconds
    or as an HTTP date), else None."""
    headers = getattr(getattr(exc, "response", None), "headers", None)
    if headers is None or not hasattr(headers, "get"):
        return None
    try:
        if headers.get("retry-after-ms") is not None:
            return max(0.0, float(headers["retry-after-ms"]) / 1000)
        value = headers.get("retry-after")
        if value is None:
            return None
        try:
            return max(0.0, float(value))
        except ValueError:
            return max(0.0, (parsedate_to_datetime(value) - datetime.now(UTC)).total_seconds())
    except (ValueError, TypeError, OverflowError):  # a header that says nothing usable
        return None
