"""Folding: the candidate search against the exhaustive screen, and folds at scale.

1. Agreement with the exhaustive screen (``FoldPolicy(exhaustive=True)``):
   - the families benchmark (synthetic families of near-duplicates and
     paraphrases with related families as hard negatives): pair precision and
     recall of both against the known families, and whether they archive the
     same records (targets: recall >= 0.98 of the exhaustive screen's,
     precision no lower, the same records);
   - every LoCoMo dev turn with its vector from the bundled model, one store
     per conversation: the pairs each merges and the records each archives;
   - on both, an incremental fold after new stores against a full fold of the
     same final store.
2. Folds at two sizes (default 100,000 and 1,000,000) in three layouts: one
   domain, three equal domains, and one domain with no near-duplicates (see
   ``scale_batches`` for the records). Each store is built once; each fold
   runs in a process of its own on a copy; at the smaller size, the median of
   ``--small-repeat`` folds (3) and of as many write floors, taking turns,
   since a fold of a few seconds feels the host's jitter most. Prints each full fold's time, each
   step's share (read, decay and prune, candidate search, exact checks,
   write), peak memory, how each step grew from the smaller size to the
   larger, and the exhaustive screen's fold at the smaller size beside the
   candidate search's as a ratio (with a check that both archive and merge the
   same records). Targets: a full fold of 1,000,000 records <= 60 s with peak
   memory <= 3 GB; growth <= 11x for 10x the records, in every layout (where
   the write floor itself grows more, the target sits below that floor: the
   fold's growth is then set against the floor's).
3. Incremental folds (one-domain layout, both sizes): after the full fold, a
   catch-up fold (it screens the records the full fold made), then ``--new``
   new stores (a tenth near-duplicates of live records) and a timed fold, and
   a timed fold with nothing new. Targets at 1,000,000 records: <= 2 s after
   1,000 new stores, <= 0.2 s with nothing new. At the smaller size it checks
   that the incremental fold archives and merges what a full fold of the same
   store does.
4. Fold safety on LoCoMo: recall@10 of the default hybrid before and after a
   default fold (target: within 1 point).
5. Widely shared words (``--shared-layouts``, default all; ``--shared-sizes``,
   default 20,000 and 200,000; ``--backends`` SQLite and PostgreSQL, each store
   in a throwaway database on ``--pg``): labels such as ``item 123`` with half
   of them near-duplicate vectors (vector-only), notes over a vocabulary of
   400 words in three domains with no near-duplicates (small-vocabulary) and
   in one domain with planted near-duplicate pairs (small-vocabulary-pairs).
   At each size: a full fold (at the smaller size the median of
   ``--small-repeat``, each on a new store), a catch-up fold, ``--new`` new
   stores (a tenth near-duplicates of stored records) and an incremental
   fold, then as many new stores again and the next incremental fold, as a
   server folds again (on PostgreSQL the first fold that looks words up makes
   the engine's text cache, reading every record's text; the next catches it
   up); at the smaller size the candidate search against the exhaustive
   screen (recall of merged pairs, the same records archived) and a full fold
   after the incremental ones, which should merge nothing more. Targets:
   growth <= 11x for 10x the records (where plain SQL reading every record's
   text and vector, timed beside each full fold, grows more, the target sits
   below that floor: the fold's growth is then set against the floor's, as in
   part 2); the next incremental fold at the larger size <= 1/8 of the full
   fold; both merging the new near-duplicates.

The load average is printed at the start and the end: the machine may be
shared. Run from the repository root::

    python3 benchmarks/fold.py
    python3 benchmarks/fold.py --sizes 2000 20000 --skip-locomo   # a quick look
    python3 benchmarks/fold.py --skip-scale --skip-locomo --backends sqlite   # part 5 only
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import itertools
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import _harness as harness
import _shared
import locomo_recall
import numpy as np

from prime_memory_folding import FoldPolicy, MemoryEngine, NotAvailable
from prime_memory_folding.errors import PrimeMemoryError

DIM = 256
DOMAINS = tuple(f"domain{i:02d}" for i in range(10))
SUBDOMAINS = ("notes", "code", "decisions", "incidents")
TAGS = tuple(f"tag{i:03d}" for i in range(200))
T0 = 1_700_000_000.0
#: The FoldReport fields a timed fold passes back from its process.
REPORTED = ("pruned", "folded", "created", "decayed", "records_before", "records_after")
DAY = 86_400.0


def _tags(rng: np.random.Generator) -> tuple[str, ...]:
    weights = 1.0 / np.arange(1, len(TAGS) + 1)
    count = int(rng.integers(1, 4))
    chosen = rng.choice(len(TAGS), size=count, replace=False, p=weights / weights.sum())
    return tuple(TAGS[i] for i in sorted(chosen))


def _members(
    rng: np.random.Generator, centre: np.ndarray, size: int, noise: tuple[float, float]
) -> Iterator[np.ndarray]:
    for _ in range(size):
        jitter = rng.normal(size=DIM)
        jitter *= rng.uniform(*noise) / np.linalg.norm(jitter)
        yield centre + jitter


def timing_records(count: int, seed: int) -> list[dict[str, Any]]:
    """Families of near-duplicates (sizes 1-6) with shared labels."""
    rng = np.random.default_rng(seed)
    items: list[dict[str, Any]] = []
    family = 0
    while len(items) < count:
        size = int(rng.choice([1, 1, 1, 2, 3, 4, 6]))
        centre = rng.normal(size=DIM)
        centre /= np.linalg.norm(centre)
        domain = DOMAINS[int(rng.integers(len(DOMAINS)))]
        subdomain = SUBDOMAINS[int(rng.integers(len(SUBDOMAINS)))]
        tags = _tags(rng)
        importance = float(rng.choice([0.2, 0.5, 0.5, 0.8]))
        for i, vector in enumerate(_members(rng, centre, size, (0.1, 0.3))):
            items.append(
                {
                    "content": f"Family {family} fact, variant {i}. Shared detail {family}.",
                    "domain": domain,
                    "subdomain": subdomain,
                    "tags": tags,
                    "importance": importance,
                    "vector": vector.astype(np.float32),
                }
            )
        family += 1
    return items[:count]


def quality_records(seed: int) -> tuple[list[dict[str, Any]], list[int]]:
    """Known families: near-duplicates, paraphrases, singletons, and related topics."""
    rng = np.random.default_rng(seed)
    items: list[dict[str, Any]] = []
    labels: list[int] = []
    family = 0
    for topic in range(60):
        topic_vector = rng.normal(size=DIM)
        topic_vector /= np.linalg.norm(topic_vector)
        domain = DOMAINS[topic % len(DOMAINS)]
        subdomain = SUBDOMAINS[topic % len(SUBDOMAINS)]
        # Families on one topic are related (cosine about 0.5) but distinct.
        for kind in ("near-duplicate", "paraphrase", "paraphrase", "singleton", "singleton"):
            own = rng.normal(size=DIM)
            own /= np.linalg.norm(own)
            centre = topic_vector + own
            centre /= np.linalg.norm(centre)
            size, noise = {
                "near-duplicate": (int(rng.integers(2, 5)), (0.1, 0.2)),
                "paraphrase": (int(rng.integers(2, 6)), (0.25, 0.4)),
                "singleton": (1, (0.0, 0.0)),
            }[kind]
            tags = ("topic", f"t{topic}")
            for i, vector in enumerate(_members(rng, centre, size, noise)):
                items.append(
                    {
                        "content": f"{kind} {family} version {i}.",
                        "domain": domain,
                        "subdomain": subdomain,
                        "tags": tags,
                        "vector": vector.astype(np.float32),
                    }
                )
                labels.append(family)
            family += 1
    return items, labels


def store_all(engine: MemoryEngine, items: list[dict[str, Any]]) -> list[str]:
    return [r.record_id for r in _shared.store_in_batches(engine, items, show=False, size=2_000)]


def _mark(marks: list[tuple[str, float]], step: str, done: int, total: int) -> None:
    marks.append((step, time.perf_counter()))


@dataclass
class FoldTiming:
    """The folds of one store size: seconds per fold, per step, and the last report."""

    seconds: list[float] = field(default_factory=list)
    steps: dict[str, list[float]] = field(default_factory=dict)
    report: Any = None

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)

    def step_medians(self) -> dict[str, float]:
        return {step: statistics.median(times) for step, times in self.steps.items()}


def _base_store(count: int, seed: int, folder: Path) -> Path:
    base = folder / f"fold-{count}.db"
    with MemoryEngine(base, clock=_shared.Clock(T0)) as engine:
        store_all(engine, timing_records(count, seed))
    return base


def fold_once(base: Path, run: int) -> dict[str, Any]:
    """One default fold of a fresh copy of ``base``: its seconds, steps and counts."""
    copy = base.with_name(f"{base.stem}-{run}.db")
    shutil.copyfile(base, copy)
    marks: list[tuple[str, float]] = []
    with MemoryEngine(copy, clock=_shared.Clock(T0 + 3 * DAY)) as engine:
        started = time.perf_counter()
        report = engine.fold(progress=functools.partial(_mark, marks))
        seconds = time.perf_counter() - started
    copy.unlink()
    return {
        "seconds": seconds,
        "steps": {
            step.split()[0]: ended - began
            for (step, began), (_, ended) in itertools.pairwise(marks)
        },
        "report": {name: getattr(report, name) for name in REPORTED},
    }


def _fold_in_child(base: Path, run: int, timing: FoldTiming) -> None:
    """:func:`fold_once` in a new Python process, so no fold inherits another's heap."""
    result = _in_child({"fold_once": [str(base), run]})
    timing.seconds.append(result["seconds"])
    for step, seconds in result["steps"].items():
        timing.steps.setdefault(step, []).append(seconds)
    timing.report = SimpleNamespace(**result["report"])


