"""Structural queries: this engine against three other ways to answer them.

Generates seeded synthetic records, stores them with ``store_many``, and asks
three kinds of question, each returning the full set of matching record ids:

- domain: every record in one domain;
- tags: every record carrying all of 2 (and, separately, 3) tags;
- domain+tags: every record in one domain carrying all of 2 tags.

Four systems answer each query:

- engine: ``MemoryEngine.match_ids``;
- naive scan: a Python loop over record dicts, ``wanted <= record_tags``;
- modulo scan: a loop over every record's tag product, ``product % (pA * pB) == 0``;
- sqlite sql: a separate in-memory SQLite database with ``records`` and a
  normalised ``record_tags`` table, indexed, queried by nested index lookups
  starting from the rarest gate (the fastest of the plans we tried).

The script first checks that all four return identical id sets for every
query and exits with status 1 if not. Only then does it time them, rotating
the order of the systems for every query and round, and reports the median
time per query kind with each system's ratio to the engine.

Unless ``--warm`` is given, a second pass then splits the engine's time with
cold caches into its two largest parts, timed alone:

- index alone: the in-memory index answering, without the lock, the check for
  other processes' commits or argument checks (its answers are checked too);
- coherence check: the ``PRAGMA data_version`` statement with which every
  query first looks for other processes' commits.

In that pass each call (the engine, its parts and SQLite SQL) runs right after
a scan of every record, and the pass prints SQLite SQL's time over each part's:
the ratio an engine could reach if that part were all it did.

Last, a scope-gated case (skipped with ``--scope-records 0``) stores
``--scope-records`` records (default: as many as ``--records``, at most
100,000) spread over 50 scopes in a second store, and asks the same tags
and domain+tags questions three ways, side by side:

- ungated: ``scopes=["*"]``, every scope;
- visible (3): the default, the current scope, the user's and ``global``;
- one scope: ``scopes=[the current scope]``.

It checks every answer against a plain set computation over (scope, domain,
tags), exits with status 1 on a difference, and prints each gated time over
the ungated one.

Run from the repository root::

    python3 benchmarks/structure.py --records 100000
"""

from __future__ import annotations

import argparse
import functools
import itertools
import math
import random
import sqlite3
import statistics
import sys
import tempfile
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import _harness as harness
from _shared import Synthetic, generate, store_in_batches

from prime_memory_folding import MemoryEngine, Record
from prime_memory_folding.core.scopes import GLOBAL, ScopeResolution

#: Tag-intersection targets at TARGET_RECORDS: the engine must be this many times faster.
TARGET_RECORDS = 100_000
SQL = "sqlite sql"
TARGETS = {SQL: 10.0, "modulo scan": 20.0}
TARGET_KINDS = ("tags (2)", "tags (3)")
KINDS = ("domain", "tags (2)", "tags (3)", "domain+tags (2)")
ENGINE = "engine"
SYSTEMS = (ENGINE, "naive scan", "modulo scan", SQL)
INDEX_ALONE = "index alone"
CHECK = "coherence check"
PARTS = (ENGINE, INDEX_ALONE, CHECK)
#: Tag frequency tiers by rank: common, mid and rare. Queries mix them.
TIERS = (("common", range(0, 10)), ("mid", range(10, 60)), ("rare", range(60, 10_000)))
INGEST_BATCH = 10_000
EXIT_MISMATCH = 1
#: The scope-gated case: records spread over this many scopes, at most this many records.
SCOPE_COUNT = 50
SCOPE_RECORDS = 100_000
SCOPE_KINDS = ("tags (2)", "domain+tags (2)")
UNGATED = "ungated"
VISIBLE = "visible (3)"
ONE_SCOPE = "one scope"


@dataclass(frozen=True, slots=True)
class Query:
    """One structural question."""

    kind: str
    domain: str | None
    tags: tuple[str, ...]
    mix: str

    def describe(self) -> str:
        parts = [f"domain={self.domain}"] if self.domain else []
        if self.tags:
            parts.append("tags=" + "+".join(self.tags))
        return f"{self.kind} [{self.mix}] " + " ".join(parts)


System = Callable[[Query], Sequence[str]]
Average = Callable[[Sequence[float]], float]


# -- the query set ---------------------------------------------------------------


def _tier_of(tag_rank: dict[str, int]) -> dict[str, int]:
    return {
        tag: next(i for i, (_, ranks) in enumerate(TIERS) if rank in ranks)
        for tag, rank in tag_rank.items()
    }


