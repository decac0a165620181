"""Folding's verbs on a live engine: fold, unfold, restore, reinforce, purge.

:mod:`.folding` decides what a fold does from a snapshot and
:mod:`.storage.archive` holds the archive's SQL; the functions here apply them
to an engine's store and in-memory index, one transaction each, under the
engine's lock. :class:`~prime_memory_folding.engine.facade.MemoryEngine` exposes them
as methods of the same names.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, cast

import numpy as np
import numpy.typing as npt

from ..core.address import domain_prime_of, parse_record_id
from ..core.index import LABEL_PAIRS, TagQuery, rows_reaching
from ..core.primes import Kind
from ..core.records import Record
from ..errors import InvalidInput, NotFound
from ..fold.folding import (
    MAX_REPORTED,
    FoldPlan,
    FoldPolicy,
    FoldReport,
    Merge,
    Snapshot,
    decay_terms,
    effective_strength,
    fold_groups,
    plan_fold,
    prune_margin,
)
from ..fold.gc_pause import paused_gc
from ..fold.links import (
    COMMON_WORD_ROWS,
    COMMON_WORD_SHARE,
    SCREEN_SLACK,
    probe_rows,
    unlisted_partner_sizes,
    word_set,
)
from ..storage import SqlStorage, StoredRow, archive, fold_marks, pushdown_of, tidy_text_index
from . import writes
from .cite_check import CitationCheck, expired_and_stale
from .text_cache import TextCache, TextCacheFailed
from .vector_cache import VectorCache, VectorSource

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


def policy_key(policy: FoldPolicy) -> str:
    """What an incremental fold needs to match the last fold's policy on.

    Decay, prune and link rules: a fold under other ones screens everything again.
    """
    fields = (
        policy.working_half_life,
        policy.short_term_half_life,
        policy.long_term_half_life,
        policy.short_term_from,
        policy.long_term_from,
        policy.permanent_from,
        policy.spacing_factor,
        policy.prune_below,
        policy.similarity,
        policy.word_overlap,
    )
    if math.isfinite(policy.cite_expiry_s):
        # Expiry changes when memories about code fade out: their prune moments.
        return f"v1:{fields!r}:cites{(policy.cite_expiry_days, policy.cite_expiry_factor)!r}"
    return f"v1:{fields!r}"


#: An incremental fold that would screen more than this share of the store
#: reads it all instead: past that, one pass over the table is cheaper.
_INCREMENTAL_SHARE = 0.2


def fold(
    engine: EngineParts,
    *,
    dry_run: bool = False,
    now: float | None = None,
    policy: FoldPolicy | None = None,
    progress: FoldProgress | None = None,
    keep_apart: Iterable[str] = (),
    merge_again: Iterable[str] = (),
    full: bool = False,
    citations: CitationCheck | None = None,
) -> FoldReport:
    """See :meth:`.MemoryEngine.fold`.

    ``citations`` checks the citations of expired memories about code (the
    engine's checker, with its cache); a new one when None.
    """
    if isinstance(keep_apart, str):
        raise InvalidInput("keep_apart must be a list of record ids, not one string; wrap it: [id]")
    if isinstance(merge_again, str):
        raise InvalidInput(
            "merge_again must be a list of record ids, not one string; wrap it: [id]"
        )
    apart = frozenset(parse_record_id(rid) for rid in keep_apart)
    again = sorted({parse_record_id(rid) for rid in merge_again})
    steps = 5
    names = ("reading records", "decaying and pruning", "finding candidates",
             "checking candidates")  # fmt: skip

    def step(name: str) -> None:
        if progress is not None:
            done = names.index(name) if name in names else steps if name == "done" else steps - 1
            progress(name, done, steps)

    if policy is None:
        policy = engine.fold_policy
    elif not isinstance(policy, FoldPolicy):
        raise InvalidInput(f"policy must be a FoldPolicy, got {type(policy).__name__}")
    if now is not None and (
        isinstance(now, bool) or not isinstance(now, (int, float)) or not np.isfinite(now)
    ):
        raise InvalidInput(f"now must be a time in Unix seconds, got {now!r}")
    if not isinstance(full, bool):
        raise InvalidInput(f"full must be True or False, got {full!r}")
    full = full or policy.exhaustive
    checker = citations if citations is not None else CitationCheck()
    when = engine.now() if now is None else float(now)
    storage = engine.storage
    started = time.perf_counter()
    with engine.lock, archive.bulk_cache(storage), paused_gc():
        bytes_before = storage.size_bytes()
        step("reading records")
        if not (full or dry_run) and _changed_since_fold(storage, policy):
            # An incremental fold looks up each new record's words: in fewer
            # segments of the full-text index, each look-up seeks less.
            tidy_text_index(storage)
        with archive.read_snapshot(storage):
            engine.refresh()
            seen = storage.newest_change()
            kept, released = _kept_apart(storage, again)
            source = _read(engine, storage, policy, when, full, step, released)
            expires, stale = expired_and_stale(storage, checker, policy, when)
            plan = plan_fold(
                source.planned(),
                policy,
                when,
                incremental=source.incremental,
                step=step,
                apart=apart,
                kept_apart=kept,
                expires=expires,
                stale=stale,
            )
            source = source.without_snapshot()  # the plan keeps what it needs
        step("preparing folded records" if dry_run else "writing")
        primes: dict[Kind, dict[str, int]] = {}
        new_rows: list[StoredRow] = []
        if dry_run:
            engine.registry.reload()
            new_rows = _folded_rows(engine, plan.merges, engine.registry.primes, when)
        elif source.nothing_to_do and not plan.stale and storage.newest_change() == seen:
            pass  # nothing new, nothing due: an incremental fold writes nothing
        else:
            # No other writer overlaps this transaction (on PostgreSQL an advisory
            # lock makes servers take turns), so a change since the read shows
            # as a newer change-log position: the plan is then made again here.
            with storage.exclusive():
                engine.refresh()
                if storage.newest_change() != seen or _kept_apart(storage, again)[0] != kept:
                    kept, released = _kept_apart(storage, again)
                    source = _read(engine, storage, policy, when, full, None, released)
                    expires, stale = expired_and_stale(storage, checker, policy, when)
                    plan = plan_fold(
                        source.planned(),
                        policy,
                        when,
                        incremental=source.incremental,
                        apart=apart,
                        kept_apart=kept,
                        expires=expires,
                        stale=stale,
                    )
                    source = source.without_snapshot()
                if again:
                    fold_marks.drop_kept_apart(storage, again)
                primes = writes.assign_primes(engine.registry, storage, _items(plan.merges))
                new_rows = _folded_rows(engine, plan.merges, primes, when)
                entries: list[tuple[str, str, str, str | None]] = [
                    (rid, "pruned", f"strength {eff:.4g} fell below {policy.prune_below}", None)
                    for rid, eff in plan.pruned
                ]
                entries.extend((rid, "stale", detail, None) for rid, detail in plan.stale)
                for merge, row in zip(plan.merges, new_rows):
                    into = row.record.record_id
                    detail = f"folded with {len(merge.member_ids) - 1} similar record(s)"
                    entries.extend((rid, "folded", detail, into) for rid in merge.member_ids)
                archive.archive_records(storage, entries, when)
                # A folded record stands for its members in the groups kept apart.
                fold_marks.carry_kept_apart(
                    storage,
                    [
                        (rid, [row.record.record_id])
                        for merge, row in zip(plan.merges, new_rows)
                        for rid in merge.member_ids
                    ],
                )
                archive.set_strengths(storage, plan.decayed, when)
                fold_marks.replace_marks(
                    storage,
                    plan.marks,
                    forget=[*plan.unmarked, *source.vanished, *(rid for rid, _ in plan.stale)],
                    everything=not source.incremental,
                    compare=source.incremental,
                )
                # Everything up to here has been screened; the folded records
                # inserted next are new to the next fold.
                screened_to = storage.newest_change()
                _set_word_sizes(storage, plan, new_rows, source.incremental, screened_to)
                _set_screened(storage, plan, source.prints, screened_to)
                fold_marks.set_fold_state(storage, screened_to, policy_key(policy), plan.held)
                storage.insert(new_rows)
                storage.set_meta(LAST_FOLD_KEY, repr(when))
                newest = storage.newest_change()
            engine.caught_up(newest)
            engine.registry.add(primes)
            index = engine.held_index
            if index is not None:  # PostgreSQL holds none unless a survey read it
                for rid, strength in plan.decayed:
                    index.restamp(rid, strength, when)
                # Most rows may go at once: drop them in one pass rather than reload the index.
                index.remove_many([entry[0] for entry in entries])
            engine.after_write(new_rows)
            if len(entries) >= max(1_000, source.records // 10):
                # A tenth of the store or more went: the full-text index is
                # merged anew without their entries (every later word look-up
                # seeks in one segment), and the log is copied into the file.
                tidy_text_index(storage, everything=True)
                archive.checkpoint(storage)
        folded = sum(len(m.member_ids) for m in plan.merges)
        created_ids = tuple(row.record.record_id for row in new_rows)
        step("done")
        return FoldReport(
            dry_run=dry_run,
            now=when,
            records_before=source.records,
            records_after=source.records
            - len(plan.pruned)
            - len(plan.stale)
            - folded
            + len(plan.merges),
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
            incremental=source.incremental,
            screened=source.screened,
            stale=len(plan.stale),
            stale_ids=tuple(rid for rid, _ in plan.stale[:MAX_REPORTED]),
            stale_details=dict(plan.stale[:MAX_REPORTED]),
        )


def _kept_apart(
    storage: SqlStorage, again: Sequence[str]
) -> tuple[list[frozenset[str]], list[str]]:
    """The groups this fold keeps apart (those unfolds recorded, less those
    ``again`` names), and the records of the groups let go, which it screens.

    Raises:
        InvalidInput: an id of ``again`` is in no group kept apart.
    """
    groups = fold_marks.kept_apart(storage)
    loose = sorted(set(again).difference(*groups))
    if loose:
        raise InvalidInput(
            f"record(s) {', '.join(loose)} are kept apart from nothing, so there is nothing "
            "to merge again; give ids that an unfold brought back"
        )
    kept = [group for group in groups if group.isdisjoint(again)]
    released = sorted(set().union(*(g for g in groups if not g.isdisjoint(again))))
    return kept, released


@dataclass(frozen=True)
class _Source:
    """What a fold read: the records to plan over, and how they were chosen."""

    snapshot: Snapshot | None
    incremental: bool
    #: Live records in the store.
    records: int
    #: Records screened for near-duplicates.
    screened: int
    #: Changed records that no longer exist: their prune moments go.
    vanished: tuple[str, ...] = ()
    #: Nothing changed since the last fold and nothing is due.
    nothing_to_do: bool = False
    #: Each screened record's fingerprint (see :func:`_fingerprints`), by id.
    prints: Mapping[str, str] = field(default_factory=dict)

    def planned(self) -> Snapshot:
        """The records to plan over (none when there is nothing to do)."""
        return archive.empty_snapshot() if self.snapshot is None else self.snapshot

    def without_snapshot(self) -> _Source:
        return replace(self, snapshot=None)


def _read(
    engine: EngineParts,
    storage: SqlStorage,
    policy: FoldPolicy,
    now: float,
    full: bool,
    step: Callable[[str], None] | None,
    released: Sequence[str] = (),
) -> _Source:
    """The records a fold plans over: all of them, or what changed and what it touches.

    ``released`` count as changed: records no longer kept apart, which may now fold.
    """
    source = None if full else _incremental(engine, storage, policy, now, released)
    if source is None:
        held = engine.held_index
        snapshot = archive.read_snapshot_columns(storage, None if held is None else held.vectors_of)
        source = _Source(snapshot, False, len(snapshot), len(snapshot))
    if step is not None:
        step("decaying and pruning")
    return source


def _incremental(
    engine: EngineParts,
    storage: SqlStorage,
    policy: FoldPolicy,
    now: float,
    released: Sequence[str] = (),
) -> _Source | None:
    """The records an incremental fold plans over, or None when it must be a full fold.

    Those are the records new or changed since the last fold, every record
    one of them might fold with, and the records due for pruning. Candidates
    come from the full-text index: a record's rare words (held by at most
    ``COMMON_WORD_ROWS`` records or a ``COMMON_WORD_SHARE`` of the store,
    whichever is more) lead to every record it could overlap with
    enough (see :func:`.links.linked_pairs`); a record of mostly common
    words is compared by vector with every record instead, in the engine's
    in-memory index.
    """
    state = fold_marks.fold_state(storage)
    if state is None or state[1] != policy_key(policy):
        return None
    changed, _, gap = storage.changes_since(state[0])
    if gap:
        return None
    held = engine.held_index
    records = storage.count() if held is None else len(held)
    waiting = fold_marks.held_by_last_fold(storage)
    changed_ids = [rid for rid in dict.fromkeys([*changed, *waiting, *released]) if rid]
    if len(changed_ids) > max(1_000, _INCREMENTAL_SHARE * records):
        return None
    due = fold_marks.due_for_pruning(storage, now + prune_margin(now))
    if not changed_ids and not due:
        return _Source(None, True, records, 0, nothing_to_do=True)
    with archive.mapped_file(storage):
        sizes = _word_sizes(storage, state[0])
        clean = _screened_before(storage, state[0], exclude={*waiting, *released})
        return _screened(engine, storage, policy, records, changed_ids, due, sizes, clean)


def _changed_since_fold(storage: SqlStorage, policy: FoldPolicy) -> bool:
    """Whether anything was written since the last fold, which had this policy's rules
    (otherwise this fold is a full one, which looks no word up)."""
    state = fold_marks.fold_state(storage)
    if state is None or state[1] != policy_key(policy):
        return False
    return storage.newest_change() != state[0]


def _screened(
    engine: EngineParts,
    storage: SqlStorage,
    policy: FoldPolicy,
    records: int,
    changed_ids: list[str],
    due: list[str],
    sizes: Mapping[str, npt.NDArray[np.int64]] | None = None,
    clean: Mapping[str, str] | None = None,
) -> _Source:
    """:func:`_incremental`'s records: the changed ones and all they may fold with.

    ``sizes``: the numbers of distinct words the store's records may have, by
    group key (see :func:`_word_sizes`); None when unknown. ``clean``: the
    records the last fold screened and left live, with their fingerprints
    (see :func:`_screened_before`): one that has not changed since can fold
    only with records new since, which are all planned over here, so it
    leads to no other record.
    """
    fresh = archive.read_snapshot_of(storage, record_ids=changed_ids)
    vanished = tuple(sorted(set(changed_ids) - set(fresh.record_ids)))
    rowids: set[int] = set()
    scan: list[int] = []
    lists: dict[str, npt.NDArray[np.int64] | None] = {}
    # Common past a share of the store, as in a full fold: fewer records then
    # consist mostly of common words, which only a pass over every vector finds.
    limit = max(COMMON_WORD_ROWS, int(records * COMMON_WORD_SHARE))

    texts = _fold_texts(engine)
    look_up = (
        functools.partial(fold_marks.rows_with_word, storage)
        if texts is None
        else _cached_rows(texts)
    )

    def posting(word: str) -> npt.NDArray[np.int64] | None:
        """``word``'s rows from the full-text index (None when common), asked once."""
        if word not in lists:
            lists[word] = look_up(word, limit)
        return lists[word]

    keys = fold_groups(fresh)
    prints = _fingerprints(fresh)
    clean = clean or {}
    for i in np.flatnonzero(fresh.has_vector).tolist():
        if clean.get(fresh.record_ids[i]) == prints[i]:
            continue
        words = word_set(fresh.contents[i])
        probe = probe_rows(words, policy.word_overlap, posting)
        if probe is None:
            # Every word was asked for. A partner that holds none of the listed
            # ones has a size the store may not hold in this group at all.
            listed = [rows for rows in map(lists.get, words) if rows is not None]
            known = None if sizes is None else sizes.get(keys[i], _NO_SIZES)
            if policy.word_overlap <= 0 or known is None:
                scan.append(i)
                continue
            low, high = unlisted_partner_sizes(len(words), len(words) - len(listed),
                                               policy.word_overlap)  # fmt: skip
            if low <= high and np.searchsorted(known, low) < np.searchsorted(known, high, "right"):
                scan.append(i)
                continue
            if listed:
                rowids.update(np.unique(np.concatenate(listed)).tolist())
            continue
        lead, need = probe
        found, times = np.unique(np.concatenate(lead), return_counts=True)
        rowids.update(found[times >= need].tolist())
    near = _similar(engine, fresh, scan, policy.similarity - SCREEN_SLACK)
    snapshot = archive.read_snapshot_of(
        storage, record_ids=[*fresh.record_ids, *due, *near], rowids=sorted(rowids)
    )
    return _Source(
        snapshot, True, records, len(fresh), vanished, prints=dict(zip(fresh.record_ids, prints))
    )


