"""The time a recall query points to: "in September 2023", "last week", "yesterday", "on 5 March 2024", "on
March 3rd", "in September" (the latest, not after today), "2023-09" … as a span of instants, read in the user's
time (the time zone of the `now` the service's clock gives).

Recall ranks the turns of that span first (dated.py). English expressions only; a query without one gives None.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta

MONTHS = {
    name: number
    for number, names in enumerate(
        [
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ],
        start=1,
    )
    for name in names
}
_MONTH = r"(?P<month>" + "|".join(sorted(MONTHS, key=len, reverse=True)) + r")\.?"
_YEAR = r"(?P<year>(?:19|20)\d\d)"
_DAY = r"(?P<day>[0-3]?\d)(?:st|nd|rd|th)?"
_ORDINAL = r"(?P<day>[0-3]?\d)(?:st|nd|rd|th)"
WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")

# What a number counts when it follows one: "an essay of 2000 words" names no year (nor "from 1990 meters").
_COUNTED = (
    r"[.,]?\d|\s*(?:%|[-\s]?(?:words?|characters?|chars|letters?|pages?|people|persons?|users?|members?|"
    r"steps?|calories|kcal|dollars?|euros?|pounds?|yen|miles?|km|kilometers?|kilometres?|meters?|metres?|feet|"
    r"foot|ft|kg|kilos?|grams?|lbs?|points?|items?|copies|units?|pieces?|rows?|lines?|tokens?|messages?|"
    r"hours?|minutes?|seconds?|ms|mb|gb|kb|px|rpm)\b)"
)

# Most specific first: a day before a month before a year.
_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (kind, re.compile(pattern, re.IGNORECASE))
    for kind, pattern in (
        ("iso_day", r"\b(?P<year>(?:19|20)\d\d)-(?P<month>[01]\d)-(?P<day>[0-3]\d)\b"),
        ("day", rf"\b{_DAY}\s+(?:of\s+)?{_MONTH},?\s+{_YEAR}\b"),
        ("day", rf"\b{_MONTH}\s+{_DAY},?\s+{_YEAR}\b"),
        ("iso_month", r"\b(?P<year>(?:19|20)\d\d)-(?P<month>[01]\d)\b"),
        ("month", rf"\b{_MONTH},?\s+(?:of\s+)?{_YEAR}\b"),
        # A day without its year: after "on", or as an ordinal ("March 3rd"); "May 3" alone may be a verb's.
        ("day_no_year", rf"\bon\s+(?:the\s+)?{_DAY}\s+(?:of\s+)?{_MONTH}(?!\w)"),
        ("day_no_year", rf"\bon\s+{_MONTH}\s+(?:the\s+)?{_DAY}\b"),
        ("day_no_year", rf"\b{_ORDINAL}\s+of\s+{_MONTH}(?!\w)"),
        ("day_no_year", rf"\b{_MONTH}\s+{_ORDINAL}\b"),
        ("month_no_year", rf"\b(?:in|during)\s+{_MONTH}(?!\w)"),
        # "the day before yesterday" before "yesterday": read as yesterday, it named the wrong day.
        (
            "relative",
            r"\b(?P<word>day\s+before\s+yesterday|yesterday|last\s+night|today|tonight|this morning|this afternoon)\b",
        ),
        ("ago", r"\b(?P<count>\d{1,3}|a|an|one|two|three) (?P<unit>day|week|month|year)s? ago\b"),
        ("last", r"\b(?P<which>last|this|past|previous) (?P<unit>week|month|year|weekend)\b"),
        ("weekday", r"\b(?:last|on) (?P<weekday>" + "|".join(WEEKDAYS) + r")\b"),
        ("year", r"\b(?:in|during|of|from) " + _YEAR + r"\b(?!" + _COUNTED + r")"),
    )
)
_COUNTS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3}
# Words that make a time a bound ("as of", "since", "before" …): such a query asks about everything up to it or
# after it, not about that time (ranking its turns first lost the question's own answer, told months before).
_BOUND = re.compile(r"\b(?:as\s+of|since|until|till|before|after|by)\s+(?:the\s+)?$", re.IGNORECASE)


@dataclass(frozen=True)
class DateSpan:
    """[start, end) in the user's time zone, and the words of the query that named it."""

    start: datetime
    end: datetime
    expression: str

    def __contains__(self, moment: object) -> bool:
        return isinstance(moment, datetime) and self.start <= moment < self.end


