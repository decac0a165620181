"""A read's structural gates as one value: :class:`Filters`.

:meth:`~prime_memory_folding.engine.facade.MemoryEngine.query`,
:meth:`~prime_memory_folding.engine.facade.MemoryEngine.match_ids` and
:meth:`~prime_memory_folding.engine.facade.MemoryEngine.browse` take their gates as
keyword arguments, or as one ``filters=Filters(...)``;
:func:`~prime_memory_folding.transfer.packs.export_pack` takes only the latter.
The command line, the MCP server and the inspector build one and pass it on.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass, fields
from typing import Any

from ..errors import InvalidInput
from .primes import Kind, normalise_label
from .records import check_unit_interval, limit_tags
from .scopes import normalise_scopes
from .when import When, parse_when

__all__ = ["Filters", "resolve"]


@dataclass(frozen=True, kw_only=True, slots=True)
class Filters:
    """Which records a read may return: labels, tags, strength, scopes and times.

    Every field is optional, and ``Filters()`` passes every record the read
    sees. The gates run cheapest first, each only when given; an unknown label
    or scope matches nothing.

    Args:
        domain: only this domain.
        subdomain: only this subdomain.
        tags: records with every one of these tags.
        any_tags: records with at least one of these.
        exclude_tags: records with none of these.
        min_strength: records whose strength, decayed to the read's time, is at
            least this (0 to 1).
        scopes: the scopes the read sees; None: the current scope, the user's
            and ``global``; ``["*"]``: every scope.
        since: records last stored or changed at or after this time: a
            ``datetime``, Unix seconds, an ISO date, or an age such as ``"7d"``
            or ``"2 weeks"`` (:func:`~prime_memory_folding.core.when.parse_when`).
        until: records last stored or changed before this time, as ``since``.
        now: the read's time, which ages and decayed strength are read against;
            the engine's clock when None.

    The tag lists and ``scopes`` are kept as tuples, in the order given; labels
    and scope names are normalised when the read resolves them, and ages are
    read against the read's time, not when the value is made.

    Raises:
        InvalidInput: a field is bad; the message names it. Each field is
            checked when the value is made.
    """

    domain: str | None = None
    subdomain: str | None = None
    tags: Iterable[str] = ()
    any_tags: Iterable[str] = ()
    exclude_tags: Iterable[str] = ()
    min_strength: float = 0.0
    scopes: Iterable[str] | None = None
    since: When | None = None
    until: When | None = None
    now: When | None = None

    def __post_init__(self) -> None:
        # Every query makes one: the common cases (defaults, labels and lists seen
        # before) take the short ways.
        if self.domain is not None:
            normalise_label(self.domain, Kind.DOMAIN)
        if self.subdomain is not None:
            normalise_label(self.subdomain, Kind.SUBDOMAIN)
        for name, value in (
            ("tags", self.tags),
            ("any_tags", self.any_tags),
            ("exclude_tags", self.exclude_tags),
        ):
            if type(value) is not tuple or value:
                checked = _tags(name, value)
                if checked is not value:
                    object.__setattr__(self, name, checked)
        strength = self.min_strength
        if type(strength) is not float or not 0.0 <= strength <= 1.0:
            object.__setattr__(self, "min_strength", check_unit_interval("min_strength", strength))
        if self.scopes is not None:
            object.__setattr__(self, "scopes", _scopes(self.scopes))
        for name, when in (("since", self.since), ("until", self.until), ("now", self.now)):
            if when is not None:
                parse_when(when, 0.0, name)  # the form only: ages are read at the read's time

    def at(self, clock: float) -> float:
        """The read's time: :attr:`now` (an age counted back from ``clock``), else ``clock``.

        Raises:
            InvalidInput: ``now`` is not a time.
        """
        return clock if self.now is None else parse_when(self.now, clock, "now")


#: Each field's default: a gate keyword left at it is not given.
_DEFAULTS: dict[str, Any] = {f.name: f.default for f in fields(Filters)}


def resolve(filters: Filters | None, **gates: Any) -> Filters:
    """The gates of a call that takes them as ``filters`` or as keyword arguments.

    ``gates`` are the call's gate keywords, named as :class:`Filters`' fields;
    with ``filters`` given, each must be left at its default.

    Raises:
        InvalidInput: ``filters`` is not a :class:`Filters`, or a gate keyword
            was given beside it (the message names both); or a gate is bad.
    """
    if filters is None:
        return Filters(**gates)
    if not isinstance(filters, Filters):
        raise InvalidInput(f"filters must be a Filters, got {type(filters).__name__}")
    given = [name for name, value in gates.items() if not _left_out(name, value)]
    if given:
        raise InvalidInput(
            f"filters and {given[0]} were both given; give the gates in filters "
            f"(Filters({given[0]}=...)) or as keyword arguments, not both"
        )
    return filters


def _left_out(name: str, value: object) -> bool:
    """Whether a gate keyword is at its default (an empty list counts as no tags)."""
    default = _DEFAULTS[name]
    if value is default or value is None:
        return True
    if isinstance(value, (tuple, list, set, frozenset)):
        return default == () and not value
    if type(value) in (int, float):
        return bool(value == default)
    return False


def _tags(name: str, value: object) -> tuple[str, ...]:
    """A tag gate's tags as given, checked: a list of at most 32 good labels."""
    if value is None:
        return ()
    if isinstance(value, (str, bytes)):
        raise InvalidInput(f"{name} must be a list of tags, not one string; wrap it: [tag]")
    limited = limit_tags(name, value)
    try:
        tags = limited if type(limited) is tuple else tuple(limited)
    except TypeError:
        raise InvalidInput(f"{name} must be a list of tags, got {type(value).__name__}") from None
    if all(type(tag) is str for tag in tags):
        _check_tags(tags)
    else:
        for tag in tags:
            normalise_label(tag, Kind.TAG)  # names the bad one
    return tags


@functools.lru_cache(maxsize=1024)
def _check_tags(tags: tuple[str, ...]) -> None:
    """Check tag labels once per distinct list: a read repeats the same few."""
    for tag in tags:
        normalise_label(tag, Kind.TAG)


def _scopes(value: Iterable[str]) -> tuple[str, ...]:
    """Scope names as given, checked: a list, not one string, of well-formed names."""
    if isinstance(value, (str, bytes)):
        raise InvalidInput("scopes must be a list of scope names, not one string; wrap it: [scope]")
    try:
        names = tuple(value)
    except TypeError:
        raise InvalidInput(
            f"scopes must be a list of scope names, got {type(value).__name__}"
        ) from None
    if all(type(name) is str for name in names):
        _check_scopes(names)
    else:
        normalise_scopes(names)  # names the bad one
    return names


@functools.lru_cache(maxsize=256)
def _check_scopes(names: tuple[str, ...]) -> None:
    """Check scope names once per distinct list: a read repeats the same few."""
    normalise_scopes(names)
