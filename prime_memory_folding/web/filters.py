"""The memories page's filters: read from a query string or a form, checked, turned into gates.

The page's :class:`Filters` holds what the form shows; :meth:`Filters.gates` turns
it into the engine's gates, a :class:`prime_memory_folding.Filters` (``Gates`` here).
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from starlette.datastructures import FormData, QueryParams

from ..core.filters import Filters as Gates

__all__ = ["ORDERS", "PAGE_SIZES", "BadFilter", "Filters"]

#: The orders the memories page offers; ``relevance`` needs a text query.
ORDERS = {
    "relevance": "best text match",
    "salience": "importance x strength",
    "newest": "newest first",
    "oldest": "oldest first",
    "importance": "importance",
    "strength": "strength now",
}
PAGE_SIZES = (10, 25, 50, 100)
_DAY = 86_400.0


class BadFilter(ValueError):
    """A filter value that cannot be read; the message says which and why."""


def _labels(raw: str) -> list[str]:
    return [part.strip() for part in raw.split(",") if part.strip()]


def _unit(name: str, raw: str, default: float) -> float:
    if not raw.strip():
        return default
    try:
        value = float(raw)
    except ValueError:
        raise BadFilter(f"{name} must be a number from 0 to 1, got {raw!r}") from None
    if not math.isfinite(value) or not 0.0 <= value <= 1.0:
        raise BadFilter(f"{name} must be a number from 0 to 1, got {raw!r}")
    return value


def _date(name: str, raw: str) -> float | None:
    if not raw.strip():
        return None
    try:
        day = dt.date.fromisoformat(raw.strip())
    except ValueError:
        raise BadFilter(f"{name} must be a date like 2026-01-31, got {raw!r}") from None
    return dt.datetime(day.year, day.month, day.day, tzinfo=dt.timezone.utc).timestamp()


def _whole(name: str, raw: str, default: int, low: int, high: int) -> int:
    if not raw.strip():
        return default
    try:
        value = int(raw)
    except ValueError:
        raise BadFilter(f"{name} must be a whole number, got {raw!r}") from None
    if not low <= value <= high:
        raise BadFilter(f"{name} must be from {low} to {high}, got {value}")
    return value


@dataclass(frozen=True)
class Filters:
    """What the memories page shows: a text query, every gate, an order and a page."""

    q: str = ""
    scopes: tuple[str, ...] = ()
    domain: str = ""
    subdomain: str = ""
    tags: tuple[str, ...] = ()
    any_tags: tuple[str, ...] = ()
    not_tags: tuple[str, ...] = ()
    min_strength: float = 0.0
    max_strength: float = 1.0
    since: str = ""
    until: str = ""
    order: str = "salience"
    page: int = 1
    size: int = 25
    since_ts: float | None = field(default=None, compare=False)
    until_ts: float | None = field(default=None, compare=False)

    @classmethod
    def read(cls, params: QueryParams | FormData | Mapping[str, Any]) -> Filters:
        """Filters from request parameters.

        Raises:
            BadFilter: a value cannot be read.
        """

        def one(key: str) -> str:
            value = params.get(key, "")
            return value if isinstance(value, str) else ""

        scopes: list[str] = []
        many = params.getlist("scope") if hasattr(params, "getlist") else [one("scope")]
        for value in many:
            if isinstance(value, str):
                scopes.extend(_labels(value))
        q = one("q").strip()
        order = one("order").strip() or ("relevance" if q else "salience")
        if order not in ORDERS:
            raise BadFilter(f"order must be one of {', '.join(ORDERS)}, got {order!r}")
        if order == "relevance" and not q:
            order = "salience"
        low = _unit("min strength", one("min_strength"), 0.0)
        high = _unit("max strength", one("max_strength"), 1.0)
        if low > high:
            raise BadFilter(f"min strength {low} is above max strength {high}")
        size = _whole("page size", one("size"), 25, 1, 100)
        since_ts = _date("from date", one("since"))
        until_ts = _date("to date", one("until"))
        if since_ts is not None and until_ts is not None and since_ts > until_ts:
            raise BadFilter("the from date is after the to date")
        return cls(
            q=q,
            scopes=tuple(dict.fromkeys(scopes)),
            domain=one("domain").strip(),
            subdomain=one("subdomain").strip(),
            tags=tuple(_labels(one("tags"))),
            any_tags=tuple(_labels(one("any_tags"))),
            not_tags=tuple(_labels(one("not_tags"))),
            min_strength=low,
            max_strength=high,
            since=one("since").strip(),
            until=one("until").strip(),
            order=order,
            page=_whole("page", one("page"), 1, 1, 1_000_000),
            size=size,
            since_ts=since_ts,
            until_ts=None if until_ts is None else until_ts + _DAY,
        )

    def gates(self) -> Gates:
        """The engine's structural gates, for ``query``, ``match_ids`` and ``browse``.

        Raises:
            InvalidInput: a label or scope the engine refuses.
        """
        return Gates(
            domain=self.domain or None,
            subdomain=self.subdomain or None,
            tags=self.tags,
            any_tags=self.any_tags,
            exclude_tags=self.not_tags,
            min_strength=self.min_strength,
            scopes=list(self.scopes) or ["*"],
        )

    def browse_bounds(self) -> dict[str, Any]:
        """The gates only ``browse`` knows, as its keyword arguments: max strength and dates."""
        return {
            "max_strength": self.max_strength,
            "updated_after": self.since_ts,
            "updated_before": self.until_ts,
        }

    @property
    def narrows(self) -> bool:
        """Whether any gate beyond the text query is set."""
        return bool(
            self.scopes
            or self.domain
            or self.subdomain
            or self.tags
            or self.any_tags
            or self.not_tags
            or self.min_strength > 0
            or self.max_strength < 1
            or self.since
            or self.until
        )

    def pairs(self, **overrides: Any) -> list[tuple[str, str]]:
        """The filters as query-string pairs (defaults left out), with some values replaced."""
        values: dict[str, Any] = {
            "q": self.q,
            "domain": self.domain,
            "subdomain": self.subdomain,
            "tags": ",".join(self.tags),
            "any_tags": ",".join(self.any_tags),
            "not_tags": ",".join(self.not_tags),
            "min_strength": "" if self.min_strength == 0 else repr(self.min_strength),
            "max_strength": "" if self.max_strength == 1 else repr(self.max_strength),
            "since": self.since,
            "until": self.until,
            "order": self.order,
            "page": "" if self.page == 1 else str(self.page),
            "size": "" if self.size == 25 else str(self.size),
        }
        values.update({k: str(v) for k, v in overrides.items()})
        pairs = [("scope", s) for s in self.scopes]
        pairs.extend((k, str(v)) for k, v in values.items() if v not in ("", None))
        return pairs

    def query_string(self, **overrides: Any) -> str:
        return urlencode(self.pairs(**overrides))