def date_span(query: str, now: datetime) -> DateSpan | None:
    """The span the first date expression of `query` names, relative to `now` (timezone-aware: its zone is the
    user's). None when the query names no time, an impossible date (31 February), or a bound ("since March",
    "as of November 2023")."""
    if now.tzinfo is None or now.utcoffset() is None:
        raise ValueError(f"now must be a timezone-aware datetime, got {now!r}")
    for kind, pattern in _PATTERNS:
        found = pattern.search(query)
        if found is None:
            continue
        # "as of 2023": the year's expression starts with the bound's "of"
        before = found.start() + (3 if found.group(0).lower().startswith("of ") else 0)
        if _BOUND.search(query, 0, before):
            return None  # "as of November 2023": up to a time, not in it
        try:
            days = _days(kind, found, now.date())
        except ValueError:  # a day the calendar does not have
            return None
        if days is None:
            continue
        first, last = days
        zone = now.tzinfo
        return DateSpan(
            datetime.combine(first, time(0), tzinfo=zone),
            datetime.combine(last + timedelta(days=1), time(0), tzinfo=zone),
            found.group(0),
        )
    return None


def _days(kind: str, found: re.Match[str], today: date) -> tuple[date, date] | None:
    """(first day, last day) of the expression, both included."""
    groups = found.groupdict()
    if kind in ("iso_day", "day"):
        day = date(int(groups["year"]), _month_number(groups), int(groups["day"]))
        return day, day
    if kind == "day_no_year":
        return _latest(today, _month_number(groups), int(groups["day"]))
    if kind == "month_no_year":
        month = _month_number(groups)
        return _month(today.year - (month > today.month), month)  # the latest, this one included
    if kind in ("iso_month", "month"):
        return _month(int(groups["year"]), _month_number(groups))
    if kind == "year":
        year = int(groups["year"])
        return date(year, 1, 1), date(year, 12, 31)
    if kind == "relative":
        word = " ".join(groups["word"].lower().split())
        day = today - timedelta(days={"day before yesterday": 2, "yesterday": 1, "last night": 1}.get(word, 0))
        return day, day
    if kind == "ago":
        count = _COUNTS.get(groups["count"].lower()) or int(groups["count"])
        return _ago(today, count, groups["unit"].lower())
    if kind == "last":
        return _named_period(today, groups["which"].lower(), groups["unit"].lower())
    if kind == "weekday":
        wanted = WEEKDAYS.index(groups["weekday"].lower())
        back = (today.weekday() - wanted) % 7 or 7  # the last such day before today
        day = today - timedelta(days=back)
        return day, day
    return None


def _month_number(groups: dict[str, str]) -> int:
    """The expression's month: a number ("2023-09") or a month's name or abbreviation."""
    month = groups["month"]
    return int(month) if month.isdigit() else MONTHS[month.lower()]


def _latest(today: date, month: int, number: int) -> tuple[date, date]:
    """The latest `month` `number` not after today (a 29 February up to 8 years back); ValueError when the
    calendar has none."""
    for year in range(today.year, today.year - 9, -1):
        try:
            day = date(year, month, number)
        except ValueError:
            continue
        if day <= today:
            return day, day
    raise ValueError(f"no {month}/{number} in the calendar")


def _month(year: int, month: int) -> tuple[date, date]:
    first = date(year, month, 1)
    following = date(year + (month == 12), month % 12 + 1, 1)
    return first, following - timedelta(days=1)


def _ago(today: date, count: int, unit: str) -> tuple[date, date]:
    """A day, week, month or year `count` units back: that whole unit (a week: Monday to Sunday)."""
    if unit == "day":
        day = today - timedelta(days=count)
        return day, day
    if unit == "week":
        monday = today - timedelta(days=today.weekday() + 7 * count)
        return monday, monday + timedelta(days=6)
    if unit == "month":
        months = today.year * 12 + today.month - 1 - count
        return _month(months // 12, months % 12 + 1)
    return date(today.year - count, 1, 1), date(today.year - count, 12, 31)


def _named_period(today: date, which: str, unit: str) -> tuple[date, date]:
    """ "last week" (the calendar week before this one, Monday to Sunday), "this month", "past year" (the last 365
    days), "last weekend" ..."""
    if which == "past":
        length = {"week": 7, "weekend": 7, "month": 30, "year": 365}[unit]
        return today - timedelta(days=length), today
    back = 0 if which == "this" else 1
    if unit == "weekend":
        saturday = today - timedelta(days=(today.weekday() - 5) % 7 + 7 * (back and today.weekday() >= 5))
        return saturday, saturday + timedelta(days=1)
    if unit == "year":
        return date(today.year - back, 1, 1), date(today.year - back, 12, 31)
    return _ago(today, back, unit)