#: The store's meta key for the numbers of distinct words its records have, by
#: group key, as of the last fold (see :func:`_word_sizes`).
WORD_SIZES_KEY = "fold_word_sizes"
_NO_SIZES = np.zeros(0, dtype=np.int64)


def _word_sizes(storage: SqlStorage, seq: int) -> dict[str, npt.NDArray[np.int64]] | None:
    """Every number of distinct words a live record of each group may have, sorted, as
    the fold that got to change-log position ``seq`` left them; None when unknown.

    A full fold counts them; an incremental one adds those of the records it
    screened and made. A size may stay after the last record of that size
    left: the set only ever holds more than the store, never less, which is
    all an incremental fold needs (see :func:`.links.unlisted_partner_sizes`).
    Records changed since then are the next fold's fresh ones, which it
    adds before it relies on the set.
    """
    raw = storage.get_meta(WORD_SIZES_KEY)
    if raw is None:
        return None
    try:
        state = json.loads(raw)
        if state.get("seq") != seq:
            return None
        return {str(k): np.asarray(sorted(v), dtype=np.int64) for k, v in state["groups"].items()}
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


def _set_word_sizes(
    storage: SqlStorage,
    plan: FoldPlan,
    new_rows: Sequence[StoredRow],
    incremental: bool,
    seq: int,
) -> None:
    """Note the sizes (see :func:`_word_sizes`) as of ``seq``. Call inside the fold's
    transaction, before its new fold state."""
    known: dict[str, npt.NDArray[np.int64]] | None = {}
    if incremental:
        state = fold_marks.fold_state(storage)
        known = None if state is None else _word_sizes(storage, state[0])
    if known is None or plan.word_sizes is None:
        storage.set_meta(WORD_SIZES_KEY, json.dumps({"seq": None}))
        return
    groups = {key: set(values.tolist()) for key, values in known.items()}
    for key, values in plan.word_sizes.items():
        groups.setdefault(key, set()).update(values)
    for row in new_rows:
        key = "\x00".join((row.record.scope, row.record.domain))
        groups.setdefault(key, set()).add(len(word_set(row.record.content)))
    found = {key: sorted(values) for key, values in sorted(groups.items())}
    storage.set_meta(WORD_SIZES_KEY, json.dumps({"seq": seq, "groups": found}))


