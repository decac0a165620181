"""Points in time as people and agents write them: dates, times, and ages like ``7d``.

:func:`parse_when` reads a ``since`` or ``until`` gate: a ``datetime``, Unix
seconds, an ISO 8601 date or date-time (naive ones are UTC), or an age counted
back from the query's time: ``7d``, ``12h``, ``30m``, ``2w``, ``2 weeks``,
``3 days ago``, ``yesterday``, ``today``, ``now``. The CLI's time
options read the same forms.

:func:`time_window` reads the time expressions a query's text holds
("yesterday", "last week", "in May", "two years ago", "2023") as a span of
time, for the soft prior of text recall (:mod:`~prime_memory_folding.recall.fusion`).
"""

from __future__ import annotations

import contextlib
import math
import re
from dataclasses import dataclass
from datetime import date, datetime, timezone
from typing import TypeAlias

from ..errors import InvalidInput
from .portable import parse_timestamp

__all__ = ["TimeWindow", "When", "parse_when", "time_window"]

#: A time as a caller may give it: a ``datetime``, Unix seconds, or a string
#: (an ISO 8601 date or date-time, or an age such as ``"7d"``); see :func:`parse_when`.
When: TypeAlias = datetime | float | int | str

_SECONDS = {
    "s": 1,
    "sec": 1,
    "second": 1,
    "m": 60,
    "min": 60,
    "minute": 60,
    "h": 3_600,
    "hr": 3_600,
    "hour": 3_600,
    "d": 86_400,
    "day": 86_400,
    "w": 604_800,
    "wk": 604_800,
    "week": 604_800,
    "mo": 2_629_746,
    "month": 2_629_746,
    "y": 31_556_952,
    "yr": 31_556_952,
    "year": 31_556_952,
}
_AGE = re.compile(r"^(\d+(?:\.\d+)?)\s*([a-z]+?)s?(?:\s+ago)?$")
_DAY = 86_400


def parse_when(value: object, now: float, name: str = "time") -> float:
    """Unix seconds for ``value``, ages counted back from ``now``.

    Raises:
        InvalidInput: ``value`` is none of the forms above; the message names ``name``.
    """
    if isinstance(value, datetime):
        moment = value if value.tzinfo else value.replace(tzinfo=timezone.utc)
        return moment.timestamp()
    if isinstance(value, date):
        return datetime(value.year, value.month, value.day, tzinfo=timezone.utc).timestamp()
    if isinstance(value, str):
        text = value.strip().lower()
        if text == "now":
            return now
        if text in ("today", "yesterday"):
            midnight = math.floor(now / _DAY) * _DAY
            return midnight - (_DAY if text == "yesterday" else 0)
        age = _AGE.match(text)
        if age and age.group(2) in _SECONDS:
            return now - float(age.group(1)) * _SECONDS[age.group(2)]
        with contextlib.suppress(ValueError):
            value = float(text)  # Unix seconds, written out
    try:
        return parse_timestamp(value, name)
    except InvalidInput:
        raise InvalidInput(
            f"{name} {value!r} is not a time: give a date (2024-05-01), a date-time, Unix "
            "seconds, or an age such as 7d, 12h, 2 weeks or 3 days ago"
        ) from None


# -- time expressions in a query's text --------------------------------------------


@dataclass(frozen=True, slots=True)
class TimeWindow:
    """The span of time a text names: from ``start`` (inclusive) to ``end`` (exclusive)."""

    start: float
    end: float
    #: The words it was read from, in the order they stand in the text.
    phrases: tuple[str, ...]


