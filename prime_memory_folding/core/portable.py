"""Memories as they come from a file, before they have a place in a store.

Every import reads its input into :class:`PortableRecord` values, checked field
by field, and collects what it could not read as :class:`BadLine`; the
verbatim writer in :mod:`~prime_memory_folding.transfer.packs` then writes them.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Any

from ..errors import InvalidInput
from .address import record_id, unpack
from .primes import MAX_PRIME, Kind, is_prime, normalise_label, normalise_tags
from .records import (
    check_content,
    check_metadata,
    check_session,
    check_unit_interval,
    check_vector,
)
from .scopes import normalise_scope

__all__ = [
    "BadLine",
    "ExportReport",
    "ImportReport",
    "LeftOut",
    "PortableRecord",
    "Progress",
    "Relabel",
    "Source",
    "open_text",
    "pack_vector",
    "parse_timestamp",
    "portable_record",
    "registries_from",
]

#: ``progress(done, total)``: called as work advances; total is None when unknown.
Progress = Callable[[int, "int | None"], None]

#: The largest magnitude a float32 holds; vectors are stored as float32.
_FLOAT32_MAX = 3.4028234663852886e38


@dataclass(frozen=True, slots=True)
class BadLine:
    """An input line (or file) that could not be read as a memory."""

    source: str
    line: int
    message: str

    def __str__(self) -> str:
        where = f"{self.source}:{self.line}" if self.line else self.source
        return f"{where}: {self.message}"


@dataclass(frozen=True, slots=True)
class PortableRecord:
    """A memory as read from a file, before it has a place in a store.

    ``address`` is None for memories that never had one (notes, knowledge
    graphs); they get the address the engine would give them. Missing
    timestamps become the time of the import.
    """

    content: str
    domain: str = "memory"
    subdomain: str = "general"
    tags: tuple[str, ...] = ()
    importance: float = 0.5
    strength: float = 1.0
    created_at: float | None = None
    updated_at: float | None = None
    accessed_at: float | None = None
    #: When decay last set the strength, where the source store tracks it.
    strength_at: float | None = None
    access_count: int = 0
    metadata: dict[str, Any] = field(default_factory=dict)
    instance_key: str | None = None
    vector: tuple[float, ...] | None = None
    address: int | None = None
    line: int = 0
    #: The scope the source names; None puts the record in the importing engine's current scope.
    scope: str | None = None
    #: The conversation the record belongs to, when the source names one.
    session: str | None = None


@dataclass(frozen=True, slots=True)
class LeftOut:
    """A file or folder an import did not read, and why (see :mod:`.folders`)."""

    path: str
    reason: str

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"


@dataclass(frozen=True, slots=True)
class Source:
    """Everything an importer read: the records, the registries they came with, bad lines."""

    name: str
    records: list[PortableRecord]
    registries: dict[Kind, dict[str, int]] = field(default_factory=dict)
    embedding_space: str | None = None
    bad: list[BadLine] = field(default_factory=list)
    #: How many input units (``unit``: lines, records or notes) were read, good and bad.
    lines: int = 0
    unit: str = "line"
    #: Files and folders of a folder import that were not read (links out, ignored files).
    left_out: list[LeftOut] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Relabel:
    """A label whose prime in the source differs from its prime in the target store."""

    kind: str
    label: str
    source_prime: int
    store_prime: int


@dataclass(frozen=True, slots=True)
class ImportReport:
    """What an import did (or, with ``dry_run``, would do).

    ``lines`` counts the input's lines (or records, or notes: ``unit``), good
    and bad; ``read`` the memories the good ones held; ``skipped`` the bad ones.
    """

    source: str
    lines: int
    unit: str
    read: int
    added: int
    already_present: int
    added_per_domain: dict[str, int]
    readdressed: tuple[tuple[str, str], ...]
    relabelled: tuple[Relabel, ...]
    skipped: tuple[BadLine, ...]
    dry_run: bool
    #: Records added per scope.
    added_per_scope: dict[str, int] = field(default_factory=dict)
    #: Records left out because their scope was not among those selected.
    not_selected: int = 0
    #: Files and folders of a folder import that were not read, and why.
    left_out: tuple[LeftOut, ...] = ()


@dataclass(frozen=True, slots=True)
class ExportReport:
    """What an export wrote."""

    records: int
    vectors: bool
    embedding_space: str | None


# -- reading values -------------------------------------------------------------------


def parse_timestamp(value: object, name: str = "timestamp") -> float:
    """Unix seconds from a number or an ISO 8601 string (naive times are UTC).

    Raises:
        InvalidInput: neither a finite number nor an ISO 8601 date-time, or a
            time outside the years 1 to 9999.
    """
    if isinstance(value, bool):
        raise InvalidInput(f"{name} must be Unix seconds or an ISO 8601 string, got a boolean")
    if isinstance(value, (int, float)):
        number = float(value)
        if not math.isfinite(number):
            raise InvalidInput(f"{name} must be finite, got {value!r}")
        return _in_calendar(number, value, name)
    if isinstance(value, str):
        text = value.strip()
        if text.endswith(("Z", "z")):
            text = text[:-1] + "+00:00"
        try:
            moment = datetime.fromisoformat(text)
        except ValueError:
            raise InvalidInput(f"{name} {value!r} is not an ISO 8601 date-time") from None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=timezone.utc)
        return _in_calendar(moment.timestamp(), value, name)
    raise InvalidInput(
        f"{name} must be Unix seconds or an ISO 8601 string, got {type(value).__name__}"
    )


def _in_calendar(seconds: float, value: object, name: str) -> float:
    """``seconds``, if a date can show it: every display of the record needs one."""
    try:
        datetime.fromtimestamp(seconds, tz=timezone.utc)
    except (OverflowError, OSError, ValueError):
        raise InvalidInput(
            f"{name} {value!r} is out of range; give a time from year 1 to 9999"
        ) from None
    return seconds


def pack_vector(raw: object) -> tuple[float, ...]:
    """A vector that float32 storage keeps: finite, within float32, not all zeros."""
    import numpy as np

    values = check_vector(raw)
    for i, number in enumerate(values):
        if abs(number) > _FLOAT32_MAX:
            raise InvalidInput(f"vector[{i}] is {number!r}, too large for float32; scale it down")
    # Values too small for float32 become 0 without a warning worth showing.
    with np.errstate(under="ignore"):
        if not np.any(np.asarray(values, dtype=np.float32)):
            raise InvalidInput("vector is all zeros and has no direction; give a non-zero vector")
    return tuple(values)


def _big_int(value: object, name: str) -> int:
    if isinstance(value, bool):
        raise InvalidInput(f"{name} must be a whole number")
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    raise InvalidInput(f"{name} must be a whole number or a string of digits, got {value!r}")


def portable_record(raw: object, line: int = 0) -> PortableRecord:
    """Validate one record mapping (a pack line or a JSON store entry).

    Raises:
        InvalidInput: a field is missing or bad.
    """
    if not isinstance(raw, Mapping):
        raise InvalidInput(f"a record must be a JSON object, got {type(raw).__name__}")
    if "content" not in raw:
        raise InvalidInput("the record has no content")
    address = None
    if raw.get("address") is not None:
        address = _big_int(raw["address"], "address")
        unpack(address)
        given = raw.get("record_id")
        if isinstance(given, str) and given.strip().lower() != record_id(address):
            raise InvalidInput(f"record_id {given!r} does not match its address")
    vector = raw.get("vector")
    checked_vector = None
    if vector is not None and vector != []:
        checked_vector = pack_vector(vector)
    stamps: dict[str, float | None] = {}
    for name in ("created_at", "updated_at", "accessed_at", "strength_at"):
        value = raw.get(name)
        stamps[name] = None if value is None else parse_timestamp(value, name)
    count = raw.get("access_count", 0)
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise InvalidInput(f"access_count must be a whole number of at least 0, got {count!r}")
    key = raw.get("instance_key")
    if key is not None and (not isinstance(key, str) or not key.strip()):
        raise InvalidInput("instance_key must be a non-empty string when given")
    tags = raw.get("tags") or ()
    return PortableRecord(
        content=check_content(raw["content"]),
        domain=normalise_label(raw.get("domain", "memory"), Kind.DOMAIN),
        subdomain=normalise_label(raw.get("subdomain", "general"), Kind.SUBDOMAIN),
        tags=normalise_tags(tags),
        importance=check_unit_interval("importance", raw.get("importance", 0.5)),
        strength=check_unit_interval("strength", raw.get("strength", 1.0)),
        created_at=stamps["created_at"],
        updated_at=stamps["updated_at"],
        accessed_at=stamps["accessed_at"],
        strength_at=stamps["strength_at"],
        access_count=count,
        metadata=check_metadata(raw.get("metadata"))[0],
        instance_key=key,
        vector=checked_vector,
        address=address,
        line=line,
        scope=None if raw.get("scope") is None else normalise_scope(raw["scope"]),
        session=check_session(raw.get("session")),
    )


def registries_from(raw: object, where: str) -> dict[Kind, dict[str, int]]:
    """Validate ``{"domain": {label: prime}, "subdomain": ..., "tag": ...}``.

    Raises:
        InvalidInput: not that shape, or a value is not a 32-bit prime.
    """
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise InvalidInput(f"{where}: registries must be a JSON object")
    tables: dict[Kind, dict[str, int]] = {}
    for kind in Kind:
        table = raw.get(kind.value) or {}
        if not isinstance(table, Mapping):
            raise InvalidInput(f"{where}: the {kind.value} registry must be a JSON object")
        tables[kind] = {}
        for label, prime in table.items():
            if isinstance(prime, bool) or not isinstance(prime, int) or not is_prime(prime):
                raise InvalidInput(f"{where}: {kind.value} {label!r} has {prime!r}, not a prime")
            if prime > MAX_PRIME:
                raise InvalidInput(f"{where}: {kind.value} {label!r} has a prime over 32 bits")
            tables[kind][normalise_label(label, kind)] = prime
    return tables


def open_text(path: str | os.PathLike[str]) -> IO[str]:
    """Open an input file for reading, with a clear error for what is not one.

    Raises:
        InvalidInput: the path is missing, is a directory, or cannot be read.
    """
    target = Path(path)
    if target.is_dir():
        raise InvalidInput(f"{target} is a directory; give a file")
    if not target.exists():
        raise InvalidInput(f"{target} does not exist; check the path")
    try:
        return target.open(encoding="utf-8", newline="")
    except OSError as exc:
        raise InvalidInput(f"cannot read {target}: {exc.strerror}") from None