#: The store's meta key for the records the last fold screened and left live, with
#: their fingerprints (see :func:`_screened_before`).
SCREENED_KEY = "fold_screened"
#: A fold that screened more records than this leaves none noted: the next
#: fold then screens every changed record, as it would without the note.
_SCREENED_NOTED = 4_096


def _fingerprints(snapshot: Snapshot) -> list[str]:
    """A digest of what decides each record's links: its scope, labels, words and vector."""
    found = []
    for i in range(len(snapshot)):
        digest = hashlib.blake2b(digest_size=12)
        parts = (snapshot.scopes[i], snapshot.domains[i], snapshot.subdomains[i],
                 "\x1f".join(snapshot.tags[i]), snapshot.contents[i])  # fmt: skip
        for part in parts:
            digest.update(part.encode("utf-8", "surrogatepass") + b"\x00")
        digest.update(bytes([bool(snapshot.has_vector[i])]) + snapshot.vectors[i].tobytes())
        found.append(digest.hexdigest())
    return found


def _screened_before(storage: SqlStorage, seq: int, exclude: set[str]) -> dict[str, str]:
    """The records the fold that got to change-log position ``seq`` screened and left
    live, with their fingerprints then; but ``exclude``.

    Such a record had no link left among the records live after that fold,
    so while it is unchanged, its links can only be with records new or
    changed since. A store whose change log is read a little way back (on
    PostgreSQL, sequence numbers come before commits) lists it again at the
    next fold: this is how that fold knows it need not look for its partners.
    """
    raw = storage.get_meta(SCREENED_KEY)
    if raw is None:
        return {}
    try:
        state = json.loads(raw)
        if state.get("seq") != seq:
            return {}
        return {str(k): str(v) for k, v in state["prints"].items() if k not in exclude}
    except (ValueError, KeyError, TypeError, AttributeError):
        return {}