_MONTHS = {
    "january": 1, "february": 2, "march": 3, "april": 4, "may": 5, "june": 6, "july": 7,
    "august": 8, "september": 9, "october": 10, "november": 11, "december": 12,
    "jan": 1, "feb": 2, "mar": 3, "apr": 4, "jun": 6, "jul": 7, "aug": 8, "sep": 9,
    "sept": 9, "oct": 10, "nov": 11, "dec": 12,
}  # fmt: skip
#: Month names that are other words too (a verb, a name, a short form); alone they need
#: a day, a year, or a word such as "in" beside them.
_AMBIGUOUS = frozenset(("may", "march", "june", *(name for name in _MONTHS if len(name) <= 4)))
_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
#: Northern meteorological seasons: (first month, months long).
_SEASONS = {"spring": 3, "summer": 6, "autumn": 9, "fall": 9, "winter": 12}
_COUNTS = {
    "a": (1, 1), "an": (1, 1), "one": (1, 1), "two": (2, 2), "three": (3, 3), "four": (4, 4),
    "five": (5, 5), "six": (6, 6), "seven": (7, 7), "eight": (8, 8), "nine": (9, 9),
    "ten": (10, 10), "eleven": (11, 11), "twelve": (12, 12), "couple": (2, 2), "few": (2, 4),
    "several": (3, 7),
}  # fmt: skip
_UNITS = {
    "minute": "minute", "min": "minute", "hour": "hour", "hr": "hour", "day": "day",
    "week": "week", "wk": "week", "month": "month", "year": "year", "yr": "year",
}  # fmt: skip
_MONTH_WORD = "|".join(sorted(_MONTHS, key=len, reverse=True))
_COUNT_WORD = r"\d{1,3}|" + "|".join(_COUNTS)
_UNIT_WORD = "|".join(sorted(_UNITS, key=len, reverse=True))
_ORDINAL = r"(?:st|nd|rd|th)?"
_YEAR_AFTER = r"(?:(?:,\s*|\s+)(?P<y>\d{4})\b)?"
_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (name, re.compile(pattern))
    for name, pattern in (
        ("iso_day", r"\b(?P<y>\d{4})-(?P<m>\d{2})-(?P<d>\d{2})\b"),
        ("iso_month", r"\b(?P<y>\d{4})-(?P<m>\d{2})\b(?!-\d)"),
        (
            "month_day",
            rf"\b(?P<mon>{_MONTH_WORD})\.?\s+(?P<d>\d{{1,2}}){_ORDINAL}\b{_YEAR_AFTER}",
        ),
        (
            "day_month",
            rf"\b(?P<d>\d{{1,2}}){_ORDINAL}\s+(?:of\s+)?(?P<mon>{_MONTH_WORD})\b\.?" + _YEAR_AFTER,
        ),
        ("day_before_yesterday", r"\b(?:the\s+)?day\s+before\s+yesterday\b"),
        ("today", r"\b(?:today|tonight|this\s+(?:morning|afternoon|evening))\b"),
        ("yesterday", r"\byesterday\b"),
        ("last_night", r"\blast\s+night\b"),
        ("tomorrow", r"\btomorrow\b"),
        (
            "rolling",
            rf"\b(?:(?:the\s+)?past|the\s+last|the\s+previous)\s+(?:(?P<n>{_COUNT_WORD})\s+)?"
            rf"(?P<unit>{_UNIT_WORD})s?\b",
        ),
        ("ago", rf"\b(?:a\s+)?(?P<n>{_COUNT_WORD})\s+(?:of\s+)?(?P<unit>{_UNIT_WORD})s?\s+ago\b"),
        ("calendar", r"\b(?P<which>this|last|next|previous)\s+(?P<unit>week(?:end)?|month|year)\b"),
        (
            "weekday",
            rf"\b(?:(?P<which>last|this|next|on)\s+)?(?P<day>{'|'.join(_WEEKDAYS)})\b",
        ),
        (
            "season",
            r"\b(?:(?P<which>in|during|last|this|next|over)\s+(?:the\s+)?)?"
            r"(?P<season>spring|summer|autumn|fall|winter)\b(?:\s+(?:of\s+)?(?P<y>\d{4})\b)?",
        ),
        (
            "month",
            r"\b(?:(?P<rel>since|after|before|until|till|by)\s+)?"
            r"(?:(?P<which>in|during|from|early|mid|late|last|this|next|of|through|throughout)[\s-]+)?"
            r"(?:the\s+month\s+of\s+)?"
            rf"(?P<mon>{_MONTH_WORD})\b\.?(?:,?\s+(?:of\s+)?(?P<y>\d{{4}})\b)?",
        ),
        ("year", r"(?<![\d-])\b(?P<y>(?:19|20)\d{2})\b(?![\d-])"),
    )
)
#: A word just before an expression that makes it a bound rather than the span.
_RELATION = re.compile(r"\b(since|after|before|until|till|by)\s+(?:the\s+)?$")
#: Words before a bare number that make it a year ("in 2023", "since 2021",
#: "the year 2019"); elsewhere it is a line, a port, an error code or a version.
_YEAR_BEFORE = re.compile(
    r"\b(?:in|during|from|of|through|throughout|around|circa|since|after|before|until|till"
    r"|by|between|early|mid|late|year|spring|summer|autumn|fall|winter)"
    r"\s*-?\s*(?:the\s+)?(?:(?:year|start|end|beginning|middle)\s+(?:of\s+)?)?$"
    # a month, perhaps with its day: "February 30, 2023" (a day that does not exist)
    rf"|\b(?:{_MONTH_WORD})\b\.?(?:\s+\d{{1,2}}(?:st|nd|rd|th)?)?\s*,?\s*$"
)
#: What may stand between two years of one list ("in 2021 and 2022", "2019-2021").
_YEAR_LIST = re.compile(r"^\s*(?:,|and|or|to|through|-|\u2013)\s*(?:the\s+)?$")
#: Units after a number that make it a count, not a year ("in 2048 bytes").
_COUNTED = re.compile(
    r"\s*(?:bytes?|kb|mb|gb|ms|seconds?|secs?|minutes?|lines?|rows?|records?|items?|px|%"
    r"|times|users|requests|tokens|words|files)\b"
)
_FOUR_DIGITS = re.compile(r"\d{4}")