def time_folds(
    counts: Sequence[int], seed: int, folder: Path, repeat: int = 1
) -> dict[int, FoldTiming]:
    """``repeat`` default folds of a copy of one store per size, the sizes taking turns.

    Every size's store is built first; then each round folds one copy of each,
    so that a host that speeds up or slows down during the run affects every
    size alike. Each fold runs in a process of its own, so that none runs in a
    heap that an earlier, larger fold left behind.
    """
    bases = {count: _base_store(count, seed, folder) for count in counts}
    timings = {count: FoldTiming() for count in counts}
    for run in range(repeat):
        for count in counts:
            _fold_in_child(bases[count], run, timings[count])
    for base in bases.values():
        base.unlink()
    return timings


def time_fold(count: int, seed: int, folder: Path, repeat: int = 1) -> tuple[float, Any]:
    """Median seconds of ``repeat`` default folds of one size, and the last report."""
    timing = time_folds([count], seed, folder, repeat)[count]
    return timing.median, timing.report


def merge_quality(seed: int, folder: Path) -> tuple[float, float, int, int]:
    items, labels = quality_records(seed)
    with MemoryEngine(folder / "quality.db", clock=_shared.Clock(T0)) as engine:
        ids = store_all(engine, items)
        family_of = dict(zip(ids, labels))
        report = engine.fold(policy=FoldPolicy(prune_below=0.0))
        predicted: set[tuple[str, str]] = set()
        for members in report.folded_from.values():
            predicted.update(itertools.combinations(sorted(members), 2))
    truth = {
        pair
        for pair in itertools.combinations(sorted(ids), 2)
        if family_of[pair[0]] == family_of[pair[1]]
    }
    hits = len(predicted & truth)
    precision = hits / len(predicted) if predicted else 1.0
    recall = hits / len(truth) if truth else 1.0
    return precision, recall, len(predicted), len(truth)


# -- fold safety on LoCoMo (R@10 before/after a default fold) --------------------------
# Runs only when the store answers text queries. Loading, gold normalisation, the
# store and the ranking are locomo_recall's: one store per conversation (default
# hybrid, builtin embedder, clock at the session dates), R@10 of
# ``query(text=question)`` before and after ``fold(now=<the last session's date>)``
# at the default policy. After the fold a folded record stands for its members'
# dialog turns, found through its ``metadata["folded_from"]`` ids.


def text_recall_available(folder: Path) -> bool:
    with MemoryEngine(folder / "probe.db") as engine:
        engine.store("probe")
        try:
            engine.query(text="probe", limit=1)
        except NotAvailable:
            return False
    return True


def dialog_ids_after_fold(
    engine: MemoryEngine, dia_of: dict[str, list[str]]
) -> dict[str, list[str]]:
    """Record id -> dialog ids for every live record, folded ones through their members."""
    known = dict(dia_of)

    def resolve(rid: str, seen: frozenset[str]) -> list[str]:
        if rid in known:
            return known[rid]
        dias: list[str] = []
        if rid not in seen:
            try:
                members = engine.get(rid).metadata.get("folded_from") or ()
            except PrimeMemoryError:
                members = ()
            for member in members:
                dias.extend(d for d in resolve(str(member), seen | {rid}) if d not in dias)
        known[rid] = dias
        return dias

    return {rid: resolve(rid, frozenset()) for rid in engine.match_ids()}


def mean_r10(rows: list[tuple[int, dict[int, float]]]) -> float:
    return 100 * sum(r[10] for _, r in rows) / len(rows) if rows else 0.0


def locomo_fold_safety(folder: Path, data: Path) -> tuple[list[str], bool]:
    """Lines to print, and whether R@10 after the fold is within 1 point of before."""
    if not text_recall_available(folder):
        return ["SKIP: text recall (query(text=...)) is not available in this store"], True
    if not data.is_file():
        return [f"SKIP: no LoCoMo file at {data} (give one with --locomo)"], True
    convs = locomo_recall.load(data)
    before: list[tuple[int, dict[int, float]]] = []
    after: list[tuple[int, dict[int, float]]] = []
    folded = created = records = pruned = 0
    for conv in convs:
        if not conv.turns:
            continue
        engine, dia_of = locomo_recall.build(conv, "builtin")
        with engine:
            before.extend(locomo_recall.recalls(engine, dia_of, conv, locomo_recall.by_text))
            report = engine.fold(now=conv.turns[-1][2])
            folded += report.folded
            created += report.created
            records += report.records_before
            pruned += report.pruned
            mapped = dialog_ids_after_fold(engine, dia_of)
            after.extend(locomo_recall.recalls(engine, mapped, conv, locomo_recall.by_text))
    r_before, r_after = mean_r10(before), mean_r10(after)
    diff = r_after - r_before
    ok = diff >= -1.0
    return [
        f"{len(convs)} conversations, {records:,} records, {len(before):,} questions; "
        f"fold pruned {pruned:,}, merged {folded:,} into {created:,}",
        f"R@10 before {r_before:5.1f}",
        f"R@10 after  {r_after:5.1f}",
        f"difference  {diff:+5.1f} points (target: within 1 point)  {'PASS' if ok else 'MISS'}",
    ], ok


# -- end fold safety on LoCoMo -----------------------------------------------------------


# -- folding at scale ------------------------------------------------------------------
# Stores of short notes with 256-d vectors. About 10 % of the records are in
# families of 2-4 near-duplicates: one note and variants with one or two words
# replaced, their vectors within 0.1-0.3 of a shared centre. A note has 8-14
# content words, drawn from a vocabulary of a million made-up words with a skew
# towards the first ones (rank ~ u**2: a few thousand words are common), and
# 2-4 function words from 24. 5 % of the notes are working memory (importance
# 0.2), which a fold five days after they were stored prunes; the rest are
# long-term. Layouts: one domain, three equal domains, and one domain with no
# near-duplicates at all.

FUNCTION_WORDS = ("the", "a", "an", "to", "of", "and", "in", "on", "for", "with", "is", "was",
                  "at", "by", "from", "it", "this", "that", "we", "our", "be", "as", "or",
                  "not")  # fmt: skip
_SYLLABLES = tuple(c + v for c in "bdfgklmnprstvzhjcw" for v in "aeiou")
VOCABULARY = 1_000_000
LAYOUTS = ("one-domain", "three-domains", "no-duplicates")
#: Share of records in families of near-duplicates (duplicate layouts).
FAMILY_SHARE = 0.10
#: When every scale fold decays to: five days after the records were stored.
FOLD_AT = T0 + 5 * DAY
#: Records per store_many call when building a store.
BUILD_BATCH = 5_000


@functools.cache
def vocabulary() -> tuple[str, ...]:
    def word(i: int) -> str:
        out = []
        i += len(_SYLLABLES)
        while i:
            i, r = divmod(i, len(_SYLLABLES))
            out.append(_SYLLABLES[r])
        return "".join(out)

    return tuple(word(i) for i in range(VOCABULARY))


def _note(rng: np.random.Generator) -> list[str]:
    words = vocabulary()
    content = (VOCABULARY * rng.random(int(rng.integers(8, 15))) ** 2).astype(np.int64)
    function = rng.integers(0, len(FUNCTION_WORDS), int(rng.integers(2, 5)))
    out = [words[r] for r in content.tolist()]
    for k, f in enumerate(function.tolist()):
        out.insert(int(rng.integers(0, len(out) + 1)) if k else 0, FUNCTION_WORDS[f])
    return out