def _set_screened(storage: SqlStorage, plan: FoldPlan, prints: Mapping[str, str], seq: int) -> None:
    """Note the records this fold screened and leaves live (see :func:`_screened_before`).

    Call inside the fold's transaction. Not those it prunes, merges or leaves
    unmerged for this fold only (``plan.held``).
    """
    gone = {rid for rid, _ in plan.pruned} | {rid for rid, _ in plan.stale} | set(plan.held)
    gone.update(rid for merge in plan.merges for rid in merge.member_ids)
    kept = {rid: fp for rid, fp in sorted(prints.items()) if rid not in gone}
    state: dict[str, object] = {"seq": None}
    if len(kept) <= _SCREENED_NOTED:
        state = {"seq": seq, "prints": kept}
    storage.set_meta(SCREENED_KEY, json.dumps(state))


def _similar(
    engine: EngineParts, fresh: Snapshot, scan: Sequence[int], threshold: float
) -> list[str]:
    """Ids of live records that ``fresh``'s rows ``scan`` may link with by vector alone.

    Those in the same scope and domain as one of them whose vectors reach
    ``threshold`` with its vector. A link also needs a shared subdomain or
    tag, so in a large group each label's records are compared only with the
    rows that have that label: far fewer pairs, in more and smaller products,
    which pays once the group is large enough (:data:`~..core.index.LABEL_PAIRS`). From
    the engine's index; on a store that answers queries itself (PostgreSQL),
    unless the engine holds the index anyway, from the engine's cache of the
    store's vectors (:class:`~.store_caches.StoreCaches`), read at its first use
    and then caught up through the change log, which knows each row's domain,
    subdomain and tags (these through a 64-bit mask), though not its scope.
    """
    if not len(scan):
        return []
    storage = engine.storage
    source = pushdown_of(storage)
    if engine.held_index is None and source is not None:
        # Holding the whole index would make every read after a write catch it
        # up; the fold uses the engine's cache of the store's vectors, caught up
        # at each use (unless the server keeps no vectors: then they are read
        # each time).
        caches = engine.caches
        cache = None if caches is None else caches.vectors()
        if cache is None:
            cache = VectorCache(cast(VectorSource, source))
        # Only with records of its domain, which its id gives, as theirs do,
        # that share its subdomain or a tag.
        domains = [domain_prime_of(fresh.record_ids[i]) for i in scan]
        labelled = [(fresh.subdomains[i], fresh.tags[i]) for i in scan]
        return cache.similar(fresh.vectors[list(scan)], threshold, domains, labelled)
    index = engine.index
    matrix = index.vectors_of([])
    if matrix is None or matrix[0].shape[1] != fresh.vectors.shape[1] or threshold <= 0:
        return index.similar(fresh.vectors[list(scan)], threshold)
    vectors = matrix[0]
    registry = engine.registry
    loose: list[int] = []  # rows whose labels the index cannot gate on: every vector
    groups: dict[TagQuery, dict[TagQuery, list[int]]] = {}
    for i in scan:
        domain = registry.get(Kind.DOMAIN, fresh.domains[i])
        subdomain = registry.get(Kind.SUBDOMAIN, fresh.subdomains[i])
        tags = [registry.get(Kind.TAG, tag) for tag in fresh.tags[i]]
        primes = [prime for prime in tags if prime is not None]
        if domain is None or subdomain is None or len(primes) < len(tags):
            loose.append(i)
            continue
        scopes = (fresh.scopes[i],)
        labels = groups.setdefault(TagQuery(domain, scopes=scopes), {})
        labels.setdefault(TagQuery(domain, subdomain, scopes=scopes), []).append(i)
        for prime in primes:
            labels.setdefault(TagQuery(domain, all_of=(prime,), scopes=scopes), []).append(i)
    found: list[npt.NDArray[np.int64]] = []
    for group, labels in groups.items():
        rows = index.select(group)
        members = sorted({i for by_label in labels.values() for i in by_label})
        if len(members) * len(rows) <= LABEL_PAIRS * len(labels):
            found.append(rows_reaching(vectors, rows, fresh.vectors[members], threshold))
            continue
        for gates, by_label in labels.items():
            found.append(
                rows_reaching(vectors, index.select(gates), fresh.vectors[by_label], threshold)
            )
    ids = index.record_ids(np.unique(np.concatenate(found))) if found else []
    if loose:
        ids.extend(index.similar(fresh.vectors[loose], threshold))
    return ids


