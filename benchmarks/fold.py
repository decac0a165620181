"""Folding: how long a fold takes, and how well it merges.

1. Fold time at two sizes (default 10,000 and 100,000 records): seeded
   synthetic records with 256-dimensional vectors, in families of
   near-duplicates spread over 10 domains, 4 subdomains and Zipf-distributed
   tags. Each size is stored once and folded ``--repeat`` times (default 5),
   each time on a fresh copy of the store file and in a process of its own,
   the sizes taking turns (so that a host whose speed drifts during the run
   affects both alike); a size's time is the median.
   Prints each time, the ratio between them (target: at most 12x for 10x the
   records) and whether the larger fold took at most 30 s.
2. Merge quality: a synthetic set with known families of near-duplicates and
   paraphrases (and related but distinct families as hard negatives), folded
   at the default policy. Pair precision and recall over records that share a
   folded record (targets: precision >= 0.95, recall >= 0.8).
3. Fold safety on LoCoMo: recall@10 of the default hybrid before and after a
   default fold, one store per conversation (built as in locomo_recall.py); a
   folded record counts as its members' dialog turns. Target: after within 1
   point of before. Runs only when the store can answer text queries and the
   file (``--locomo``, default as in locomo_recall.py) exists; ``--skip-locomo``
   leaves it out.

Run from the repository root::

    python3 benchmarks/fold.py
    python3 benchmarks/fold.py --sizes 2000 20000   # a quick look
"""

from __future__ import annotations

import argparse
import functools
import itertools
import json
import shutil
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

import _shared  # noqa: F401  (puts the checkout on sys.path)
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


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


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
    ids: list[str] = []
    for start in range(0, len(items), 2_000):
        ids.extend(r.record_id for r in engine.store_many(items[start : start + 2_000]))
    return ids


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
    with MemoryEngine(base, clock=Clock(T0)) as engine:
        store_all(engine, timing_records(count, seed))
    return base


def fold_once(base: Path, run: int) -> dict[str, Any]:
    """One default fold of a fresh copy of ``base``: its seconds, steps and counts."""
    copy = base.with_name(f"{base.stem}-{run}.db")
    shutil.copyfile(base, copy)
    marks: list[tuple[str, float]] = []
    with MemoryEngine(copy, clock=Clock(T0 + 3 * DAY)) as engine:
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
    done = subprocess.run(
        [sys.executable, __file__, "--fold-once", str(base), str(run)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"a timed fold failed:\n{done.stderr}")
    result = json.loads(done.stdout)
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
    with MemoryEngine(folder / "quality.db", clock=Clock(T0)) as engine:
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs=2, default=[10_000, 100_000])
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--repeat", type=int, default=5, help="folds per size, of copies of one store (median)"
    )
    parser.add_argument("--quiet", action="store_true", help="accepted for the smoke tests")
    parser.add_argument(
        "--locomo",
        type=Path,
        default=locomo_recall.DEFAULT_DATA,
        help="a LoCoMo-format JSON file for the fold-safety check",
    )
    parser.add_argument("--skip-locomo", action="store_true", help="skip the LoCoMo fold safety")
    # Internal: one timed fold of a copy of a store, as JSON on stdout.
    parser.add_argument("--fold-once", nargs=2, metavar=("STORE", "RUN"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.fold_once:
        print(json.dumps(fold_once(Path(args.fold_once[0]), int(args.fold_once[1]))))
        return 0
    small, large = args.sizes
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        print(
            f"fold time ({DIM}-d vectors, families of near-duplicates; "
            f"median of {args.repeat} folds of copies of one store, each in its own process, "
            "the two sizes taking turns)"
        )
        timings = time_folds([small, large], args.seed, folder, args.repeat)
        times = {count: timing.median for count, timing in timings.items()}
        phases = {count: timing.step_medians() for count, timing in timings.items()}
        for count in (small, large):
            report = timings[count].report
            print(
                f"  {count:>7,} records: {times[count]:6.2f} s  "
                f"(pruned {report.pruned:,}, folded {report.folded:,} into "
                f"{report.created:,}, decayed {report.decayed:,}; "
                f"{report.records_before:,} -> {report.records_after:,} records)"
            )
            print("           " + ", ".join(f"{k} {v:.2f} s" for k, v in phases[count].items()))
        ratio = times[large] / times[small]
        scale = large / small
        ratio_ok = ratio <= 1.2 * scale
        time_ok = times[large] <= 30.0 * large / 100_000
        print(
            f"  ratio: {ratio:.1f}x for {scale:.0f}x the records  {'PASS' if ratio_ok else 'MISS'}"
        )
        print(
            "  by step: "
            + ", ".join(
                f"{k} {phases[large][k] / phases[small][k]:.1f}x"
                for k in phases[large]
                if phases[small].get(k)
            )
        )
        print(f"  {large:,} records in {times[large]:.1f} s  {'PASS' if time_ok else 'MISS'}")
        precision, recall, predicted, truth = merge_quality(args.seed, folder)
        print("merge quality (default similarity threshold)")
        p_ok, r_ok = precision >= 0.95, recall >= 0.8
        print(f"  pair precision {precision:.3f} ({predicted} pairs)  {'PASS' if p_ok else 'MISS'}")
        print(f"  pair recall    {recall:.3f} ({truth} pairs)  {'PASS' if r_ok else 'MISS'}")
        print("fold safety on LoCoMo (R@10 before/after a default fold)")
        if args.skip_locomo:
            lines, locomo_ok = ["SKIP: --skip-locomo"], True
        else:
            lines, locomo_ok = locomo_fold_safety(folder, args.locomo)
        for line in lines:
            print(f"  {line}")
        ok = ratio_ok and time_ok and p_ok and r_ok and locomo_ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
