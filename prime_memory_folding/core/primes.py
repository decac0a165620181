"""Labels and their primes.

Every label (a domain, a subdomain or a tag) gets a prime from its own
registry. Primes are handed out in increasing order: a new label gets the next
prime above the highest one the registry has ever assigned, so a prime is never
reused, even after every record that used it is gone. The durable registry
lives in the store; this module holds the pure parts: label normalisation,
primality and the default labels.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from enum import Enum

from ..errors import InvalidInput
from .records import check_unicode

__all__ = [
    "DEFAULT_LABELS",
    "MAX_PRIME",
    "Kind",
    "default_primes",
    "is_prime",
    "next_prime",
    "normalise_label",
    "normalise_tags",
    "prime_product",
]

#: Primes must fit a 32-bit address lane.
MAX_PRIME = 2**32 - 1

_WHITESPACE = re.compile(r"\s+")


class Kind(str, Enum):
    """The three label registries."""

    DOMAIN = "domain"
    SUBDOMAIN = "subdomain"
    TAG = "tag"


DEFAULT_LABELS: dict[Kind, tuple[str, ...]] = {
    Kind.DOMAIN: (
        "memory", "project", "file", "symbol", "decision",
        "task", "session", "metric", "workflow", "agent",
    ),
    Kind.SUBDOMAIN: (
        "general", "episodic", "semantic", "procedural", "reflection",
        "code", "document", "architecture", "decision", "test",
    ),
    Kind.TAG: (
        "important", "recent", "source", "technical", "architecture",
        "code", "evidence", "folded", "standalone", "ide",
    ),
}  # fmt: skip


def default_primes() -> list[tuple[Kind, str, int]]:
    """Every new store's first registry entries: each default label with its prime.

    Each registry counts its primes from 2, in the order of :data:`DEFAULT_LABELS`.
    """
    rows: list[tuple[Kind, str, int]] = []
    for kind, labels in DEFAULT_LABELS.items():
        prime = 1
        for label in labels:
            prime = next_prime(prime)
            rows.append((kind, label, prime))
    return rows


def normalise_label(label: object, kind: Kind | str = "label") -> str:
    """Trim, lower-case and join inner whitespace with ``_``.

    Raises:
        InvalidInput: the label is not a string or is empty once normalised.
    """
    name = kind.value if isinstance(kind, Kind) else kind
    if not isinstance(label, str):
        raise InvalidInput(f"{name} must be a string, got {type(label).__name__}")
    normal = _normalise(label)
    if not normal:
        raise InvalidInput(f"{name} {label!r} is empty once trimmed; give a non-empty {name}")
    if "\x00" in normal:
        raise InvalidInput(f"{name} {label!r} contains a NUL character; remove it")
    return check_unicode(name, normal)


@functools.lru_cache(maxsize=4096)
def _normalise(label: str) -> str:
    return _WHITESPACE.sub("_", label.strip().lower())


def normalise_tags(tags: Iterable[str] | str | None) -> tuple[str, ...]:
    """Normalise, de-duplicate and sort a collection of tags.

    Raises:
        InvalidInput: ``tags`` is a bare string or holds an invalid label.
    """
    if not tags:
        return ()
    if isinstance(tags, str):
        raise InvalidInput("tags must be a list of strings, not one string; wrap it: [tag]")
    try:
        items = tuple(tags)
    except TypeError:
        raise InvalidInput(f"tags must be a list of strings, got {type(tags).__name__}") from None
    if all(type(tag) is str for tag in items):
        return _normalise_tags(items)
    return tuple(sorted({normalise_label(tag, Kind.TAG) for tag in items}))


@functools.lru_cache(maxsize=4096)
def _normalise_tags(items: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(sorted({normalise_label(tag, Kind.TAG) for tag in items}))


def is_prime(n: int) -> bool:
    """Deterministic primality test, exact for every n below 3.3 * 10**24."""
    if n < 2:
        return False
    small = (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37)
    for p in small:
        if n % p == 0:
            return n == p
    d, s = n - 1, 0
    while d % 2 == 0:
        d //= 2
        s += 1
    for a in small:
        x = pow(a, d, n)
        if x in (1, n - 1):
            continue
        for _ in range(s - 1):
            x = x * x % n
            if x == n - 1:
                break
        else:
            return False
    return True


def next_prime(n: int) -> int:
    """The smallest prime strictly greater than ``n``."""
    candidate = max(n + 1, 2)
    while not is_prime(candidate):
        candidate += 1
    return candidate


def prime_product(primes: Iterable[int]) -> int:
    """The product of ``primes`` (1 for none): the exact tag fingerprint."""
    product = 1
    for p in primes:
        product *= p
    return product