def _fold_texts(engine: EngineParts) -> TextCache | None:
    """The text cache an incremental fold of a store that answers queries itself
    (PostgreSQL) looks words up in: the engine's, which its text queries use too;
    None on SQLite, whose own full-text index answers, and when the text cache
    is turned off or was given up."""
    caches = engine.caches
    return None if caches is None else caches.texts()


def _cached_rows(texts: TextCache) -> Callable[[str, int], npt.NDArray[np.int64] | None]:
    """:meth:`.TextCache.word_lookup`: caught up once for the fold; a look-up gives None
    (compare by vector) when the cache fails."""
    try:
        look_up = texts.word_lookup()
    except TextCacheFailed:
        return lambda word, limit: None

    def rows(word: str, limit: int) -> npt.NDArray[np.int64] | None:
        try:
            return look_up(word, limit)
        except TextCacheFailed:
            return None

    return rows


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


def _check_restorable(storage: SqlStorage, rows: Sequence[StoredRow]) -> None:
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
    storage = engine.storage
    with engine.lock:
        engine.registry.reload()
        with storage.exclusive():
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
            # Later folds keep the members apart from each other, and from what
            # the folded record was kept apart from.
            restored = [m.stored.record.record_id for m in members]
            fold_marks.carry_kept_apart(storage, [(rid, restored)])
            fold_marks.add_kept_apart(storage, restored)
        engine.after_write([m.stored for m in members], removed=[rid])
    return [m.stored.record for m in members]