def choose_queries(records: Sequence[Synthetic], per_kind: int, seed: int) -> list[Query]:
    """A deterministic query set whose answers are never empty.

    Tag combinations are drawn from combinations that really occur, cycling
    through every mix of frequency tiers (common+common, common+rare, ...), so
    the set holds both large and small answers.
    """
    rng = random.Random(seed * 7919 + 1)
    frequency = Counter(tag for rec in records for tag in rec.tags)
    ranked = sorted(frequency, key=lambda tag: (-frequency[tag], tag))
    tier = _tier_of({tag: rank for rank, tag in enumerate(ranked)})
    queries = [
        Query("domain", domain, (), "-")
        for domain in sorted({rec.domain for rec in records})[:per_kind]
    ]
    for kind, size, with_domain in (
        ("tags (2)", 2, False),
        ("tags (3)", 3, False),
        ("domain+tags (2)", 2, True),
    ):
        by_mix: dict[str, set[tuple[str | None, tuple[str, ...]]]] = {}
        for rec in records:
            for combo in itertools.combinations(rec.tags, size):
                mix = "+".join(TIERS[i][0] for i in sorted(tier[t] for t in combo))
                by_mix.setdefault(mix, set()).add((rec.domain if with_domain else None, combo))
        pools = [sorted(by_mix[mix]) for mix in sorted(by_mix)]
        mixes = sorted(by_mix)
        chosen: set[tuple[str | None, tuple[str, ...]]] = set()
        for i in range(per_kind * 4):
            if len(chosen) == per_kind or not pools:
                break
            position = i % len(pools)
            pick = rng.choice(pools[position])
            if pick not in chosen:
                chosen.add(pick)
                queries.append(Query(kind, pick[0], pick[1], mixes[position]))
    return queries


# -- the four systems ------------------------------------------------------------


def engine_system(engine: MemoryEngine) -> System:
    def run(q: Query) -> Sequence[str]:
        return engine.match_ids(domain=q.domain, tags=q.tags)

    return run


def index_alone_system(engine: MemoryEngine) -> System:
    """The engine's in-memory index answering on its own: no lock, no check for
    other processes' commits and no argument checks. Not a system a caller can
    use; it shows how much of the engine's time the index itself takes."""
    registry, index = engine._registry, engine._index  # a benchmark may look inside

    def run(q: Query) -> Sequence[str]:
        gates = registry.gates(q.domain, None, q.tags, (), ())
        return [] if gates is None else index.select_ids(gates)

    return run


def coherence_check_system(engine: MemoryEngine) -> System:
    """The statement each query runs first to see other processes' commits, alone."""
    storage = engine.storage

    def run(q: Query) -> Sequence[str]:
        storage.data_version()
        return ()

    return run


def naive_system(stored: Sequence[Record]) -> System:
    rows = [{"id": r.record_id, "domain": r.domain, "tags": frozenset(r.tags)} for r in stored]

    def run(q: Query) -> Sequence[str]:
        wanted = frozenset(q.tags)
        if q.domain is None:
            return [row["id"] for row in rows if wanted <= row["tags"]]
        return [row["id"] for row in rows if row["domain"] == q.domain and wanted <= row["tags"]]

    return run


def modulo_system(stored: Sequence[Record], tag_primes: dict[str, int]) -> System:
    ids = [r.record_id for r in stored]
    products = [r.tag_product for r in stored]
    domains = [r.domain for r in stored]

    def run(q: Query) -> Sequence[str]:
        if not q.tags:
            return [rid for rid, d in zip(ids, domains) if d == q.domain]
        required = math.prod(tag_primes[t] for t in q.tags)
        if q.domain is None:
            return [rid for rid, p in zip(ids, products) if p % required == 0]
        return [
            rid for rid, p, d in zip(ids, products, domains) if d == q.domain and p % required == 0
        ]

    return run


