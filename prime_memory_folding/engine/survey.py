"""Read-only views of a store for people looking at it.

A page of records in a chosen order, one record's decay, the archive's
entries, and per-record columns for summaries of the whole store. The
inspector (``prime-memory ui``) draws its pages from these; none of them
writes anything. :class:`~prime_memory_folding.engine.facade.MemoryEngine` exposes
them as :meth:`~.MemoryEngine.browse`, :meth:`~.MemoryEngine.decay`,
:meth:`~.MemoryEngine.archive_entries` and :meth:`~.MemoryEngine.profile`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..core.address import parse_record_id
from ..core.filters import Filters
from ..core.records import Hit, Record, check_unit_interval
from ..errors import InvalidInput, NotFound
from ..fold.folding import decay_columns, decay_terms, effective_strength, tier_of
from ..recall.query import best_positions
from ..storage import archive

if TYPE_CHECKING:
    from .parts import EngineParts

__all__ = [
    "ORDERS",
    "ArchiveListing",
    "ArchivedRecord",
    "Decay",
    "Page",
    "Profile",
    "archive_entries",
    "browse",
    "decay",
    "profile",
]

#: The orders :func:`browse` knows; ``given`` keeps the order of ``among``.
ORDERS = ("salience", "newest", "oldest", "importance", "strength", "given")
#: The most records one page may hold.
MAX_PAGE = 1_000


@dataclass(frozen=True, slots=True)
class Page:
    """One page of records and how many passed the gates in all.

    Each hit's ``score_parts`` holds ``importance``, ``strength`` (decayed to
    now) and ``salience`` (their product), which is also its ``score``.
    """

    total: int
    hits: tuple[Hit, ...]


@dataclass(frozen=True, slots=True)
class Decay:
    """How a record's strength decays: ``strength * 0.5 ** ((t - since) / half_life)``.

    ``half_life`` is infinite for a permanent record.
    """

    tier: str
    strength: float
    since: float
    half_life: float
    now: float
    strength_now: float

    def at(self, when: float) -> float:
        """The strength at ``when`` (no earlier than ``since``; it never grows)."""
        return effective_strength(self.strength, self.since, self.half_life, when)


@dataclass(frozen=True, slots=True)
class ArchivedRecord:
    """A record in the archive, why it went there and when."""

    record: Record
    reason: str
    detail: str
    folded_into: str | None
    archived_at: float


@dataclass(frozen=True, slots=True)
class ArchiveListing:
    """A page of archive entries, newest first, and how many matched in all."""

    total: int
    entries: tuple[ArchivedRecord, ...]


@dataclass(frozen=True, slots=True)
class Profile:
    """Per live record columns, for charts of the whole store (same order in each).

    ``last_fold_at`` is when the last fold (not a dry run) ran, if one has.
    """

    now: float
    record_ids: tuple[str, ...]
    created_at: tuple[float, ...]
    access_count: tuple[int, ...]
    strength_now: tuple[float, ...]
    last_fold_at: float | None = None


def _whole(name: str, value: object, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidInput(f"{name} must be a whole number from {low} to {high}, got {value!r}")
    return value


def _time(name: str, value: object) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise InvalidInput(f"{name} must be a time in Unix seconds, got {value!r}")
    return float(value)


def browse(
    engine: EngineParts,
    filters: Filters,
    *,
    max_strength: float = 1.0,
    updated_after: float | None = None,
    updated_before: float | None = None,
    among: Sequence[str] | None = None,
    order: str = "salience",
    offset: int = 0,
    limit: int = 50,
) -> Page:
    """See :meth:`.MemoryEngine.browse`."""
    high = check_unit_interval("max_strength", max_strength)
    after = _time("updated_after", updated_after)
    before = _time("updated_before", updated_before)
    if order not in ORDERS:
        raise InvalidInput(f"order must be one of {', '.join(ORDERS)}; got {order!r}")
    if order == "given" and among is None:
        raise InvalidInput("order 'given' needs the ids to keep the order of, in among")
    if among is not None and isinstance(among, str):
        raise InvalidInput("among must be a list of record ids, not one string")
    offset = _whole("offset", offset, 0, 10**9)
    limit = _whole("limit", limit, 0, MAX_PAGE)
    with engine.reading():
        gates = engine.gates(filters)
        if gates is None:
            return Page(0, ())
        # The whole index, or on PostgreSQL a window of the gated records only.
        index, rows = engine.gated(gates)
        if among is not None:
            wanted = [index.row_of(rid) for rid in among]
            given = np.fromiter((r for r in wanted if r is not None), dtype=np.int64)
            rows = given[np.isin(given, rows)]
        now = filters.at(engine.now())
        strength = index.effective_strength(rows, now)
        updated = index.updated_at(rows)
        keep = strength <= high + 1e-12
        if after is not None:
            keep &= updated >= after
        if before is not None:
            keep &= updated < before
        rows, strength, updated = rows[keep], strength[keep], updated[keep]
        importance = index.importance(rows)
        salience = importance * strength
        if order == "given":
            ranked = np.arange(len(rows))
        else:
            # Best first by a primary key, then the newest; only the rows that
            # can reach this page are sorted.
            primary = {
                "salience": salience,
                "newest": updated,
                "oldest": -updated,
                "importance": importance,
                "strength": strength,
            }[order]
            secondary = -updated if order == "oldest" else updated
            ranked = best_positions(primary, secondary, min(offset + limit, len(rows)))
        chosen = ranked[offset : offset + limit]
        ids = index.record_ids(rows[chosen])
        found = engine.storage.fetch(ids)
        hits = tuple(
            Hit(
                record=found[rid].record,
                score=float(salience[i]),
                score_parts={
                    "importance": float(importance[i]),
                    "strength": float(strength[i]),
                    "salience": float(salience[i]),
                },
            )
            for rid, i in zip(ids, chosen.tolist())
            if rid in found
        )
        return Page(total=len(rows), hits=hits)


def decay(engine: EngineParts, record_id: str) -> Decay:
    """See :meth:`.MemoryEngine.decay`."""
    rid = parse_record_id(record_id)
    with engine.reading():
        found = engine.storage.fetch([rid]).get(rid)
    if found is None:
        raise NotFound(f"no record {rid} in {engine.path}")
    rec = found.record
    policy = engine.fold_policy
    label = rec.metadata.get("tier")
    since, half = decay_terms(
        policy,
        rec.importance,
        label,
        rec.created_at,
        rec.accessed_at,
        rec.access_count,
        found.strength_at,
    )
    now = engine.now()
    return Decay(
        tier=tier_of(policy, rec.importance, label),
        strength=rec.strength,
        since=since,
        half_life=half,
        now=now,
        strength_now=effective_strength(rec.strength, since, half, now),
    )


def archive_entries(
    engine: EngineParts,
    *,
    reason: str | None = None,
    contains: str | None = None,
    record_id: str | None = None,
    limit: int = 50,
    offset: int = 0,
) -> ArchiveListing:
    """See :meth:`.MemoryEngine.archive_entries`."""

    if reason is not None and reason not in archive.REASONS:
        raise InvalidInput(
            f"reason must be one of {', '.join(archive.REASONS)}, or None; got {reason!r}"
        )
    if contains is not None and not isinstance(contains, str):
        raise InvalidInput(f"contains must be a string, got {type(contains).__name__}")
    rid = None if record_id is None else parse_record_id(record_id)
    limit = _whole("limit", limit, 0, MAX_PAGE)
    offset = _whole("offset", offset, 0, 10**9)
    storage = engine.storage
    with engine.reading(), archive.read_snapshot(storage):
        total = archive.count_entries(storage, reason=reason, contains=contains, record_id=rid)
        rows = archive.list_entries(
            storage, reason=reason, contains=contains, record_id=rid, limit=limit, offset=offset
        )
    return ArchiveListing(
        total=total,
        entries=tuple(
            ArchivedRecord(e.stored.record, e.reason, e.detail, e.folded_into, e.archived_at)
            for e in rows
        ),
    )


def profile(engine: EngineParts) -> Profile:
    """See :meth:`.MemoryEngine.profile`."""
    from .maintenance import LAST_FOLD_KEY

    storage = engine.storage
    with engine.reading(), archive.read_snapshot(storage):
        rows = archive.live_profile(storage)
        folded = storage.get_meta(LAST_FOLD_KEY)
    now = engine.now()
    last_fold = None if folded is None else float(folded)
    if not rows:
        return Profile(now, (), (), (), (), last_fold)
    ids, created, accessed, count, importance, strength, strength_at, tier = zip(*rows)
    since, half = decay_columns(
        engine.fold_policy, importance, tier, created, accessed, count, strength_at
    )
    elapsed = np.maximum(now - since, 0.0)
    now_strength = np.asarray(strength, dtype=np.float64) * np.exp2(-elapsed / half)
    return Profile(
        now=now,
        record_ids=tuple(ids),
        created_at=tuple(float(c) for c in created),
        access_count=tuple(int(c) for c in count),
        strength_now=tuple(now_strength.tolist()),
        last_fold_at=last_fold,
    )