def time_window(text: str, now: float) -> TimeWindow | None:
    """The span of time ``text`` names, read against ``now``; None when it names none.

    Reads days (``yesterday``, ``2023-05-08``, ``8 May 2023``, ``May 8th``),
    weekdays (``last Friday``), weeks, months and years as the calendar has
    them (``last week``, ``in May``, ``May 2023``, ``last year``, ``2023``),
    ages (``two years ago``, ``3 days ago``, ``a few weeks ago``), rolling
    spans (``the past 3 days``) and seasons (``last summer``). Times are UTC,
    weeks start on Monday, and a month, weekday or season without a year is
    the latest one that has begun by ``now``. ``since X`` runs from the start
    of X to ``now``, ``after X`` from its end; ``before X`` is the stretch as
    long as X (at least a week) just before it; ``until X`` and ``by X`` name
    no window. When a text names several spans, the window covers them all,
    except that spans with a year, when there are any, leave out those
    without one (which may count from a time the text does not give). See
    docs/recall.md.
    """
    lowered = text.lower()
    taken = bytearray(len(lowered))
    found: list[tuple[bool, int, str, float, float]] = []
    last_year = -1  # where the last year read ends, for a list of years
    for name, pattern in _PATTERNS:
        for match in pattern.finditer(lowered):
            begin, finish = match.span()
            if any(taken[begin:finish]):
                continue
            if name == "year":
                if not _names_year(lowered, begin, finish, last_year):
                    continue
                last_year = finish
            try:
                span = _read(name, match, now)
            except (ValueError, OverflowError, OSError):
                span = None  # no such day, or outside the calendar
            if span is None:
                continue
            taken[begin:finish] = b"\x01" * (finish - begin)
            relation = match.groupdict().get("rel")
            if relation is None:
                head = _RELATION.search(lowered[max(0, begin - 12) : begin])
                if head is not None:
                    relation = head.group(1)
                    begin -= len(head.group(0))
            start, end = span
            if relation in ("until", "till", "by"):
                continue  # a bound, not the span itself
            if relation == "before":
                start, end = start - max(end - start, 7 * _DAY), start
            elif relation in ("since", "after"):
                start, end = (start if relation == "since" else end), max(now, end)
            phrase = text[begin:finish].strip()
            found.append((_FOUR_DIGITS.search(phrase) is not None, begin, phrase, start, end))
    # An expression with its year says when; one without may be relative to a
    # time the question does not give ("last Friday, as mentioned on 23 May 2022").
    if any(dated for dated, *_ in found):
        found = [f for f in found if f[0]]
    if not found:
        return None
    found.sort(key=lambda f: f[1])
    return TimeWindow(
        start=min(f[3] for f in found),
        end=max(f[4] for f in found),
        phrases=tuple(f[2] for f in found),
    )