def sqlite_system(stored: Sequence[Record]) -> tuple[System, sqlite3.Connection]:
    """A normalised, indexed schema queried with the best plan we found.

    Of ``GROUP BY record_id HAVING count(*) = n``, ``INTERSECT`` and a self
    join, the self join was fastest, by a wide margin when its outer loop
    reads the rarest gate. SQLite's statistics cannot tell which tag value is
    rarest, so the query is built rarest gate first (counts kept on the side,
    as the engine keeps its posting-list sizes) and ``CROSS JOIN`` pins the order.
    """
    db = sqlite3.connect(":memory:")
    db.executescript(
        """
        CREATE TABLE records (
            id INTEGER PRIMARY KEY, record_id TEXT NOT NULL, domain TEXT NOT NULL
        );
        CREATE TABLE record_tags (
            tag TEXT NOT NULL, record INTEGER NOT NULL REFERENCES records(id),
            PRIMARY KEY (tag, record)
        ) WITHOUT ROWID;
        """
    )
    with db:
        db.executemany(
            "INSERT INTO records VALUES (?, ?, ?)",
            ((i, r.record_id, r.domain) for i, r in enumerate(stored)),
        )
        db.executemany(
            "INSERT INTO record_tags VALUES (?, ?)",
            ((tag, i) for i, r in enumerate(stored) for tag in r.tags),
        )
    db.execute("CREATE INDEX records_by_domain ON records (domain, record_id)")
    db.execute("CREATE INDEX record_tags_by_record ON record_tags (record, tag)")
    db.execute("ANALYZE")
    tag_count = dict(db.execute("SELECT tag, count(*) FROM record_tags GROUP BY tag"))
    domain_count = dict(db.execute("SELECT domain, count(*) FROM records GROUP BY domain"))

    def run(q: Query) -> Sequence[str]:
        if not q.tags:
            sql = "SELECT record_id FROM records WHERE domain = ?"
            return [row[0] for row in db.execute(sql, (q.domain,))]
        tags = sorted(q.tags, key=lambda t: tag_count.get(t, 0))
        params: list[str] = []
        if q.domain is not None and domain_count.get(q.domain, 0) < tag_count.get(tags[0], 0):
            # The domain is the rarest gate: scan its index, then probe each tag.
            joins = [
                f"CROSS JOIN record_tags t{i} ON t{i}.tag = ? AND t{i}.record = r.id"
                for i in range(len(tags))
            ]
            sql = f"SELECT r.record_id FROM records r {' '.join(joins)} WHERE r.domain = ?"
            params = [*tags, q.domain]
        else:
            joins = [
                f"CROSS JOIN record_tags t{i} ON t{i}.tag = ? AND t{i}.record = t0.record"
                for i in range(1, len(tags))
            ]
            domain_test = "" if q.domain is None else " AND r.domain = ?"
            sql = (
                f"SELECT r.record_id FROM record_tags t0 {' '.join(joins)} "
                f"CROSS JOIN records r ON r.id = t0.record WHERE t0.tag = ?{domain_test}"
            )
            params = [*tags[1:], tags[0]] + ([] if q.domain is None else [q.domain])
        return [row[0] for row in db.execute(sql, params)]

    return run, db


# -- checking and summing up ----------------------------------------------------------


def same_ids(against: str) -> Callable[[int, Query, Sequence[str], Sequence[str]], str]:
    """Why an answer is not the expected id set (or has an id twice); '' when it is."""

    def differs(i: int, q: Query, answer: Sequence[str], wanted: Sequence[str]) -> str:
        got, expected = set(answer), set(wanted)
        if len(got) == len(answer) and got == expected:
            return ""
        missing, extra = sorted(expected - got), sorted(got - expected)
        return (
            f"with {against} on {q.describe()}: {len(answer)} ids ({len(got)} distinct) "
            f"vs {len(expected)}; missing {missing[:3]}{'...' if len(missing) > 3 else ''}, "
            f"extra {extra[:3]}{'...' if len(extra) > 3 else ''}"
        )

    return differs


def per_kind(
    queries: Sequence[Query], values: Mapping[str, Sequence[float]], average: Average
) -> dict[str, dict[str, float]]:
    """For each kind of query asked, each system's ``average`` of its values on that kind."""
    out = {}
    for kind in KINDS:
        at = [i for i, q in enumerate(queries) if q.kind == kind]
        if at:
            out[kind] = {name: average([v[i] for i in at]) for name, v in values.items()}
    return out


def summarise(
    queries: Sequence[Query], medians: Mapping[str, Sequence[float]], base: str
) -> dict[str, dict[str, Any]]:
    """Per kind: how many queries, each system's median over them, and its ratio to ``base``'s."""
    asked = Counter(q.kind for q in queries)
    return {
        kind: {
            "queries": asked[kind],
            "median_seconds": kind_medians,
            f"ratio_vs_{base}": harness.ratios(kind_medians, base),
        }
        for kind, kind_medians in per_kind(queries, medians, statistics.median).items()
    }