def _variant(rng: np.random.Generator, note: list[str]) -> list[str]:
    """A near-duplicate: one or two words replaced."""
    out = list(note)
    words = vocabulary()
    for _ in range(int(rng.integers(1, 3))):
        out[int(rng.integers(0, len(out)))] = words[int(VOCABULARY * rng.random() ** 2)]
    return out


def _in_batches(families: Iterator[list[dict[str, Any]]]) -> Iterator[list[dict[str, Any]]]:
    """Families of records, whole, in batches of at least :data:`BUILD_BATCH` (the last
    one smaller)."""
    batch: list[dict[str, Any]] = []
    for family in families:
        batch.extend(family)
        if len(batch) >= BUILD_BATCH:
            yield batch
            batch = []
    if batch:
        yield batch


def scale_batches(count: int, seed: int, layout: str) -> Iterator[list[dict[str, Any]]]:
    """``count`` records in batches, the same ones for the same arguments."""
    return _in_batches(_scale_families(count, seed, layout))


def _scale_families(count: int, seed: int, layout: str) -> Iterator[list[dict[str, Any]]]:
    rng = np.random.default_rng(seed)
    # Units of one record, or families of 2-4 (mean 3) with probability q:
    # 3q / (3q + 1 - q) = FAMILY_SHARE.
    q = FAMILY_SHARE / (3 - 2 * FAMILY_SHARE) if layout != "no-duplicates" else 0.0
    made = unit = 0
    while made < count:
        size = int(rng.integers(2, 5)) if rng.random() < q else 1
        size = min(size, count - made)
        centre = rng.normal(size=DIM)
        centre /= np.linalg.norm(centre)
        note = _note(rng)
        labels = {
            "domain": ("work", "home", "research")[unit % 3]
            if layout == "three-domains"
            else "work",
            "subdomain": SUBDOMAINS[int(rng.integers(len(SUBDOMAINS)))],
            "tags": _tags(rng),
            "importance": 0.2 if rng.random() < 0.05 else 0.5,
        }
        family: list[dict[str, Any]] = []
        for i, vector in enumerate(_members(rng, centre, size, (0.1, 0.3))):
            words = note if i == 0 else _variant(rng, note)
            family.append({"content": " ".join(words) + ".", "vector": vector.astype(np.float32),
                           **labels})  # fmt: skip
        yield family
        made += size
        unit += 1


def build_scale_store(path: Path, count: int, seed: int, layout: str, quiet: bool) -> float:
    """Build the store; returns seconds."""
    started = time.perf_counter()
    progress = _shared.Progress(f"building {count:,} ({layout})", count, enabled=not quiet)
    done = 0
    with MemoryEngine(path, clock=_shared.Clock(T0), embedder="none") as engine:
        for batch in scale_batches(count, seed, layout):
            engine.store_many(batch)
            done += len(batch)
            progress.update(done)
    return time.perf_counter() - started


def outcome(path: Path) -> dict[str, Any]:
    """What a fold archived: pruned ids and the member sets of folded records."""
    db = sqlite3.connect(path)
    try:
        pruned = sorted(
            r[0] for r in db.execute("SELECT record_id FROM archive WHERE reason = 'pruned'")
        )
        groups: dict[str, list[str]] = {}
        for rid, into in db.execute(
            "SELECT record_id, folded_into FROM archive WHERE reason = 'folded'"
        ):
            groups.setdefault(into, []).append(rid)
    finally:
        db.close()
    return {"pruned": pruned, "groups": sorted(sorted(g) for g in groups.values())}


STEPS = (("reading", "read"), ("decaying", "decay+prune"), ("finding", "candidate search"),
         ("checking", "exact checks"), ("writing", "write"))  # fmt: skip


def _steps(marks: list[tuple[str, float]]) -> dict[str, float]:
    names = dict(STEPS)
    out: dict[str, float] = {}
    for (step, began), (_, ended) in itertools.pairwise(marks):
        key = names.get(step.split()[0])
        if key is not None:
            out[key] = out.get(key, 0.0) + ended - began
    return out


def child_fold(job: dict[str, Any]) -> dict[str, Any]:
    """One full fold of a copy of a store, in this process: time, steps, memory, outcome."""
    base = Path(job["store"])
    copy = Path(job["copy"])
    shutil.copyfile(base, copy)
    opened = time.perf_counter()
    marks: list[tuple[str, float]] = []
    policy = FoldPolicy(exhaustive=bool(job.get("exhaustive")))
    with MemoryEngine(copy, clock=_shared.Clock(FOLD_AT), embedder="none") as engine:
        open_s = time.perf_counter() - opened
        rss_before = (_shared.memory_kib()["rss_kib"] or 0) * 1024
        started = time.perf_counter()
        report = engine.fold(full=True, policy=policy, progress=functools.partial(_mark, marks))
        seconds = time.perf_counter() - started
    result = {
        "seconds": seconds,
        "open_seconds": open_s,
        "steps": _steps(marks),
        "rss_before": rss_before,
        "peak": (_shared.memory_kib()["peak_rss_kib"] or 0) * 1024,
        "report": {name: getattr(report, name) for name in REPORTED},
    }
    if job.get("outcome"):
        result["outcome"] = outcome(copy)
    if not job.get("keep"):
        copy.unlink()
        for suffix in ("-wal", "-shm"):
            Path(f"{copy}{suffix}").unlink(missing_ok=True)
    return result


def child_write_floor(job: dict[str, Any]) -> dict[str, Any]:
    """The fold's writes in plain SQL, on a fresh copy of the store: the floor of its write step.

    The records the fold (``job["folded"]``, the folded copy) archived are
    copied into the archive and deleted, in the table's order, and the records
    it created are inserted, in one transaction, with the engine's settings
    (write-ahead log, a full sync at commit, the fold's page cache). The
    full-text index and the change log keep up through the store's triggers,
    as they do for the engine. No engine code runs.
    """
    copy = Path(job["copy"])
    shutil.copyfile(job["store"], copy)
    db = sqlite3.connect(copy, isolation_level=None)
    try:
        for pragma in ("journal_mode = WAL", "synchronous = FULL", "cache_size = -262144"):
            db.execute(f"PRAGMA {pragma}")
        db.execute("ATTACH DATABASE ? AS folded", (job["folded"],))
        columns = ", ".join(
            name for _, name, *_ in db.execute("PRAGMA main.table_info(records)") if name != "id"
        )
        db.execute("CREATE TEMP TABLE gone AS SELECT record_id, reason, detail, folded_into "
                   "FROM folded.archive ORDER BY record_id")  # fmt: skip
        db.execute("CREATE TEMP TABLE made AS SELECT record_id FROM folded.records "
                   "WHERE record_id NOT IN (SELECT record_id FROM main.records)")  # fmt: skip
        sql = "SELECT r.id FROM records AS r JOIN gone USING (record_id) ORDER BY r.id"
        rows = [r for (r,) in db.execute(sql)]
        started = time.perf_counter()
        db.execute("BEGIN")
        taken = "r." + columns.replace(", ", ", r.")
        db.execute(
            f"INSERT INTO archive (reason, detail, folded_into, archived_at, {columns}) "
            f"SELECT g.reason, g.detail, g.folded_into, {FOLD_AT}, {taken} "
            "FROM gone AS g JOIN records AS r USING (record_id)"
        )
        for start in range(0, len(rows), 500):
            chunk = rows[start : start + 500]
            db.execute(f"DELETE FROM records WHERE id IN ({','.join('?' * len(chunk))})", chunk)
        db.execute(
            f"INSERT INTO records ({columns}) SELECT {columns} FROM folded.records "
            "WHERE record_id IN (SELECT record_id FROM made)"
        )
        db.execute("COMMIT")
        seconds = time.perf_counter() - started
    finally:
        db.close()
    for suffix in ("", "-wal", "-shm"):
        Path(f"{copy}{suffix}").unlink(missing_ok=True)
    return {"seconds": seconds, "archived": len(rows)}


