"""Folding's verbs on a live engine: fold, unfold, restore, reinforce, purge.

:mod:`.folding` decides what a fold does from a snapshot and
:mod:`.storage.archive` holds the archive's SQL; the functions here apply them
to an engine's store and in-memory index, one transaction each, under the
engine's lock. :class:`~prime_memory_folding.engine.MemoryEngine` exposes them
as methods of the same names.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from . import writes
from .address import parse_record_id
from .errors import InvalidInput, NotAvailable, NotFound
from .folding import (
    MAX_REPORTED,
    FoldPlan,
    FoldPolicy,
    FoldReport,
    Merge,
    Snapshot,
    decay_terms,
    effective_strength,
    plan_fold,
)
from .gc_pause import paused_gc
from .primes import Kind
from .records import Record
from .storage import SQLiteStorage, StoredRow, archive

if TYPE_CHECKING:
    from .parts import EngineParts

__all__ = [
    "FoldProgress",
    "archive_by_hand",
    "fold",
    "purge_archive",
    "reinforce",
    "restore",
    "unfold",
]

#: The store's meta key for when the last fold (not a dry run) ran, in Unix seconds.
LAST_FOLD_KEY = "last_fold_at"

#: ``progress(step, done, total)``: a fold names each step as it starts, with
#: how many of its ``total`` steps are done.
FoldProgress = Callable[[str, int, int], None]


def sqlite_storage(engine: EngineParts) -> SQLiteStorage:
    """The engine's store, which folding needs to be the embedded SQLite one.

    Raises:
        NotAvailable: the store is another backend.
    """
    storage = engine.storage
    if not isinstance(storage, SQLiteStorage):
        raise NotAvailable(f"folding needs the embedded SQLite store, not {type(storage).__name__}")
    return storage


def fold(
    engine: EngineParts,
    *,
    dry_run: bool = False,
    now: float | None = None,
    policy: FoldPolicy | None = None,
    progress: FoldProgress | None = None,
    keep_apart: Iterable[str] = (),
) -> FoldReport:
    """See :meth:`.MemoryEngine.fold`."""
    if isinstance(keep_apart, str):
        raise InvalidInput("keep_apart must be a list of record ids, not one string; wrap it: [id]")
    apart = frozenset(parse_record_id(rid) for rid in keep_apart)
    steps = 3

    def step(name: str, done: int) -> None:
        if progress is not None:
            progress(name, done, steps)

    if policy is None:
        policy = engine.fold_policy
    elif not isinstance(policy, FoldPolicy):
        raise InvalidInput(f"policy must be a FoldPolicy, got {type(policy).__name__}")
    if now is not None and (
        isinstance(now, bool) or not isinstance(now, (int, float)) or not np.isfinite(now)
    ):
        raise InvalidInput(f"now must be a time in Unix seconds, got {now!r}")
    when = engine.now() if now is None else float(now)
    storage = sqlite_storage(engine)
    started = time.perf_counter()
    with engine.lock, archive.bulk_cache(storage), paused_gc():
        bytes_before = storage.size_bytes()
        step("reading records", 0)
        with archive.read_snapshot(storage):
            seen = storage.newest_change()
            snapshot = Snapshot.of(archive.snapshot_rows(storage))
            step("planning", 1)
            plan = _apart(plan_fold(snapshot, policy, when), apart)
            del snapshot  # the plan keeps what it needs; let the rest go before writing
        step("preparing folded records" if dry_run else "writing", 2)
        primes: dict[Kind, dict[str, int]] = {}
        new_rows: list[StoredRow] = []
        if dry_run:
            engine.registry.reload()
            new_rows = _folded_rows(engine, plan.merges, engine.registry.primes, when)
        else:
            with storage.transaction():
                engine.refresh()
                if storage.newest_change() != seen:
                    plan = _apart(
                        plan_fold(Snapshot.of(archive.snapshot_rows(storage)), policy, when), apart
                    )
                primes = writes.assign_primes(engine.registry, storage, _items(plan.merges))
                new_rows = _folded_rows(engine, plan.merges, primes, when)
                entries: list[tuple[str, str, str, str | None]] = [
                    (rid, "pruned", f"strength {eff:.4g} fell below {policy.prune_below}", None)
                    for rid, eff in plan.pruned
                ]
                for merge, row in zip(plan.merges, new_rows):
                    into = row.record.record_id
                    detail = f"folded with {len(merge.member_ids) - 1} similar record(s)"
                    entries.extend((rid, "folded", detail, into) for rid in merge.member_ids)
                archive.archive_records(storage, entries, when)
                archive.set_strengths(storage, plan.decayed, when)
                storage.insert(new_rows)
                storage.set_meta(LAST_FOLD_KEY, repr(when))
                engine.wrote()
                newest = storage.newest_change()
            engine.caught_up(newest)
            engine.registry.add(primes)
            index = engine.index
            for rid, strength in plan.decayed:
                index.restamp(rid, strength, when)
            # Most rows may go at once: drop them in one pass rather than reload the index.
            index.remove_many([entry[0] for entry in entries])
            engine.after_write(new_rows)
            engine.folded()
            if len(entries) >= max(1_000, plan.records // 10):
                archive.checkpoint(storage)
        folded = sum(len(m.member_ids) for m in plan.merges)
        created_ids = tuple(row.record.record_id for row in new_rows)
        step("done", steps)
        return FoldReport(
            dry_run=dry_run,
            now=when,
            records_before=plan.records,
            records_after=plan.records - len(plan.pruned) - folded + len(plan.merges),
            decayed=len(plan.decayed),
            pruned=len(plan.pruned),
            clustered=len(plan.merges),
            folded=folded,
            created=len(plan.merges),
            bytes_before=bytes_before,
            bytes_after=storage.size_bytes(),
            duration_s=time.perf_counter() - started,
            pruned_ids=tuple(rid for rid, _ in plan.pruned[:MAX_REPORTED]),
            created_ids=created_ids[:MAX_REPORTED],
            folded_from={
                rid: m.member_ids for rid, m in zip(created_ids[:MAX_REPORTED], plan.merges)
            },
            summaries={rid: m.content for rid, m in zip(created_ids[:MAX_REPORTED], plan.merges)},
            pruned_strengths=dict(plan.pruned[:MAX_REPORTED]),
        )


def _apart(plan: FoldPlan, apart: frozenset[str]) -> FoldPlan:
    """The plan without the merges that would fold any record in ``apart``."""
    if not apart:
        return plan
    merges = tuple(m for m in plan.merges if apart.isdisjoint(m.member_ids))
    return replace(plan, merges=merges)


def _items(merges: Sequence[Merge]) -> list[writes.StoreItem]:
    return [
        writes.StoreItem(
            m.content, m.domain, m.subdomain, m.tags, m.importance, m.vector, m.metadata,
            m.instance_key, m.scope,
        )
        for m in merges
    ]  # fmt: skip


def _folded_rows(
    engine: EngineParts,
    merges: Sequence[Merge],
    primes: Mapping[Kind, Mapping[str, int]],
    now: float,
) -> list[StoredRow]:
    """Rows for the folded records; allocating addresses only reads the store."""
    table = {kind: dict(primes.get(kind, {})) for kind in Kind}
    for kind in Kind:
        for label, prime in engine.registry.primes[kind].items():
            table[kind].setdefault(label, prime)
    keyed = [(item.dedupe_key, item) for item in _items(merges)]
    addresses = writes.allocate(engine.storage, keyed, table)
    rows = []
    for merge, (key, item), address in zip(merges, keyed, addresses):
        row = writes.new_row(item, key, address, table, now)
        record = replace(row.record, strength=merge.strength, access_count=merge.access_count)
        rows.append(replace(row, record=record))
    return rows


def _check_restorable(storage: SQLiteStorage, rows: Sequence[StoredRow]) -> None:
    live = storage.existing_ids([row.record.record_id for row in rows])
    live.update(
        found.record.record_id
        for found in storage.find_dedupe([row.dedupe_key for row in rows]).values()
    )
    if live:
        raise InvalidInput(
            f"live record(s) {sorted(live)} hold the same id or content as archived ones "
            "(stored again since they were archived); forget them first, or keep them"
        )


def unfold(engine: EngineParts, record_id: str) -> list[Record]:
    """See :meth:`.MemoryEngine.unfold`."""
    rid = parse_record_id(record_id)
    storage = sqlite_storage(engine)
    with engine.lock:
        engine.registry.reload()
        with storage.transaction():
            folded = storage.fetch([rid]).get(rid)
            if folded is None:
                if archive.archived(storage, rid) is not None:
                    raise InvalidInput(
                        f"record {rid} is in the archive; restore it first, then unfold it"
                    )
                raise NotFound(f"no record {rid} in {engine.path}")
            members = archive.members_of(storage, rid)
            if not members:
                raise InvalidInput(
                    f"record {rid} is not a folded record (the archive holds no members "
                    "folded into it); there is nothing to unfold"
                )
            # Give the members back in the fold's order: most representative first.
            listed = folded.record.metadata.get("folded_from")
            if isinstance(listed, list):
                position = {member: i for i, member in enumerate(listed)}
                members.sort(key=lambda m: position.get(m.stored.record.record_id, len(position)))
            storage.delete([rid])
            _check_restorable(storage, [m.stored for m in members])
            archive.restore_entries(storage, [m.seq for m in members])
        engine.after_write([m.stored for m in members], removed=[rid])
    return [m.stored.record for m in members]


def restore(engine: EngineParts, record_id: str) -> Record:
    """See :meth:`.MemoryEngine.restore`."""
    rid = parse_record_id(record_id)
    storage = sqlite_storage(engine)
    with engine.lock:
        engine.registry.reload()
        with storage.transaction():
            entry = archive.archived(storage, rid)
            if entry is None:
                if storage.fetch([rid]):
                    raise InvalidInput(f"record {rid} is live, not archived; nothing to restore")
                raise NotFound(
                    f"no archived record {rid} in {engine.path}; it was never archived, "
                    "or the archive was purged"
                )
            _check_restorable(storage, [entry.stored])
            archive.restore_entries(storage, [entry.seq])
        engine.after_write([entry.stored])
    return entry.stored.record


def archive_by_hand(engine: EngineParts, record_ids: Sequence[str], detail: str) -> int:
    """See :meth:`.MemoryEngine.archive`."""
    if not isinstance(detail, str) or not detail.strip():
        raise InvalidInput("detail must say why the records are archived")
    ids = list(dict.fromkeys(parse_record_id(rid) for rid in record_ids))
    storage = sqlite_storage(engine)
    with engine.lock:
        with storage.transaction():
            live = storage.existing_ids(ids)
            missing = [rid for rid in ids if rid not in live]
            if missing:
                shown = ", ".join(missing[:5]) + (" ..." if len(missing) > 5 else "")
                raise NotFound(
                    f"{len(missing)} of the records to archive are not live in {engine.path}: "
                    f"{shown}; nothing was archived"
                )
            entries = [(rid, "forgotten", detail.strip(), None) for rid in ids]
            archive.archive_records(storage, entries, engine.now())
        engine.index.remove_many(ids)
        engine.after_write(())
    return len(ids)


def reinforce(engine: EngineParts, record_id: str, rate: float) -> Record:
    """See :meth:`.MemoryEngine.reinforce`.

    Strength moves ``rate`` of the way from its decayed value to 1.
    """
    rid = parse_record_id(record_id)
    storage = engine.storage
    with engine.lock:
        with storage.transaction():
            current = storage.fetch([rid]).get(rid)
            if current is None:
                raise NotFound(f"no live record {rid} in {engine.path}; restore it if archived")
            rec = current.record
            now = engine.now()
            since, half = decay_terms(
                engine.fold_policy,
                rec.importance,
                rec.metadata.get("tier"),
                rec.created_at,
                rec.accessed_at,
                rec.access_count,
                current.strength_at,
            )
            decayed = effective_strength(rec.strength, since, half, now)
            record = replace(
                rec,
                strength=min(1.0, decayed + (1.0 - decayed) * rate),
                accessed_at=now,
                access_count=rec.access_count + 1,
            )
            row = replace(current, record=record, strength_at=None)
            storage.replace([row])
        engine.after_write([row])
    return record


def purge_archive(
    engine: EngineParts, *, before: float | None = None, reason: str | None = None
) -> int:
    """See :meth:`.MemoryEngine.purge_archive`."""
    if reason is not None and reason not in archive.REASONS:
        raise InvalidInput(
            f"reason must be one of {', '.join(archive.REASONS)}, or None; got {reason!r}"
        )
    if before is not None and (
        isinstance(before, bool) or not isinstance(before, (int, float)) or not np.isfinite(before)
    ):
        raise InvalidInput(f"before must be a time in Unix seconds, got {before!r}")
    storage = sqlite_storage(engine)
    with engine.lock:
        with storage.transaction():
            purged = archive.purge(storage, before, reason)
        if purged:
            archive.vacuum(storage)
    return purged