def restore(engine: EngineParts, record_id: str) -> Record:
    """See :meth:`.MemoryEngine.restore`."""
    rid = parse_record_id(record_id)
    storage = engine.storage
    with engine.lock:
        engine.registry.reload()
        with storage.exclusive():
            entry = archive.archived(storage, rid)
            live = bool(storage.fetch([rid]))
            if live and entry is not None and entry.reason == "replaced":
                raise InvalidInput(
                    f"record {rid} is live and was updated; the archive holds only the versions "
                    "updates replaced, which restore does not bring back: read them with "
                    "history, and update the record with an old version's content to go back"
                )
            if live and entry is None:
                raise InvalidInput(f"record {rid} is live, not archived; nothing to restore")
            if entry is None:
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
    storage = engine.storage
    with engine.lock:
        with storage.exclusive():
            writes.require_all(ids, storage.existing_ids(ids), engine.path, "archived")
            entries = [(rid, "forgotten", detail.strip(), None) for rid in ids]
            archive.archive_records(storage, entries, engine.now())
        index = engine.held_index
        if index is not None:
            index.remove_many(ids)
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
            row = _reinforced(engine, current, rate, engine.now())
            storage.replace([row])
        engine.after_write([row])
    return row.record


def reinforce_many(engine: EngineParts, counts: Mapping[str, int], rate: float) -> int:
    """Reinforce each record as often as ``counts`` says, in one transaction.

    Records forgotten or folded away since are skipped. Returns how many were
    reinforced.
    """
    storage = engine.storage
    with engine.lock:
        with storage.transaction():
            found = storage.fetch(list(counts))
            now = engine.now()
            rows = []
            for rid, current in found.items():
                for _ in range(max(1, counts[rid])):
                    current = _reinforced(engine, current, rate, now)
                rows.append(current)
            storage.replace(rows)
        engine.after_write(rows)
    return len(rows)


