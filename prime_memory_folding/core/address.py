"""128-bit record addresses.

An address packs four unsigned 32-bit lanes::

    domain_prime << 96 | subdomain_prime << 64 | concept_bucket << 32 | instance_id

``concept_bucket`` is a stable hash of (domain, subdomain, sorted tags) and,
for any scope but ``global``, the scope name; ``instance_id`` is a stable hash
of the content or of a caller's instance key. The record id is the address as
32 lower-case hex digits.

The scope enters the address through the bucket lane only: the same labels in
two scopes share their domain and subdomain primes (so the address still
decodes to its labels) and differ in the bucket, so the same memory stored in
two scopes gets two ids. ``global`` hashes as before scopes existed, so records
stored then keep their ids.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass

from ..errors import InvalidInput, InvalidRecordId

__all__ = [
    "LANE_MAX",
    "Encoded",
    "concept_bucket",
    "domain_prime_of",
    "instance_id",
    "pack",
    "parse_record_id",
    "record_id",
    "unpack",
]

LANE_MAX = 2**32 - 1
_RECORD_ID = re.compile(r"[0-9a-f]{32}")


@dataclass(frozen=True, slots=True)
class Encoded:
    """An address and its four lanes, as :meth:`MemoryEngine.encode` returns it."""

    address: int
    record_id: str
    domain_prime: int
    subdomain_prime: int
    concept_bucket: int
    instance_id: int
    provisional: bool = False


def pack(domain_prime: int, subdomain_prime: int, bucket: int, instance: int) -> int:
    """Pack four 32-bit lanes into one 128-bit address.

    Raises:
        InvalidInput: a lane is negative or does not fit 32 bits.
    """
    for name, lane in (
        ("domain_prime", domain_prime),
        ("subdomain_prime", subdomain_prime),
        ("concept_bucket", bucket),
        ("instance_id", instance),
    ):
        if not 0 <= lane <= LANE_MAX:
            raise InvalidInput(f"{name} {lane} does not fit an unsigned 32-bit lane")
    return domain_prime << 96 | subdomain_prime << 64 | bucket << 32 | instance


def unpack(address: int) -> tuple[int, int, int, int]:
    """Split an address into (domain_prime, subdomain_prime, concept_bucket, instance_id).

    Raises:
        InvalidInput: the address is negative or wider than 128 bits.
    """
    if not 0 <= address < 1 << 128:
        raise InvalidInput(f"address {address} is not an unsigned 128-bit integer")
    return (
        address >> 96,
        (address >> 64) & LANE_MAX,
        (address >> 32) & LANE_MAX,
        address & LANE_MAX,
    )


def record_id(address: int) -> str:
    """The 32-hex-digit form of an address."""
    return f"{address:032x}"


def domain_prime_of(record_id: str) -> int:
    """The domain prime of a record id (:func:`record_id`'s form): its first 8 hex
    digits, the address's top 32 bits. A record's domain never changes (it is part
    of its address)."""
    return int(record_id[:8], 16)


def parse_record_id(value: object) -> str:
    """Validate and normalise a record id (case-insensitive, surrounding spaces allowed).

    Raises:
        InvalidRecordId: the value is not 32 hexadecimal digits.
    """
    if not isinstance(value, str):
        raise InvalidRecordId(
            f"record id must be a string of 32 hex digits, got {type(value).__name__}"
        )
    normal = value.strip().lower()
    if not _RECORD_ID.fullmatch(normal):
        raise InvalidRecordId(
            f"record id {value!r} is malformed: expected 32 hex digits, as returned by store()"
        )
    return normal


def _hash32(*parts: str) -> int:
    digest = hashlib.blake2b("\x1f".join(parts).encode("utf-8"), digest_size=4).digest()
    return int.from_bytes(digest, "big")


def concept_bucket(domain: str, subdomain: str, tags: Sequence[str], scope: str = "global") -> int:
    """A stable 32-bit hash of the normalised domain, subdomain, sorted tags and scope.

    The ``global`` scope adds nothing to the hash; any other scope is hashed in
    behind a NUL, which no label or scope name contains.
    """
    if scope == "global":
        return _hash32("bucket", domain, subdomain, *sorted(tags))
    return _hash32(f"bucket\x00{scope}", domain, subdomain, *sorted(tags))


def instance_id(key: str, attempt: int = 0) -> int:
    """A stable 32-bit hash of content or an instance key.

    ``attempt`` > 0 gives the deterministic alternatives used when the first
    choice is taken by a different record.
    """
    if attempt == 0:
        return _hash32("instance", key)
    return _hash32("instance", key, str(attempt))