def kind_table(summary: dict[str, dict[str, Any]], base: str, digits: int) -> harness.Table:
    """Each kind's mean hits and each system's median, with its ratio to ``base``'s."""
    first = next(iter(summary.values()))
    hits = first["mean_hits"]
    hit_columns = [f"{name} hits" for name in hits] if isinstance(hits, dict) else ["mean hits"]
    rows = []
    for kind, row in summary.items():
        hits = row["mean_hits"]
        ratios = row[f"ratio_vs_{base}"]
        rows.append(
            [kind, str(row["queries"])]
            + [f"{h:,.0f}" for h in (hits.values() if isinstance(hits, dict) else [hits])]
            + [
                harness.fmt_ms_ratio(t, None if name == base else ratios[name], digits)
                for name, t in row["median_seconds"].items()
            ]
        )
    return ["query kind", "queries", *hit_columns, *first["median_seconds"]], rows


def check_targets(summary: dict[str, dict[str, Any]], records: int) -> list[dict[str, Any]]:
    results = []
    print()
    print(f"targets (tag-intersection queries at {TARGET_RECORDS:,} records):")
    if records != TARGET_RECORDS:
        print(f"  note: this run has {records:,} records; the verdicts below are indicative only")
    for kind in TARGET_KINDS:
        if kind not in summary:
            continue
        for other, wanted in TARGETS.items():
            ratio = summary[kind]["ratio_vs_engine"][other]
            ok = ratio >= wanted
            results.append(
                {"kind": kind, "versus": other, "target": wanted, "ratio": ratio, "pass": ok}
            )
            print(
                f"  {kind:<9} engine vs {other:<12} >= {wanted:>4.0f}x faster: "
                f"{ratio:6.1f}x  {harness.verdict(ok)}"
            )
    return results


def parts_table(parts: dict[str, dict[str, float]]) -> harness.Table:
    """Each kind's median of the engine, its parts and SQLite SQL; SQL's over each part's."""
    rows = [
        [kind, *(harness.fmt_ms(row[name]) for name in (*PARTS, SQL))]
        + [harness.times(row[SQL], row[part], 1) for part in (INDEX_ALONE, CHECK)]
        for kind, row in parts.items()
    ]
    return ["query kind", *PARTS, SQL, f"{SQL} / {INDEX_ALONE}", f"{SQL} / check"], rows


def print_parts(parts: dict[str, dict[str, float]]) -> None:
    print()
    print(
        "where the engine's time goes: a second pass, each call timed right after "
        "a scan of every record"
    )
    print(harness.text_table(*parts_table(parts)))
    print(
        f"{INDEX_ALONE}: the in-memory index's answer without the lock, the check for other "
        "processes' commits or argument checks"
    )
    print(
        f"{CHECK}: the PRAGMA data_version statement every query runs first; "
        f"{SQL} / check bounds the ratio of any engine that runs it"
    )


def print_detail(
    queries: Sequence[Query], medians: dict[str, list[float]], hits: list[int]
) -> None:
    print()
    print("per query (median of rounds):")
    for i, q in enumerate(queries):
        cells = "  ".join(f"{name} {harness.fmt_ms(medians[name][i])}" for name in SYSTEMS)
        print(f"  {q.describe():<58} {hits[i]:>7,} hits  {cells}")


# -- the scope-gated case -------------------------------------------------------------


def scope_names(count: int) -> list[str]:
    """``global``, one user scope and project scopes: ``count`` in all."""
    return [GLOBAL, "user:bench", *(f"project:bench/p{i:02d}" for i in range(count - 2))]


def place_in_scopes(records: Sequence[Synthetic], seed: int) -> list[str]:
    """A scope for each record, uniformly from :func:`scope_names`, the same for a seed."""
    rng = random.Random(seed * 104_729 + 3)
    names = scope_names(SCOPE_COUNT)
    return [names[rng.randrange(len(names))] for _ in records]


def expected_ids(
    q: Query, wanted: set[str] | None, rows: Sequence[tuple[str, str, str, frozenset[str]]]
) -> list[str]:
    """The answer as a plain set computation over (scope, domain, tags); None: every scope."""
    tags = set(q.tags)
    return [
        rid
        for rid, scope, domain, held in rows
        if (wanted is None or scope in wanted)
        and (q.domain is None or domain == q.domain)
        and tags <= held
    ]