def _reinforced(engine: EngineParts, current: StoredRow, rate: float, now: float) -> StoredRow:
    """``current`` recalled at ``now``: strength ``rate`` of the way from decayed to 1."""
    rec = current.record
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
    return replace(current, record=record, strength_at=None)


def purge_archive(
    engine: EngineParts,
    *,
    before: float | None = None,
    reason: str | None = None,
    record_ids: Iterable[str] = (),
) -> int:
    """See :meth:`.MemoryEngine.purge_archive`."""
    if isinstance(record_ids, str):
        raise InvalidInput("record_ids must be a list of record ids, not one string; wrap it: [id]")
    ids = sorted({parse_record_id(rid) for rid in record_ids})
    if ids:
        live = sorted(engine.storage.fetch(ids))
        if live:
            raise InvalidInput(
                f"record {live[0]} is live; forget it first (prime-memory forget {live[0]}), "
                "then purge it"
            )
    if reason is not None and reason not in archive.REASONS:
        raise InvalidInput(
            f"reason must be one of {', '.join(archive.REASONS)}, or None; got {reason!r}"
        )
    if before is not None and (
        isinstance(before, bool) or not isinstance(before, (int, float)) or not np.isfinite(before)
    ):
        raise InvalidInput(f"before must be a time in Unix seconds, got {before!r}")
    storage = engine.storage
    with engine.lock:
        with storage.exclusive():
            purged = archive.purge(storage, before, reason, ids)
            if purged:
                fold_marks.tidy_kept_apart(storage)
        if purged:
            archive.vacuum(storage)
    return purged
