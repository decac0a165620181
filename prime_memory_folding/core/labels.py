"""The store's label registries as one process knows them.

The durable registries live in the store (see :mod:`.storage`); another
process may add labels at any time. :class:`LabelRegistry` keeps this
process's copy, reloads it when a label is missing, and turns a query's label
gates into primes. A label's prime never changes once assigned, so nothing in
the copy ever goes stale: it can only be incomplete.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from ..errors import StoreError
from .index import TagQuery
from .primes import Kind, normalise_label, normalise_tags

__all__ = ["LabelRegistry"]

#: Distinct label gates remembered before the memo starts afresh.
GATE_CACHE_SIZE = 1024


def _as_tuple(labels: object) -> tuple[object, ...] | None:
    """A tuple or list of labels as a tuple (a memo key part); None for anything else."""
    if type(labels) is tuple:
        return labels
    if type(labels) is list:
        return tuple(labels)
    return None


class LabelRegistry:
    """Label-to-prime tables for the three kinds, loaded from a store.

    Gates are memoised until the registry learns a label, by :meth:`add`, by
    :meth:`reload`, or by a lookup that misses. An optional label the store
    does not know yet (in ``any_tags`` or ``exclude_tags``) is left out of a
    memoised gate; that stays right because the engine looks up the labels of
    every record before the record reaches its index, so the memo is
    forgotten before any record could carry the label.

    Args:
        load: reads the store's registries.
        where: names the store in error messages.
    """

    def __init__(self, load: Callable[[], dict[Kind, dict[str, int]]], where: object) -> None:
        self._load = load
        self._where = where
        self.primes: dict[Kind, dict[str, int]] = {kind: {} for kind in Kind}
        self.labels: dict[Kind, dict[int, str]] = {kind: {} for kind in Kind}
        # A label's prime never changes, so tag-set lookups can be cached for good.
        self._tag_cache: dict[tuple[str, ...], tuple[int, ...]] = {}
        # Label gates already turned into primes; cleared whenever a label is added.
        self._gate_cache: dict[tuple[object, ...], TagQuery | None] = {}

    def reload(self) -> None:
        """Read every registry from the store again."""
        primes = self._load()
        self.primes = primes
        self._gate_cache = {}
        self.labels = {
            kind: {p: label for label, p in table.items()} for kind, table in primes.items()
        }

    def add(self, assigned: Mapping[Kind, Mapping[str, int]]) -> None:
        """Learn primes this process assigned, once their transaction committed."""
        for kind, table in assigned.items():
            for label, prime in table.items():
                if label not in self.primes[kind]:
                    self.primes[kind][label] = prime
                    self.labels[kind][prime] = label
                    self._gate_cache = {}

    def get(self, kind: Kind, label: str) -> int | None:
        """A label's prime, or None if it has none. Never assigns."""
        prime = self.primes[kind].get(label)
        if prime is None:
            self.reload()
            prime = self.primes[kind].get(label)
        return prime

    def known(self, kind: Kind, label: str) -> int:
        """A stored record's label's prime; a label without one means a damaged store.

        Raises:
            StoreError: no registry entry explains the label.
        """
        prime = self.get(kind, label)
        if prime is None:
            raise StoreError(
                f"store {self._where} has a record labelled {label!r} that no "
                f"{kind.value} registry entry explains; the store is damaged"
            )
        return prime

    def tag_primes(self, tags: tuple[str, ...]) -> tuple[int, ...]:
        """A stored record's tags' primes, in the same order."""
        primes = self._tag_cache.get(tags)
        if primes is None:
            registry = self.primes[Kind.TAG]
            try:
                primes = tuple([registry[tag] for tag in tags])
            except KeyError:
                primes = tuple(self.known(Kind.TAG, tag) for tag in tags)
            self._tag_cache[tags] = primes
        return primes

    def gates(
        self,
        domain: str | None,
        subdomain: str | None,
        tags: Iterable[str],
        any_tags: Iterable[str],
        exclude_tags: Iterable[str],
    ) -> TagQuery | None:
        """Label gates turned into primes; None when an unknown label means nothing can match.

        Lookups are memoised per distinct set of labels until the next label
        is added, so a repeated query skips normalising and resolving.

        Raises:
            InvalidInput: a label is bad.
        """
        frozen = (_as_tuple(tags), _as_tuple(any_tags), _as_tuple(exclude_tags))
        if None in frozen:  # a set, a generator or a bad value: resolve it uncached
            return self._resolve(domain, subdomain, tags, any_tags, exclude_tags)
        key = (domain, subdomain, *frozen)
        try:
            return self._gate_cache[key]
        except KeyError:
            resolved = self._resolve(domain, subdomain, tags, any_tags, exclude_tags)
            if len(self._gate_cache) >= GATE_CACHE_SIZE:
                self._gate_cache.clear()
            self._gate_cache[key] = resolved
            return resolved
        except TypeError:  # an unhashable label: validation names it
            return self._resolve(domain, subdomain, tags, any_tags, exclude_tags)

    def _resolve(
        self,
        domain: str | None,
        subdomain: str | None,
        tags: Iterable[str],
        any_tags: Iterable[str],
        exclude_tags: Iterable[str],
    ) -> TagQuery | None:
        domain_prime = subdomain_prime = None
        if domain is not None:
            domain_prime = self.get(Kind.DOMAIN, normalise_label(domain, Kind.DOMAIN))
            if domain_prime is None:
                return None
        if subdomain is not None:
            subdomain_prime = self.get(Kind.SUBDOMAIN, normalise_label(subdomain, Kind.SUBDOMAIN))
            if subdomain_prime is None:
                return None
        required = [self.get(Kind.TAG, t) for t in normalise_tags(tags)]
        if any(p is None for p in required):
            return None
        wanted_labels = normalise_tags(any_tags)
        wanted = [p for p in (self.get(Kind.TAG, t) for t in wanted_labels) if p is not None]
        if wanted_labels and not wanted:
            return None
        excluded = [p for p in (self.get(Kind.TAG, t) for t in normalise_tags(exclude_tags)) if p]
        return TagQuery(
            domain_prime=domain_prime,
            subdomain_prime=subdomain_prime,
            all_of=tuple(p for p in required if p is not None),
            any_of=tuple(wanted),
            none_of=tuple(excluded),
        )
