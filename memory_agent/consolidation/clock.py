"""The clock consolidation reads: `now` comes from here and goes into SQL as a parameter, never as now().

Production passes the tick's time (procrastinate's periodic timestamp) or system_clock(); tests hold a
ManualClock and advance it a day at a time.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from memory_agent.errors import InvalidInputError

Clock = Callable[[], datetime]


def system_clock() -> datetime:
    return datetime.now(UTC)


def check_aware(now: datetime) -> datetime:
    """`now` as UTC; a naive datetime would be read in the server's time zone."""
    if not isinstance(now, datetime) or now.tzinfo is None or now.utcoffset() is None:
        raise InvalidInputError(f"now must be a timezone-aware datetime, got {now!r}")
    return now.astimezone(UTC)


class ManualClock:
    """A clock that moves only when told to."""

    def __init__(self, start: datetime) -> None:
        self.now = check_aware(start)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> datetime:
        self.now += timedelta(**delta)
        return self.now

    def set(self, now: datetime) -> datetime:
        self.now = check_aware(now)
        return self.now