def scope_case(args: argparse.Namespace, folder: Path) -> dict[str, Any] | list[str]:
    """Run the scope-gated case: its results, or the disagreements if there are any."""
    count = args.scope_records
    records = generate(count, args.seed)
    placed = place_in_scopes(records, args.seed)
    sizes = Counter(placed)
    current = max(sorted(sizes), key=lambda name: sizes[name])
    who = ScopeResolution(
        current=current, user="user:bench", source="argument", reason="the benchmark's choice"
    )
    with MemoryEngine(folder / "scopes.db", scope=who, embedder="none") as engine:
        stored = store_in_batches(
            engine,
            list(zip(records, placed)),
            lambda pair: {**pair[0].as_item(), "scope": pair[1]},
            label="storing in scopes",
            show=not args.quiet and count >= 20_000,
            size=INGEST_BATCH,
        )
        rows = [(r.record_id, r.scope, r.domain, frozenset(r.tags)) for r in stored]
        mine = [rec for rec, scope in zip(records, placed) if scope == current]
        queries = [
            q for q in choose_queries(mine, args.queries, args.seed) if q.kind in SCOPE_KINDS
        ]
        systems: dict[str, System] = {
            UNGATED: lambda q: engine.match_ids(domain=q.domain, tags=q.tags, scopes=["*"]),
            VISIBLE: lambda q: engine.match_ids(domain=q.domain, tags=q.tags),
            ONE_SCOPE: lambda q: engine.match_ids(domain=q.domain, tags=q.tags, scopes=[current]),
        }
        if args.inject_scope_mismatch:
            honest = systems[VISIBLE]
            systems[VISIBLE] = lambda q: list(honest(q))[1:]
        wanted: dict[str, set[str] | None] = {
            UNGATED: None,
            VISIBLE: set(who.visible),
            ONE_SCOPE: {current},
        }
        problems = []
        for name, run in systems.items():
            problems += harness.disagreements(
                queries,
                {name: run},
                functools.partial(expected_ids, wanted=wanted[name], rows=rows),
                same_ids("the set computation"),
            )
        if problems:
            return problems
        hits = {
            name: [len(expected_ids(q, wanted[name], rows)) for q in queries] for name in systems
        }
        samples = harness.alternate(systems, queries, args.rounds, best_of=3 if args.warm else 1)
    kinds = summarise(queries, harness.medians(samples), UNGATED)
    for kind, row in per_kind(queries, hits, statistics.mean).items():
        kinds[kind]["mean_hits"] = row
    return {
        "records": count,
        "scopes": len(sizes),
        "current": current,
        "current_records": sizes[current],
        "visible": list(who.visible),
        "agreement": True,
        "queries": len(queries),
        "kinds": kinds,
    }


