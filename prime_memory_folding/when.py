"""Points in time as people and agents write them: dates, times, and ages like ``7d``.

:func:`parse_when` reads a ``since`` or ``until`` gate: a ``datetime``, Unix
seconds, an ISO 8601 date or date-time (naive ones are UTC), or an age counted
back from the query's time: ``7d``, ``12h``, ``30m``, ``2w``, ``2 weeks``,
``3 days ago``, ``yesterday``, ``today``, ``now``. The CLI's time
options read the same forms.
"""

from __future__ import annotations

import contextlib
import math
import re
from datetime import date, datetime, timezone

from .errors import InvalidInput
from .portable import parse_timestamp

__all__ = ["parse_when"]

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
