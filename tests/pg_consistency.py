"""A PostgreSQL store's invariants, read straight from its tables.

The tests of many servers, killed servers and lost connections end with these
checks: they read the tables with a connection of their own, not through the
engine, so that a cache cannot hide what is stored.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass

from prime_memory_folding.core.primes import is_prime, prime_product


@dataclass(frozen=True)
class StoreState:
    """What the tables hold: the registries and every record's content by id."""

    registries: dict[str, dict[str, int]]
    contents: dict[str, str]


def read_state(url: str) -> StoreState:
    """Read the registries and the records' contents from the store at ``url``."""
    import psycopg

    registries: dict[str, dict[str, int]] = {"domain": {}, "subdomain": {}, "tag": {}}
    with psycopg.connect(url) as conn:
        for kind, label, prime in conn.execute("SELECT kind, label, prime FROM primes"):
            registries[kind][label] = int(prime)
        contents = {
            str(rid): str(content)
            for rid, content in conn.execute("SELECT record_id, content FROM records")
        }
    return StoreState(registries, contents)


def problems(url: str) -> list[str]:
    """Every broken invariant of the store at ``url`` (empty when it is consistent).

    - each registry gives one prime per label and each prime to one label,
      and every one of them is prime;
    - record ids and dedupe keys are unique;
    - every record's domain, subdomain and tag primes, and its tag product,
      agree with the registries.
    """
    import psycopg

    found: list[str] = []
    with psycopg.connect(url) as conn:
        primes = conn.execute("SELECT kind, label, prime FROM primes").fetchall()
        rows = conn.execute(
            "SELECT record_id, dedupe_key, domain, subdomain, tags, tag_product, "
            "domain_prime, subdomain_prime, tag_primes FROM records"
        ).fetchall()
    by_label = Counter((kind, label) for kind, label, _ in primes)
    by_prime = Counter((kind, int(prime)) for kind, _, prime in primes)
    found += [
        f"{kind} label {label!r} has {n} primes" for (kind, label), n in by_label.items() if n > 1
    ]
    found += [f"{kind} prime {p} names {n} labels" for (kind, p), n in by_prime.items() if n > 1]
    found += [
        f"{kind} {label!r}: {p} is not prime" for kind, label, p in primes if not is_prime(int(p))
    ]
    registry: dict[str, dict[str, int]] = {"domain": {}, "subdomain": {}, "tag": {}}
    for kind, label, prime in primes:
        registry[kind][label] = int(prime)
    ids = Counter(row[0] for row in rows)
    keys = Counter(row[1] for row in rows)
    found += [f"record id {rid} is stored {n} times" for rid, n in ids.items() if n > 1]
    found += [f"dedupe key {key} is stored {n} times" for key, n in keys.items() if n > 1]
    for rid, _, domain, subdomain, tags, product, dprime, sprime, tprimes in rows:
        labels = json.loads(tags)
        if registry["domain"].get(domain) != dprime:
            found.append(f"{rid}: domain {domain!r} has prime {dprime}, the registry another")
        if registry["subdomain"].get(subdomain) != sprime:
            found.append(f"{rid}: subdomain {subdomain!r} has prime {sprime}, the registry another")
        wanted = sorted(registry["tag"].get(label, 0) for label in labels)
        if 0 in wanted or sorted(int(p) for p in tprimes) != wanted:
            found.append(f"{rid}: tags {labels} have primes {tprimes}, the registry {wanted}")
        elif int(product) != prime_product(wanted):
            found.append(f"{rid}: tag product {product} is not the product of {wanted}")
    return found