def print_scope_case(case: dict[str, Any]) -> None:
    print()
    print(
        f"scope gate: {case['records']:,} records over {case['scopes']} scopes in a second "
        f"store; the current scope {case['current']} holds {case['current_records']:,}, "
        f"a query sees {len(case['visible'])} scopes by default"
    )
    print(
        f"agreement: OK - every answer equals a set computation over (scope, domain, tags) "
        f"for all {case['queries']} queries"
    )
    print(harness.text_table(*kind_table(case["kinds"], UNGATED, 2)))
    print(
        "median time per query; (Nx) = gated median / ungated median, the same queries "
        "timed side by side in this run"
    )


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = harness.parser(
        __doc__,
        inject=True,
        records=(TARGET_RECORDS, "records to generate"),
        queries=(20, "queries per kind (default 20)"),
        rounds=(5, "timed rounds per query"),
        seed=(1, "seed for records and queries"),
    )
    parser.add_argument(
        "--store", type=Path, help="store file to create (default: a temporary file)"
    )
    parser.add_argument(
        "--warm",
        action="store_true",
        help="time the fastest of 3 back-to-back calls (caches warm) instead of single "
        "interleaved calls",
    )
    parser.add_argument(
        "--scope-records",
        type=int,
        help=f"records of the scope-gated case, over {SCOPE_COUNT} scopes (default: --records, "
        f"at most {SCOPE_RECORDS:,}; 0 skips the case)",
    )
    parser.add_argument("--detail", action="store_true", help="print every query's timings")
    # For the test suite: the visible-scopes answers drop an id.
    parser.add_argument("--inject-scope-mismatch", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.scope_records is None:
        args.scope_records = min(args.records, SCOPE_RECORDS)
    if args.scope_records != 0 and args.scope_records < SCOPE_COUNT:
        parser.error(f"--scope-records must be 0 (skip) or at least {SCOPE_COUNT}")
    harness.at_least(parser, args, records=10, queries=1, rounds=1)
    if args.store is not None and args.store.exists():
        parser.error(f"--store {args.store} already exists; give a path to a new file")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    timing = "fastest of 3 back-to-back calls" if args.warm else "single interleaved calls"
    best_of = 3 if args.warm else 1
    print(
        f"structure benchmark: {args.records:,} records, seed {args.seed}, "
        f"up to {args.queries} queries per kind, {args.rounds} timed rounds of {timing}"
    )
    records = generate(args.records, args.seed)
    with tempfile.TemporaryDirectory(prefix="pmf-bench-") as tmp:
        path = args.store or Path(tmp) / "structure.db"
        with MemoryEngine(path, embedder="none") as engine:
            show = not args.quiet and len(records) >= 20_000
            ingest_seconds, stored = harness.timed(
                store_in_batches, engine, records, Synthetic.as_item, show=show, size=INGEST_BATCH
            )
            print(
                f"ingest: store_many of {len(stored):,} records in {ingest_seconds:.1f} s "
                f"({len(stored) / ingest_seconds:,.0f} records/s, batches of {INGEST_BATCH:,})"
            )
            if len({r.record_id for r in stored}) != len(records):
                print("error: store_many merged distinct records; ids are not unique")
                return EXIT_MISMATCH
            sql, db = sqlite_system(stored)
            systems: dict[str, System] = {
                ENGINE: engine_system(engine),
                "naive scan": naive_system(stored),
                "modulo scan": modulo_system(stored, engine.stats().registries["tag"]),
                SQL: sql,
            }
            if args.inject_mismatch:
                honest = systems["modulo scan"]
                systems["modulo scan"] = lambda q: list(honest(q))[1:]
            queries = choose_queries(records, args.queries, args.seed)
            index_alone = index_alone_system(engine)
            problems = harness.disagreements(
                queries, {**systems, INDEX_ALONE: index_alone}, systems[ENGINE], same_ids(ENGINE)
            )
            hits = [len(systems[ENGINE](q)) for q in queries]
            if not harness.check(
                problems,
                f"agreement: OK - all {len(systems)} systems returned identical id sets for all "
                f"{len(queries)} queries ({sum(hits):,} ids per system), as did the engine's "
                f"{INDEX_ALONE}",
            ):
                return EXIT_MISMATCH
            print()
            medians = harness.medians(
                harness.alternate(systems, queries, args.rounds, best_of=best_of)
            )
            parts = None
            if not args.warm:
                subjects = {
                    ENGINE: systems[ENGINE],
                    INDEX_ALONE: index_alone,
                    CHECK: coherence_check_system(engine),
                    SQL: systems[SQL],
                }
                sweeps = [systems["naive scan"], systems["modulo scan"]]
                samples = harness.alternate(subjects, queries, args.rounds, between=sweeps)
                parts = per_kind(queries, harness.medians(samples), statistics.median)
            db.close()
        scoped = scope_case(args, Path(tmp)) if args.scope_records else None
    if isinstance(scoped, list):
        harness.check(
            scoped,
            "",
            failed="scope gate agreement: FAILED",
            then="no timings reported: the scope gate does not answer the right question",
        )
        return EXIT_MISMATCH
    summary = summarise(queries, medians, ENGINE)
    for kind, row in per_kind(queries, {"hits": hits}, statistics.mean).items():
        summary[kind]["mean_hits"] = row["hits"]
    print(harness.text_table(*kind_table(summary, ENGINE, 1)))
    print("median time per query; (Nx) = that system's median / the engine's median")
    targets = check_targets(summary, args.records)
    if parts is not None:
        print_parts(parts)
    if scoped is not None:
        print_scope_case(scoped)
    if args.detail:
        print_detail(queries, medians, hits)
    harness.write_json(
        args.json,
        {
            "benchmark": "structure",
            "records": args.records,
            "seed": args.seed,
            "rounds": args.rounds,
            "warm": args.warm,
            "python": sys.version.split()[0],
            "sqlite": sqlite3.sqlite_version,
            "ingest_seconds": ingest_seconds,
            "agreement": True,
            "kinds": summary,
            "targets": targets,
            "parts_median_seconds": parts,
            "scope_gate": scoped,
            "queries": [
                {
                    "kind": q.kind,
                    "mix": q.mix,
                    "domain": q.domain,
                    "tags": q.tags,
                    "hits": hits[i],
                    "median_seconds": {n: medians[n][i] for n in SYSTEMS},
                }
                for i, q in enumerate(queries)
            ],
        },
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
