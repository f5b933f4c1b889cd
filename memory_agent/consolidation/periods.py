"""Calendar rules of the nightly run, pure: which day a run covers and which rollups fall due with it.

Days are UTC dates. The run on date R consolidates day R-1. On a Sunday it also rolls up the 7 dailies of
R-7..R-1 (weeks run Sunday to Saturday); on the 1st it rolls up the weeklies that ended in the month before.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Literal

from memory_agent.errors import InvalidInputError

PeriodName = Literal["daily", "weekly", "monthly"]
PERIODS: tuple[PeriodName, ...] = ("daily", "weekly", "monthly")
SUNDAY = 6


@dataclass(frozen=True)
class Period:
    """One note's span: period_start to period_end, both inclusive."""

    name: PeriodName
    start: date
    end: date


def utc_day(now: datetime) -> date:
    return now.astimezone(UTC).date()


def day_bounds(day: date) -> tuple[datetime, datetime]:
    start = datetime.combine(day, time(0), tzinfo=UTC)
    return start, start + timedelta(days=1)


def month_start(day: date) -> date:
    return day.replace(day=1)


def rollups_due_after(day: date) -> list[Period]:
    """The rollups the run that consolidates `day` writes after that day's note, in order."""
    run = day + timedelta(days=1)
    due: list[Period] = []
    if run.weekday() == SUNDAY:
        due.append(Period("weekly", run - timedelta(days=7), day))
    if run.day == 1:
        due.append(Period("monthly", month_start(day), day))
    return due


def latest_period(name: str, now: datetime) -> Period:
    """The most recent complete period of `name` at `now` (what a manual run consolidates)."""
    today = utc_day(now)
    yesterday = today - timedelta(days=1)
    if name == "daily":
        return Period("daily", yesterday, yesterday)
    if name == "weekly":
        # The last Saturday before today ends the week.
        end = today - timedelta(days=(today.weekday() - SUNDAY) % 7 + 1)
        return Period("weekly", end - timedelta(days=6), end)
    if name == "monthly":
        end = month_start(today) - timedelta(days=1)
        return Period("monthly", month_start(end), end)
    raise InvalidInputError(f"period must be one of {', '.join(PERIODS)}, got {name!r}")


def parse_schedule_time(value: str) -> time:
    """'05:00' → 05:00 UTC; anything else is an error naming MEMORY_AGENT_SCHEDULE_TIME."""
    try:
        hours, minutes = (int(part) for part in value.split(":"))
        return time(hours, minutes, tzinfo=UTC)
    except (ValueError, AttributeError):
        raise InvalidInputError(f"MEMORY_AGENT_SCHEDULE_TIME must look like HH:MM (UTC), got {value!r}") from None


def cron_for(schedule_time: str) -> str:
    at = parse_schedule_time(schedule_time)
    return f"{at.minute} {at.hour} * * *"


def next_tick(now: datetime, schedule_time: str, *, days: int = 1) -> datetime:
    """The first schedule_time at least `days` calendar days after now's date (the next nightly run)."""
    at = parse_schedule_time(schedule_time)
    return datetime.combine(utc_day(now) + timedelta(days=days), at)