def _names_year(lowered: str, begin: int, finish: int, last_year: int) -> bool:
    """Whether the bare number at ``lowered[begin:finish]`` is a year: the whole
    text, after a word of time ("in 2023", "since 2021", "the end of 2019"),
    or the next of a list of years ("in 2021 and 2022") - and not a count
    ("in 2048 bytes")."""
    if _COUNTED.match(lowered, finish):
        return False
    if not lowered[:begin].strip(" \t\n?!.,:;'\"(") and not lowered[finish:].strip(" \t\n?!.,"):
        return True
    if last_year >= 0 and last_year <= begin and _YEAR_LIST.match(lowered[last_year:begin]):
        return True
    return _YEAR_BEFORE.search(lowered[max(0, begin - 40) : begin]) is not None


def _utc(year: int, month: int = 1, day: int = 1) -> float:
    return datetime(year, month, day, tzinfo=timezone.utc).timestamp()


def _month_span(year: int, month: int, months: int = 1) -> tuple[float, float]:
    """From the first of ``month`` to the first of the month ``months`` later."""
    index = year * 12 + month - 1 + months
    return _utc(year, month), _utc(index // 12, index % 12 + 1)


def _shift_month(year: int, month: int, by: int) -> tuple[int, int]:
    index = year * 12 + month - 1 + by
    return index // 12, index % 12 + 1


def _midnight(now: float) -> float:
    return math.floor(now / _DAY) * _DAY


def _week_start(now: float) -> float:
    """Monday 00:00 of the week that holds ``now`` (1970-01-01 was a Thursday)."""
    return _midnight(now) - ((math.floor(now / _DAY) + 3) % 7) * _DAY


def _count(word: str | None) -> tuple[int, int] | None:
    if word is None:
        return (1, 1)
    if word.isdigit():
        return (int(word), int(word)) if int(word) > 0 else None
    return _COUNTS.get(word)


def _unit_span(unit: str, moment: float) -> tuple[float, float]:
    """The calendar day, week, month or year that holds ``moment``."""
    when = datetime.fromtimestamp(moment, tz=timezone.utc)
    if unit == "day":
        return _midnight(moment), _midnight(moment) + _DAY
    if unit == "week":
        return _week_start(moment), _week_start(moment) + 7 * _DAY
    if unit == "month":
        return _month_span(when.year, when.month)
    return _utc(when.year), _utc(when.year + 1)


def _back(unit: str, count: int, now: float) -> float:
    """``count`` units before ``now``; months and years as the calendar counts them."""
    if unit in ("minute", "hour", "day", "week"):
        return now - count * _SECONDS[unit]
    when = datetime.fromtimestamp(now, tz=timezone.utc)
    months = count * (12 if unit == "year" else 1)
    year, month = _shift_month(when.year, when.month, -months)
    day = min(when.day, 28)
    return _utc(year, month, day) + (now - _midnight(now))


def _latest_month(month: int, now: float, which: str | None) -> tuple[int, int]:
    """The year of the ``month`` meant: the latest begun by ``now``, or as ``which`` says."""
    today = datetime.fromtimestamp(now, tz=timezone.utc)
    year = today.year if month <= today.month else today.year - 1
    if which == "last" and month == today.month:
        year -= 1
    elif which == "this":
        year = today.year
    elif which == "next":
        year = today.year if month > today.month else today.year + 1
    return year, month


def _read(name: str, match: re.Match[str], now: float) -> tuple[float, float] | None:
    """The span one matched expression names, or None when it names none after all.

    Raises:
        ValueError, OverflowError: the span is no date of the calendar.
    """
    get = match.groupdict()
    midnight = _midnight(now)
    if name in ("iso_day", "month_day", "day_month"):
        month = int(get["m"]) if name == "iso_day" else _MONTHS[get["mon"]]
        day = int(get["d"])
        if get.get("y"):
            year = int(get["y"])
        else:
            today = datetime.fromtimestamp(now, tz=timezone.utc)
            year = today.year if (month, day) <= (today.month, today.day) else today.year - 1
        start = _utc(year, month, day)  # ValueError: no such day
        return start, start + _DAY
    if name == "iso_month":
        return _month_span(int(get["y"]), int(get["m"]))
    if name == "day_before_yesterday":
        return midnight - 2 * _DAY, midnight - _DAY
    if name == "today":
        return midnight, midnight + _DAY
    if name == "yesterday":
        return midnight - _DAY, midnight
    if name == "last_night":
        return midnight - 6 * 3_600, midnight + 6 * 3_600
    if name == "tomorrow":
        return midnight + _DAY, midnight + 2 * _DAY
    if name == "rolling":
        counted = _count(get["n"])
        if counted is None:
            return None
        return _back(_UNITS[get["unit"]], counted[1], now), now
    if name == "ago":
        counted = _count(get["n"])
        if counted is None:
            return None
        unit = _UNITS[get["unit"]]
        low, high = counted
        if unit in ("minute", "hour"):
            size = _SECONDS[unit]
            return now - (high + 0.5) * size, now - (low - 0.5) * size
        earliest = _unit_span(unit, _back(unit, high, now))
        latest = _unit_span(unit, _back(unit, low, now))
        return earliest[0], latest[1]
    if name == "calendar":
        step = {"this": 0, "last": -1, "previous": -1, "next": 1}[get["which"]]
        unit = get["unit"]
        if unit == "weekend":
            saturday = _week_start(now) + (5 + 7 * step) * _DAY
            return saturday, saturday + 2 * _DAY
        if unit == "week":
            start = _week_start(now) + 7 * step * _DAY
            return start, start + 7 * _DAY
        today = datetime.fromtimestamp(now, tz=timezone.utc)
        if unit == "month":
            return _month_span(*_shift_month(today.year, today.month, step))
        return _utc(today.year + step), _utc(today.year + step + 1)
    if name == "weekday":
        which = get["which"]
        weekday = _WEEKDAYS.index(get["day"])
        current = (math.floor(now / _DAY) + 3) % 7  # Monday is 0
        back = (current - weekday) % 7
        if which == "last" and back == 0:
            back = 7
        if which == "next":
            back = -((weekday - current) % 7 or 7)
        start = midnight - back * _DAY
        return start, start + _DAY
    if name == "season":
        which, year_text = get["which"], get["y"]
        if which is None and year_text is None:
            return None  # a bare "spring" or "fall" is too often another word
        first = _SEASONS[get["season"]]
        if year_text:
            return _month_span(int(year_text), first, 3)
        today = datetime.fromtimestamp(now, tz=timezone.utc)
        year = today.year if first <= today.month else today.year - 1  # the latest begun
        if which == "this":
            year = today.year
        elif which == "next":
            year += 1
        elif which == "last" and _month_span(year, first, 3)[1] > now:
            year -= 1  # the latest has not ended yet: last one is the one before
        return _month_span(year, first, 3)
    if name == "month":
        word, which, year_text = get["mon"], get["which"], get["y"]
        if year_text is None and which is None and get["rel"] is None and word in _AMBIGUOUS:
            return None
        if year_text is None and which in ("this", "of") and word == "may":
            return None  # "this may be", "of may": a verb more often than a month
        month = _MONTHS[word]
        if year_text:
            year = int(year_text)
        else:
            year, month = _latest_month(
                month, now, which if which in ("last", "this", "next") else None
            )
        start, end = _month_span(year, month)
        third = (end - start) / 3
        if which == "early":
            return start, start + third
        if which == "mid":
            return start + third, end - third
        if which == "late":
            return end - third, end
        return start, end
    if name == "year":
        year = int(get["y"])
        return _utc(year), _utc(year + 1)
    return None