def new_items(path: Path, count: int, seed: int) -> list[dict[str, Any]]:
    """``count`` new records: a tenth near-duplicates of live ones, the rest new notes."""
    rng = np.random.default_rng(seed)
    db = sqlite3.connect(path)
    try:
        (top,) = db.execute("SELECT max(id) FROM records").fetchone()
        twins = []
        for rowid in sorted(set(rng.integers(1, top + 1, size=count // 5).tolist())):
            row = db.execute(
                "SELECT content, domain, subdomain, tags, vector FROM records WHERE id = ?",
                (rowid,),
            ).fetchone()
            if row is not None and row[4] is not None and len(twins) < count // 10:
                twins.append(row)
    finally:
        db.close()
    items = []
    for content, domain, subdomain, tags, blob in twins:
        vector = np.frombuffer(blob, dtype="<f4").astype(np.float64)
        vector /= np.linalg.norm(vector)
        jitter = rng.normal(size=DIM)
        jitter *= 0.1 / np.linalg.norm(jitter)
        words = _variant(rng, content.rstrip(".").split())
        item = {"content": " ".join(words) + ".", "domain": domain, "subdomain": subdomain}
        item.update(tags=json.loads(tags), vector=(vector + jitter).astype(np.float32))
        items.append(item)
    fresh = count - len(items)
    for batch in scale_batches(fresh, seed + 1, "one-domain"):
        items.extend(batch)
    return items[:count]


def child_incremental(job: dict[str, Any]) -> dict[str, Any]:
    """Incremental folds of a store a full fold left: catch-up, after new stores, nothing new."""
    path = Path(job["store"])
    result: dict[str, Any] = {}
    with MemoryEngine(path, clock=_shared.Clock(FOLD_AT), embedder="none") as engine:
        started = time.perf_counter()
        report = engine.fold()
        result["catch_up"] = {"seconds": time.perf_counter() - started,
                              "incremental": report.incremental, "screened": report.screened,
                              "created": report.created}  # fmt: skip
        items = new_items(path, int(job["new"]), int(job["seed"]))
        started = time.perf_counter()
        for start in range(0, len(items), 100):
            engine.store_many(items[start : start + 100])
        result["store_seconds"] = time.perf_counter() - started
    if job.get("compare"):
        twin = path.with_name(path.stem + "-twin.db")
        shutil.copyfile(path, twin)
    with MemoryEngine(path, clock=_shared.Clock(FOLD_AT), embedder="none") as engine:
        marks: list[tuple[str, float]] = []
        started = time.perf_counter()
        report = engine.fold(progress=functools.partial(_mark, marks))
        result["after_new"] = {"seconds": time.perf_counter() - started,
                               "incremental": report.incremental, "screened": report.screened,
                               "created": report.created, "folded": report.folded,
                               "pruned": report.pruned, "steps": _steps(marks)}  # fmt: skip
        # The records that fold made are new to the next one; after it, nothing is.
        started = time.perf_counter()
        report = engine.fold()
        result["settle"] = {"seconds": time.perf_counter() - started,
                            "screened": report.screened}  # fmt: skip
        started = time.perf_counter()
        report = engine.fold()
        result["nothing_new"] = {"seconds": time.perf_counter() - started,
                                 "incremental": report.incremental,
                                 "screened": report.screened}  # fmt: skip
    if job.get("compare"):
        with MemoryEngine(twin, clock=_shared.Clock(FOLD_AT), embedder="none") as engine:
            engine.fold(full=True)
        result["same_as_full"] = outcome(path) == outcome(twin)
        twin.unlink()
    return result


def child_pg_fold(job: dict[str, Any]) -> dict[str, Any]:
    """A full fold of a PostgreSQL store, in this process: time, steps, peak memory."""
    marks: list[tuple[str, float]] = []
    with MemoryEngine(job["pg_fold"], clock=_shared.Clock(FOLD_AT), embedder="none") as engine:
        rss_before = (_shared.memory_kib()["rss_kib"] or 0) * 1024
        started = time.perf_counter()
        report = engine.fold(full=True, progress=functools.partial(_mark, marks))
        seconds = time.perf_counter() - started
        after = engine.stats().records
    return {
        "seconds": seconds,
        "steps": _steps(marks),
        "rss_before": rss_before,
        "peak": (_shared.memory_kib()["peak_rss_kib"] or 0) * 1024,
        "merged": report.folded,
        "created": report.created,
        "records_after": after,
    }


def pg_full_fold(count: int, seed: int, server: str, quiet: bool) -> dict[str, Any]:
    """Build ``count`` records of the one-domain layout in a new PostgreSQL database,
    then fold them all in a process of its own."""
    with _shared.scratch_database(server, "pmf_fold_full_") as url:
        progress = _shared.Progress(f"building {count:,} on PostgreSQL", count, enabled=not quiet)
        started = time.perf_counter()
        with MemoryEngine(url, clock=_shared.Clock(T0), embedder="none") as engine:
            done = 0
            for batch in scale_batches(count, seed, "one-domain"):
                engine.store_many(batch)
                done += len(batch)
                progress.update(done)
        build = time.perf_counter() - started
        found = _in_child({"pg_fold": url})
    print(
        f"PostgreSQL, {count:,} records (one domain): built in {build:.0f} s; a full fold "
        f"took {found['seconds']:.1f} s ({_shares(found['steps'])}), peak memory "
        f"{found['peak'] / 2**30:.2f} GiB; it folded {found['merged']:,} records into "
        f"{found['created']:,}, {found['records_after']:,} left"
    )
    return {"records": count, "build_seconds": build, **found}


def _in_child(job: dict[str, Any]) -> dict[str, Any]:
    """One job (see ``main``) in a Python process of its own; what it printed, as JSON."""
    done = subprocess.run(
        [sys.executable, __file__, "--child", json.dumps(job)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"a timed fold failed:\n{done.stderr}")
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def _shares(steps: dict[str, float]) -> str:
    total = sum(steps.values()) or 1.0
    parts = []
    for _, name in STEPS:
        seconds = steps.get(name, 0.0)
        parts.append(f"{name} {seconds:.2f} s ({100 * seconds / total:.0f}%)")
    return ", ".join(parts)


def _growth(row: dict[str, Any], small: int, large: int, name: str) -> float:
    return float(row[large]["steps"].get(name, 0.0) / max(row[small]["steps"].get(name, 0.0), 1e-9))


def _median_run(runs: list[dict[str, Any]], key: str) -> dict[str, Any]:
    """The run whose ``key`` is the median (the lower one of an even count)."""
    return sorted(runs, key=lambda run: float(run[key]))[(len(runs) - 1) // 2]


def scale(
    sizes: Sequence[int],
    layouts: Sequence[str],
    seed: int,
    new: int,
    folder: Path,
    quiet: bool,
    exhaustive: bool = True,
    small_repeat: int = 3,
) -> tuple[list[str], dict[str, Any], bool]:
    """Full folds at two sizes per layout, the exhaustive screen, incremental folds."""
    small, large = sizes
    lines: list[str] = []

    def say(line: str) -> None:
        # Each line as soon as it is known: a run at a million records is long.
        lines.append(line)
        print(f"  {line}", flush=True)

    results: dict[str, Any] = {"layouts": {}}
    ok = True
    for layout in layouts:
        row: dict[str, Any] = {}
        stores = {}
        for count in (small, large):
            stores[count] = folder / f"{layout}-{count}.db"
            row[f"build_{count}"] = build_scale_store(stores[count], count, seed, layout, quiet)
        say(f"{layout}:")
        for count in (small, large):
            copy = folder / f"copy-{layout}-{count}.db"
            job = {"store": str(stores[count]), "copy": str(copy), "outcome": count == small}
            floor = folder / f"floor-{layout}-{count}.db"
            runs = []
            # The smaller fold takes a few seconds, where the host's jitter
            # weighs most: the median of a few folds and floors, taking turns.
            for _ in range(small_repeat if count == small else 1):
                done = _in_child({**job, "keep": True})
                done["write_floor"] = _in_child(
                    {"store": str(stores[count]), "copy": str(floor), "folded": str(copy)}
                )
                runs.append(done)
            run = _median_run(runs, "seconds")
            run["write_floor"] = _median_run([r["write_floor"] for r in runs], "seconds")
            run["runs"] = len(runs)
            if layout != "one-domain":  # only that layout goes on to incremental folds
                for suffix in ("", "-wal", "-shm"):
                    Path(f"{copy}{suffix}").unlink(missing_ok=True)
            row[count] = run
            rep = run["report"]
            median = f" (median of {len(runs)})" if len(runs) > 1 else ""
            say(
                f"  {count:>9,} records: full fold{median} {run['seconds']:6.2f} s; "
                f"pruned {rep['pruned']:,}, folded {rep['folded']:,} into {rep['created']:,}; "
                f"peak memory {run['peak'] / 2**30:.2f} GB "
                f"({run['rss_before'] / 2**30:.2f} GB before the fold: the engine and its index)"
            )
            say(f"      {_shares(run['steps'])}")
            say(
                f"      write floor (plain SQL: the same records archived and deleted, the new "
                f"ones inserted, one commit): {run['write_floor']['seconds']:.2f} s; the write "
                f"step {run['steps'].get('write', 0.0) / run['write_floor']['seconds']:.2f}x it"
            )
        if exhaustive:
            ex = _in_child({"store": str(stores[small]), "copy": str(folder / f"ex-{layout}.db"),
                            "outcome": True, "exhaustive": True})  # fmt: skip
            row["exhaustive"] = ex
            same = ex["outcome"] == row[small]["outcome"]
            ratio = ex["seconds"] / row[small]["seconds"]
            search = row[small]["steps"].get("candidate search", 0) + row[small]["steps"].get(
                "exact checks", 0
            )
            ex_search = ex["steps"].get("candidate search", 0) + ex["steps"].get("exact checks", 0)
            say(
                f"  exhaustive screen at {small:,}: fold {ex['seconds']:.2f} s = {ratio:.1f}x the "
                f"candidate search's {row[small]['seconds']:.2f} s (finding links: "
                f"{ex_search:.2f} s vs {search:.2f} s, {ex_search / max(search, 1e-9):.1f}x); "
                "same records archived and "
                f"merged: {'yes' if same else 'NO'}  {'PASS' if same else 'MISS'}"
            )
            ok &= same
        bound = 1.1 * large / small
        floors = [row[c]["write_floor"]["seconds"] for c in (small, large)]
        # The fold less the floor of its writes: what SQLite's own write work
        # (measured alone, side by side) leaves to the engine. Where SQLite's
        # own writes of the fold's result grow more than the target allows,
        # the target sits below that floor: the fold then passes if it grows
        # no more than the floor does.
        judged = against_floor([row[c]["seconds"] for c in (small, large)], floors, bound)
        g_ok = judged.ok
        row["write_floor_growth"] = judged.floor_growth
        row["growth_above_floor"] = judged.net_growth
        say(
            f"  growth {small:,} -> {large:,}: {judged.growth:.1f}x (target <= {bound:.0f}x); "
            "by step: "
            + ", ".join(f"{name} {_growth(row, small, large, name):.1f}x" for _, name in STEPS)
        )
        say(
            f"      the write floor grew {judged.floor_growth:.1f}x{judged.note}; the fold less "
            f"it {judged.net[0]:.2f} s -> {judged.net[1]:.2f} s: {judged.net_growth:.1f}x  "
            f"{'PASS' if g_ok else 'MISS'}"
        )
        # The time target is for a million records; smaller runs only report it.
        t_ok = row[large]["seconds"] <= 60.0 or large < 1_000_000
        m_ok = row[large]["peak"] <= 3 * 2**30
        say(
            f"  full fold of {large:,}: {row[large]['seconds']:.1f} s (target at 1,000,000: "
            f"<= 60 s)  {'PASS' if t_ok else 'MISS'}; peak {row[large]['peak'] / 2**30:.2f} GB "
            f"(target <= 3 GB)  {'PASS' if m_ok else 'MISS'}"
        )
        ok &= g_ok and t_ok and m_ok
        if layout == "one-domain":
            for count in (small, large):
                copy = folder / f"copy-{layout}-{count}.db"
                job = {"store": str(copy), "new": new, "seed": seed + 100}
                inc = _in_child({**job, "compare": count == small})
                row[f"incremental_{count}"] = inc
                a, b, c = inc["catch_up"], inc["after_new"], inc["nothing_new"]
                a_ok = b["seconds"] <= 2.0 and b["incremental"]
                n_ok = c["seconds"] <= 0.2 and c["incremental"]
                say(
                    f"  incremental at {count:,}: catch-up fold {a['seconds']:.2f} s (screened the "
                    f"{a['screened']:,} records the full fold made); {new:,} new stores "
                    f"({inc['store_seconds']:.1f} s), then a fold of {b['seconds']:.2f} s "
                    f"(screened {b['screened']:,}, folded {b['folded']:,} into {b['created']:,}; "
                    f"{_shares(b['steps'])})"
                )
                say(
                    f"      after {new:,} new: {b['seconds']:.2f} s (target <= 2 s)  "
                    f"{'PASS' if a_ok else 'MISS'}; nothing new: {c['seconds'] * 1000:.1f} ms "
                    f"(target <= 200 ms)  {'PASS' if n_ok else 'MISS'}; the fold between them "
                    f"screened the {inc['settle']['screened']:,} records the first one made in "
                    f"{inc['settle']['seconds']:.2f} s"
                )
                if count == large:
                    ok &= a_ok and n_ok
                if "same_as_full" in inc:
                    same = inc["same_as_full"]
                    say(
                        f"      incremental fold == full fold of the same store: "
                        f"{'yes' if same else 'NO'}  {'PASS' if same else 'MISS'}"
                    )
                    ok &= same
                Path(folder / f"copy-{layout}-{count}.db").unlink(missing_ok=True)
        for path in stores.values():
            path.unlink()
        for run_key in (small, large):
            row[run_key].pop("outcome", None)
        row.get("exhaustive", {}).pop("outcome", None)
        results["layouts"][layout] = row
    return lines, results, ok


# -- widely shared words ----------------------------------------------------------------

#: Layouts whose words are widely shared: contents such as ``item 123`` (a
#: common word and a number of its own), half of them in pairs of
#: near-duplicate vectors; and notes over a vocabulary of a few hundred words,
#: each held by hundreds of records or more: in three domains with no
#: near-duplicates, and in one domain with planted near-duplicate pairs.
SHARED_LAYOUTS = ("vector-only", "small-vocabulary", "small-vocabulary-pairs")
SMALL_VOCABULARY = 400
#: Share of units that are a pair of near-duplicates (vector-only, small-vocabulary-pairs).
PAIR_SHARE = {"vector-only": 0.5, "small-vocabulary": 0.0, "small-vocabulary-pairs": 0.05}
BACKENDS = ("sqlite", "postgresql")


def _small_note(rng: np.random.Generator) -> list[str]:
    weights = 1.0 / np.arange(1, SMALL_VOCABULARY + 1) ** 0.7
    chosen = rng.choice(
        SMALL_VOCABULARY, size=int(rng.integers(8, 15)), replace=False, p=weights / weights.sum()
    )
    return [vocabulary()[int(i)] for i in chosen.tolist()]


def _small_variant(rng: np.random.Generator, note: list[str]) -> list[str]:
    """A near-duplicate over the small vocabulary: one word replaced."""
    out = list(note)
    out[int(rng.integers(0, len(out)))] = vocabulary()[int(rng.integers(0, SMALL_VOCABULARY))]
    return out


def shared_batches(
    count: int, seed: int, layout: str, first: int = 0
) -> Iterator[list[dict[str, Any]]]:
    """``count`` records of a widely-shared-words layout in batches, the same ones for the
    same arguments; ``first`` numbers the first ``item``."""
    return _in_batches(_shared_families(count, seed, layout, first))


def _shared_families(
    count: int, seed: int, layout: str, first: int
) -> Iterator[list[dict[str, Any]]]:
    rng = np.random.default_rng(seed)
    made = unit = 0
    while made < count:
        size = min(2 if rng.random() < PAIR_SHARE[layout] else 1, count - made)
        centre = rng.normal(size=DIM)
        centre /= np.linalg.norm(centre)
        labels = {
            "domain": ("work", "home", "research")[unit % 3]
            if layout == "small-vocabulary"
            else "work",
            "subdomain": SUBDOMAINS[int(rng.integers(len(SUBDOMAINS)))],
            "tags": _tags(rng),
        }
        note = _small_note(rng) if layout != "vector-only" else []
        family: list[dict[str, Any]] = []
        for i, vector in enumerate(_members(rng, centre, size, (0.1, 0.3))):
            if layout == "vector-only":
                content = f"item {first + made + i}"
            else:
                content = " ".join(note if i == 0 else _small_variant(rng, note)) + "."
            family.append({"content": content, "vector": vector.astype(np.float32), **labels})
        yield family
        made += size
        unit += 1


def shared_new_items(
    count: int, seed: int, layout: str, stored: int, turn: int = 0
) -> tuple[list[Any], int]:
    """``count`` new records: a tenth near-duplicates of stored ones (one word more or
    replaced, the vector moved by 0.1), the rest new records of the layout; and how many
    near-duplicates. Each ``turn`` takes its near-duplicates' originals from another
    batch of the store, and numbers its items apart."""
    rng = np.random.default_rng(seed + turn)
    batches = shared_batches(min(stored, (turn + 1) * BUILD_BATCH), SEED_OF_STORE, layout)
    old = next(itertools.islice(batches, turn, None), None) or []
    picks = rng.choice(len(old), size=min(count // 10, len(old)), replace=False)
    items: list[dict[str, Any]] = []
    for k in sorted(picks.tolist()):
        item = dict(old[k])
        words = item["content"].rstrip(".").split()
        if layout == "vector-only":
            item["content"] = item["content"] + " again"
        else:
            item["content"] = " ".join(_small_variant(rng, words)) + " again."
        jitter = rng.normal(size=DIM)
        jitter *= 0.1 / np.linalg.norm(jitter)
        vector = item["vector"].astype(np.float64)
        vector /= np.linalg.norm(vector)
        item["vector"] = (vector + jitter).astype(np.float32)
        items.append(item)
    twins = len(items)
    for batch in shared_batches(count - twins, seed + 1 + turn, layout, first=(10 + turn) * stored):
        items.extend(batch)
    return items[:count], twins


#: The seed the stores of the widely-shared-words layouts are built with.
SEED_OF_STORE = 7


@contextlib.contextmanager
def _shared_store(backend: str, server: str) -> Iterator[str]:
    """A fresh store's path or URL, removed afterwards."""
    if backend == "sqlite":
        with tempfile.TemporaryDirectory() as tmp:
            yield str(Path(tmp) / "store.db")
    else:
        with _shared.scratch_database(server, "pmf_fold_shared_") as url:
            yield url


@contextlib.contextmanager
def _store_copy(backend: str, server: str, store: str) -> Iterator[str]:
    """A copy of a closed store (SQLite's backup; PostgreSQL's template), removed afterwards."""
    if backend == "sqlite":
        with tempfile.TemporaryDirectory(dir=Path(store).parent) as tmp:
            copy = str(Path(tmp) / "copy.db")
            with (
                contextlib.closing(sqlite3.connect(store)) as src,
                contextlib.closing(sqlite3.connect(copy)) as dst,
            ):
                src.backup(dst)
            yield copy
    else:
        with _shared.scratch_database(server, "pmf_fold_copy_", template=store) as url:
            yield url


def _settle(backend: str, store: str) -> None:
    """After a bulk load, what PostgreSQL does soon by itself, done before the timed folds
    rather than beside or inside them: autovacuum's VACUUM ANALYZE (hint bits, the
    visibility map, statistics), and the checkpoint that writes the load out (where the
    role may ask for one). SQLite has nothing of the kind."""
    if backend == "postgresql":
        import psycopg

        with psycopg.connect(store, autocommit=True) as conn:
            conn.execute("VACUUM (ANALYZE)")
            with contextlib.suppress(psycopg.errors.InsufficientPrivilege):
                conn.execute("CHECKPOINT")


def _full_fold(engine: MemoryEngine) -> dict[str, Any]:
    marks: list[tuple[str, float]] = []
    started = time.perf_counter()
    report = engine.fold(full=True, progress=functools.partial(_mark, marks))
    return {"seconds": time.perf_counter() - started, "steps": _steps(marks),
            "folded": report.folded, "created": report.created}  # fmt: skip


def _build_shared(store: str, count: int, layout: str) -> float:
    """Store ``count`` records of ``layout``; the seconds it took."""
    started = time.perf_counter()
    with MemoryEngine(store, clock=_shared.Clock(T0), embedder="none") as engine:
        for batch in shared_batches(count, SEED_OF_STORE, layout):
            engine.store_many(batch)
    return time.perf_counter() - started


def _fold_a_copy(backend: str, server: str, store: str) -> tuple[dict[str, Any], float]:
    """A full fold of a copy of ``store``, in an engine newly opened on it, and the read
    floor on the same copy."""
    with _store_copy(backend, server, store) as copy:
        with MemoryEngine(copy, clock=_shared.Clock(FOLD_AT), embedder="none") as engine:
            full = _full_fold(engine)
        return full, read_floor(backend, copy)


def _fold_on(store: str, count: int, job: dict[str, Any], out: dict[str, Any]) -> None:
    """The store's own folds: (``agreement``) the candidate search against the exhaustive
    screen, a full fold and a catch-up, then twice new stores and an incremental fold;
    (``check``) a full fold after them that should merge nothing more."""
    layout = job["layout"]
    with MemoryEngine(store, clock=_shared.Clock(FOLD_AT), embedder="none") as engine:
        if job["agreement"]:
            new, ex = _plans(engine, FOLD_AT)
            a, b = _plan_pairs(new), _plan_pairs(ex)
            out["agreement"] = {"pairs": len(b), "found": len(a & b), "extra": len(a - b),
                                "same_archived": _archived(new) == _archived(ex)}  # fmt: skip
        engine.fold(full=True)
        engine.fold()  # the records the full fold made are new to the next fold
        # Twice, as a server folds again: on PostgreSQL, the first fold that
        # looks words up makes the engine's text cache, which the next catches up.
        for turn, key in enumerate(("incremental", "again")):
            items, twins = shared_new_items(
                int(job["new"]), SEED_OF_STORE + 100, layout, count, turn
            )
            for start in range(0, len(items), 100):
                engine.store_many(items[start : start + 100])
            marks: list[tuple[str, float]] = []
            started = time.perf_counter()
            report = engine.fold(progress=functools.partial(_mark, marks))
            out[key] = {"seconds": time.perf_counter() - started,
                        "incremental": report.incremental, "steps": _steps(marks),
                        "screened": report.screened, "folded": report.folded,
                        "created": report.created, "twins": twins}  # fmt: skip
        if job["check"]:
            engine.fold()
            out["left_over"] = engine.fold(full=True).created


def shared_words_run(job: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """One layout on one backend at both ``sizes``, in this process.

    A store of each size is built and settled. Then ``repeat`` rounds each fold in full a
    copy of the smaller store and one of the larger (a full fold changes its store), so that
    the two sizes' folds alternate and the host's drift weighs on both alike; each in an
    engine newly opened on it, with the read floor beside it. Then each store's own folds
    (:func:`_fold_on`); at the smaller size with the agreement and the check."""
    backend, server, layout = job["backend"], job["server"], job["layout"]
    sizes = [int(size) for size in job["sizes"]]
    out: dict[str, dict[str, Any]] = {str(size): {} for size in sizes}
    with contextlib.ExitStack() as stack:
        stores = [stack.enter_context(_shared_store(backend, server)) for _ in sizes]
        for size, store in zip(sizes, stores):
            out[str(size)]["build_seconds"] = _build_shared(store, size, layout)
            _settle(backend, store)
        for size in sizes:
            out[str(size)].update(fulls=[], floors=[])
        for _ in range(int(job["repeat"])):
            for size, store in zip(sizes, stores):
                full, floor = _fold_a_copy(backend, server, store)
                out[str(size)]["fulls"].append(full)
                out[str(size)]["floors"].append(floor)
        for size, store in zip(sizes, stores):
            run = out[str(size)]
            run["full"] = _median_run(run["fulls"], "seconds")
            run["read_floor"] = statistics.median(run["floors"])
            smaller = size == min(sizes)
            _fold_on(store, size, {**job, "agreement": smaller, "check": smaller}, run)
    return out


@dataclass(frozen=True)
class FloorGrowth:
    """A fold's growth from the smaller size to the larger, against a floor's."""

    growth: float
    floor_growth: float
    net: tuple[float, float]  # the fold less the floor, at each size
    net_growth: float
    below_floor: bool  # the floor itself grows more than the target allows
    ok: bool

    @property
    def note(self) -> str:
        if not self.below_floor:
            return ""
        return (
            f" (above the target: the fold's growth is {self.growth / self.floor_growth:.2f} of it)"
        )


def against_floor(seconds: Sequence[float], floors: Sequence[float], bound: float) -> FloorGrowth:
    """Judge a fold's growth (``seconds`` at the two sizes) with a floor measured beside it:
    within ``bound``, or the fold less the floor within it, or, where the floor grows more
    than ``bound`` (the target sits below that floor), no more than the floor."""
    growth = seconds[1] / max(seconds[0], 1e-9)
    floor_growth = floors[1] / max(floors[0], 1e-9)
    net = (seconds[0] - floors[0], seconds[1] - floors[1])
    net_growth = net[1] / max(net[0], 1e-9)
    below = floor_growth > bound
    ok = growth <= bound or net_growth <= bound or (below and growth <= floor_growth)
    return FloorGrowth(growth, floor_growth, net, net_growth, below, ok)


#: The floor of a fold's read: every record's id, text and vector, in plain SQL.
READ_FLOOR_SQL = "SELECT record_id, content, vector FROM records"


def read_floor(backend: str, store: str, repeat: int = 3) -> float:
    """Seconds to read :data:`READ_FLOOR_SQL` whole on a connection of its own, the median
    of ``repeat``: what reading the store costs the database and the driver alone."""
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        if backend == "sqlite":
            with contextlib.closing(sqlite3.connect(store)) as conn:
                conn.execute(READ_FLOOR_SQL).fetchall()
        else:
            import psycopg

            with psycopg.connect(store) as conn:
                conn.execute(READ_FLOOR_SQL).fetchall()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def _step_growth(small: dict[str, Any], large: dict[str, Any], name: str) -> float:
    return float(large["steps"].get(name, 0.0) / max(small["steps"].get(name, 0.0), 1e-9))


def shared_words(
    sizes: Sequence[int],
    layouts: Sequence[str],
    backends: Sequence[str],
    new: int,
    server: str,
    repeat: int = 3,
) -> tuple[list[str], dict[str, Any], bool]:
    """Full and incremental folds of the widely-shared-words layouts at two sizes."""
    small, large = sizes
    lines: list[str] = []
    results: dict[str, Any] = {}
    ok = True

    def say(line: str) -> None:
        lines.append(line)
        print(f"  {line}", flush=True)

    for backend in backends:
        for layout in layouts:
            row = {}
            # Full folds take a second or less at the smaller size, where the host's
            # jitter weighs most: the median of ``repeat``, at both sizes, alternating.
            job = {"shared": True, "backend": backend, "server": server, "layout": layout,
                   "sizes": [small, large], "new": new, "repeat": repeat}  # fmt: skip
            both = _in_child(job)
            for count in (small, large):
                run = both[str(count)]
                run["runs"] = len(run["fulls"])
                row[count] = run
                full = run["full"]
                each = ", ".join(f"{f['seconds']:.2f}" for f in run["fulls"])
                median = f" (median of {run['runs']}: {each} s)" if run["runs"] > 1 else ""
                say(
                    f"{backend} {layout} {count:,}: built in {run['build_seconds']:.1f} s; full "
                    f"fold{median} {full['seconds']:.2f} s (folded {full['folded']:,} into "
                    f"{full['created']:,}; {_shares(full['steps'])})"
                )
                for key, which in (("incremental", "first"), ("again", "next")):
                    inc = run[key]
                    ratio = inc["seconds"] / max(full["seconds"], 1e-9)
                    merged = inc["folded"] >= 2 * inc["twins"] * 0.98 if inc["twins"] else True
                    # The target is the next fold's, at the larger size: the first
                    # that looks words up on PostgreSQL reads every record's text into
                    # the cache, and at the smaller size the new stores are a large
                    # share of the store.
                    judged = key == "again" and count == large
                    i_ok = inc["incremental"] and merged and (not judged or ratio <= 1 / 8)
                    target = "target <= 1/8" if judged else "makes the caches"
                    if key == "again" and not judged:
                        target = f"not judged: the new stores are {new / count:.0%} of the store"
                    say(
                        f"    {new:,} new stores ({inc['twins']} near-duplicates of stored "
                        f"records), then the {which} incremental fold {inc['seconds']:.2f} s = "
                        f"{ratio:.3f} of the full fold ({target}), screened "
                        f"{inc['screened']:,}, folded {inc['folded']:,} into {inc['created']:,}  "
                        f"{'PASS' if i_ok else 'MISS'}"
                    )
                    say(f"      {which} incremental fold by step: {_shares(inc['steps'])}")
                    ok &= i_ok
                if "left_over" in run:
                    left_ok = run["left_over"] == 0
                    say(
                        f"    a full fold after it merges {run['left_over']} more  "
                        f"{'PASS' if left_ok else 'MISS'}"
                    )
                    ok &= left_ok
                if "agreement" in run:
                    agree = run["agreement"]
                    recall = agree["found"] / agree["pairs"] if agree["pairs"] else 1.0
                    a_ok = recall >= 0.98 and agree["extra"] == 0 and agree["same_archived"]
                    say(
                        f"    against the exhaustive screen: {agree['pairs']:,} merged pairs, "
                        f"recall {recall:.4f}, {agree['extra']} extra, same records archived: "
                        f"{'yes' if agree['same_archived'] else 'NO'}  "
                        f"{'PASS' if a_ok else 'MISS'}"
                    )
                    ok &= a_ok
            bound = 1.1 * large / small
            # As with the write floor above: where reading the store alone grows
            # more than the target allows, the target sits below that floor.
            floors = [row[c]["read_floor"] for c in (small, large)]
            judged = against_floor(
                [row[c]["full"]["seconds"] for c in (small, large)], floors, bound
            )
            g_ok = judged.ok
            row["read_floor_growth"] = judged.floor_growth
            row["growth_above_floor"] = judged.net_growth
            say(
                f"  {backend} {layout}: full fold grew {judged.growth:.1f}x from {small:,} to "
                f"{large:,} (target <= {bound:.0f}x); by step: "
                + ", ".join(
                    f"{name} {_step_growth(row[small]['full'], row[large]['full'], name):.1f}x"
                    for _, name in STEPS
                )
            )
            say(
                f"      the read floor (plain SQL reading every record's text and vector: "
                f"{floors[0]:.2f} s -> {floors[1]:.2f} s) grew {judged.floor_growth:.1f}x"
                f"{judged.note}; the fold less it {judged.net[0]:.2f} s -> {judged.net[1]:.2f} s: "
                f"{judged.net_growth:.1f}x  {'PASS' if g_ok else 'MISS'}"
            )
            ok &= g_ok
            results[f"{backend}/{layout}"] = row
    return lines, results, ok


# -- agreement with the exhaustive screen -------------------------------------------------


def _plan_pairs(plan: Any) -> set[tuple[str, str]]:
    pairs: set[tuple[str, str]] = set()
    for merge in plan.merges:
        pairs.update(itertools.combinations(sorted(merge.member_ids), 2))
    return pairs


def _archived(plan: Any) -> set[str]:
    return {rid for rid, _ in plan.pruned} | {rid for m in plan.merges for rid in m.member_ids}


def _plans(engine: MemoryEngine, now: float) -> tuple[Any, Any]:
    from prime_memory_folding.fold.folding import plan_fold
    from prime_memory_folding.storage import archive

    snapshot = archive.read_snapshot_columns(engine.storage)  # type: ignore[arg-type]
    return (
        plan_fold(snapshot, FoldPolicy(), now),
        plan_fold(snapshot, FoldPolicy(exhaustive=True), now),
    )


def _incremental_agrees(build: Any, now: float) -> bool:
    """Store, fold, store more: an incremental fold and a full one of twin stores agree."""
    outcomes = []
    for full in (False, True):
        engine = build()
        with engine:
            report = engine.fold(now=now, full=full)
            if report.incremental == full:
                return False
            db = engine.storage.db  # type: ignore[attr-defined]
            outcomes.append(sorted(db.execute("SELECT record_id, reason FROM archive")))
    return outcomes[0] == outcomes[1]


def families_agreement(seed: int) -> tuple[list[str], bool]:
    items, labels = quality_records(seed)
    clock = _shared.Clock(T0)
    with MemoryEngine(":memory:", clock=clock, embedder="none") as engine:
        ids = store_all(engine, items)
        new, ex = _plans(engine, T0)
    family_of = dict(zip(ids, labels))
    truth = {
        p for p in itertools.combinations(sorted(ids), 2) if family_of[p[0]] == family_of[p[1]]
    }

    def pr(pairs: set[tuple[str, str]]) -> tuple[float, float]:
        hits = len(pairs & truth)
        return (hits / len(pairs) if pairs else 1.0), (hits / len(truth) if truth else 1.0)

    (p_new, r_new), (p_ex, r_ex) = pr(_plan_pairs(new)), pr(_plan_pairs(ex))
    same = _archived(new) == _archived(ex)
    quality_ok = r_new >= 0.98 * r_ex and p_new >= p_ex and same
    order = np.random.default_rng(seed).permutation(len(items))

    def build() -> MemoryEngine:
        clock = _shared.Clock(T0)
        engine = MemoryEngine(":memory:", clock=clock, embedder="none")
        engine.store_many([items[i] for i in order[: len(items) // 2]])
        engine.fold(full=True)
        engine.store_many([items[i] for i in order[len(items) // 2 :]])
        return engine

    inc_ok = _incremental_agrees(build, T0)
    return [
        f"families benchmark ({len(items)} records, {len(truth)} true pairs):",
        f"  exhaustive screen: pair precision {p_ex:.3f}, recall {r_ex:.3f}",
        f"  candidate search:  pair precision {p_new:.3f}, recall {r_new:.3f} "
        f"({r_new / r_ex if r_ex else 1:.3f} of exhaustive's); same records archived: "
        f"{'yes' if same else 'NO'}  {'PASS' if quality_ok else 'MISS'}",
        f"  incremental fold after new stores == full fold: {'yes' if inc_ok else 'NO'}  "
        f"{'PASS' if inc_ok else 'MISS'}",
    ], quality_ok and inc_ok


def locomo_agreement(data: Path) -> tuple[list[str], bool]:
    if not data.is_file():
        return [f"SKIP: no LoCoMo file at {data} (give one with --locomo)"], True
    from prime_memory_folding.recall.embeddings import load_embedder

    embedder = load_embedder("builtin")
    convs = [c for c in locomo_recall.load(data) if c.turns]
    turns = ex_pairs = new_pairs = shared = 0
    same = inc_ok = True
    for conv in convs:
        vectors = embedder.embed([text for _, text, _ in conv.turns])
        items = [{"content": text, "vector": vector, "metadata": {"dia_id": dia}}
                 for (dia, text, _), vector in zip(conv.turns, vectors)]  # fmt: skip
        times = [when for _, _, when in conv.turns]
        now = times[-1]

        def build(
            fold_at: int | None = None,
            items: list[dict[str, Any]] = items,
            times: list[float] = times,
            now: float = now,
        ) -> MemoryEngine:
            clock = _shared.Clock(times[0])
            engine = MemoryEngine(":memory:", clock=clock, embedder="none")
            for i in range(len(items)):
                clock.now = times[i]
                engine.store_many([items[i]])
                if fold_at is not None and i == fold_at:
                    engine.fold(full=True)
            clock.now = now
            return engine

        with build() as engine:
            new, ex = _plans(engine, now)
        a, b = _plan_pairs(new), _plan_pairs(ex)
        turns += len(items)
        ex_pairs += len(b)
        new_pairs += len(a)
        shared += len(a & b)
        same &= _archived(new) == _archived(ex)
        inc_ok &= _incremental_agrees(functools.partial(build, fold_at=len(items) // 2), now)
    recall = shared / ex_pairs if ex_pairs else 1.0
    precision = shared / new_pairs if new_pairs else 1.0
    ok = recall >= 0.98 and precision >= 1.0 and same
    return [
        f"LoCoMo dev, every turn ({len(convs)} conversations, {turns:,} turns, builtin vectors, "
        "one store per conversation, default policy at the last turn's time):",
        f"  exhaustive screen merges {ex_pairs:,} pairs; candidate search {new_pairs:,}, "
        f"{shared:,} of them the same: recall {recall:.3f} of exhaustive's, "
        f"{new_pairs - shared} extra; same records archived: {'yes' if same else 'NO'}  "
        f"{'PASS' if ok else 'MISS'}",
        f"  incremental fold (half the turns folded, then the rest stored) == full fold: "
        f"{'yes' if inc_ok else 'NO'}  {'PASS' if inc_ok else 'MISS'}",
    ], ok and inc_ok


def main(argv: list[str] | None = None) -> int:
    parser = harness.parser(__doc__, new=(1_000, "new stores before an incremental fold"), seed=7)
    parser.add_argument("--sizes", type=int, nargs=2, default=[100_000, 1_000_000])
    parser.add_argument("--layouts", nargs="+", choices=LAYOUTS, default=list(LAYOUTS))
    parser.add_argument("--skip-exhaustive", action="store_true", help="no exhaustive-screen fold")
    parser.add_argument(
        "--small-repeat", type=int, default=3,
        help="folds (and write floors) at the smaller size; the median counts",
    )  # fmt: skip
    parser.add_argument(
        "--dir", type=Path, default=None, help="folder for the stores (default: a temporary one)"
    )
    parser.add_argument(
        "--locomo",
        type=Path,
        default=locomo_recall.DEFAULT_DATA,
        help="a LoCoMo-format JSON file for the agreement and fold-safety checks",
    )
    parser.add_argument("--skip-locomo", action="store_true", help="skip the LoCoMo checks")
    parser.add_argument("--skip-scale", action="store_true", help="skip the scale layouts")
    parser.add_argument(
        "--shared-layouts", nargs="*", choices=SHARED_LAYOUTS, default=list(SHARED_LAYOUTS),
        help="widely-shared-words layouts (none: skip them)",
    )  # fmt: skip
    parser.add_argument("--shared-sizes", type=int, nargs=2, default=[20_000, 200_000])
    parser.add_argument(
        "--shared-repeat", type=int, default=3,
        help="full folds of each widely-shared-words store, on copies of it; the median counts",
    )  # fmt: skip
    parser.add_argument("--backends", nargs="+", choices=BACKENDS, default=list(BACKENDS))
    parser.add_argument(
        "--pg", default=os.environ.get("PRIME_MEMORY_TEST_PG")
        or "postgresql://postgres@127.0.0.1:5432/postgres",
        help="a PostgreSQL server to make throwaway databases on",
    )  # fmt: skip
    # Internal: one job in a process of its own, as JSON on stdout.
    parser.add_argument(
        "--pg-full-fold", type=int, metavar="N",
        help="only: build N records (one domain) on PostgreSQL and time a full fold",
    )  # fmt: skip
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        job = json.loads(args.child)
        if "pg_fold" in job:
            found = child_pg_fold(job)
        elif "fold_once" in job:
            found = fold_once(Path(job["fold_once"][0]), int(job["fold_once"][1]))
        elif "shared" in job:
            found = shared_words_run(job)
        else:
            run = child_write_floor if "folded" in job else child_fold
            found = (child_incremental if "new" in job else run)(job)
        print(json.dumps(found))
        return 0
    if args.pg_full_fold:
        harness.write_json(
            args.json, pg_full_fold(args.pg_full_fold, args.seed, args.pg, args.quiet)
        )
        return 0
    small, large = args.sizes
    if not 0 < small < large:
        parser.error("--sizes takes two sizes, the smaller first")
    results: dict[str, Any] = {"load_start": os.getloadavg()}
    print(f"start: {harness.conditions_line(harness.conditions())}", flush=True)
    ok = True
    print("agreement with the exhaustive screen (FoldPolicy(exhaustive=True))")
    lines, families_ok = families_agreement(args.seed)
    for line in lines:
        print(f"  {line}")
    if args.skip_locomo:
        lines, locomo_ok = ["LoCoMo: SKIP (--skip-locomo)"], True
    else:
        lines, locomo_ok = locomo_agreement(args.locomo)
    for line in lines:
        print(f"  {line}")
    ok &= families_ok and locomo_ok
    print(
        f"fold scale ({DIM}-d vectors, notes of 10-18 words, {FAMILY_SHARE:.0%} of records in "
        "families of 2-4 near-duplicates;\n  every fold in a process of its own, "
        "on a copy of the store)"
    )
    if not args.skip_scale:
        with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
            lines, scale_results, scale_ok = scale(
                [small, large], args.layouts, args.seed, args.new, Path(tmp), args.quiet,
                exhaustive=not args.skip_exhaustive, small_repeat=args.small_repeat,
            )  # fmt: skip
        ok &= scale_ok
        results.update(scale_results)
    if args.shared_layouts:
        print(
            "widely shared words (full folds of copies of the two sizes' stores, alternating; "
            "then on each store a full fold, catch-up, --new new stores and an incremental fold, "
            "twice; each layout in a process of its own)",
            flush=True,
        )
        lines, shared_results, shared_ok = shared_words(
            args.shared_sizes, args.shared_layouts, args.backends, args.new, args.pg,
            repeat=args.shared_repeat,
        )  # fmt: skip
        ok &= shared_ok
        results["shared_words"] = shared_results
    if not args.skip_locomo:
        print("fold safety on LoCoMo (R@10 before/after a default fold)")
        with tempfile.TemporaryDirectory() as tmp:
            lines, safety_ok = locomo_fold_safety(Path(tmp), args.locomo)
        for line in lines:
            print(f"  {line}")
        ok &= safety_ok
    results["load_end"] = os.getloadavg()
    print(f"end: {harness.conditions_line(harness.conditions())}")
    harness.write_json(args.json, results)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
