"""Write throughput: ``store_many`` in bulk, single ``store`` calls, and bulk with vectors.

Every phase writes to a store file in a fresh temporary folder (the store runs
in WAL mode with ``synchronous = FULL``, so every commit is flushed to disk):

1. bulk: one ``store_many`` call with N short records and no vectors;
2. single: M ``store`` calls, one transaction each, into the store from phase 1,
   in blocks that take turns with blocks of the commit floor (below);
3. vectors (for context, no target): one ``store_many`` call with V records,
   each with a random 256-dimensional vector, into a new store.

The commit floor puts the single stores' cost in context. Each store is its own
transaction, and a commit under ``synchronous = FULL`` waits for the disk to
flush the write-ahead log, so its cost grows with the pages it writes. Before
phase 2, the script counts the log frames (pages) that one store writes (200
untimed stores), then times bare SQLite commits in other files with the same
settings that each write exactly that many pages (one row updated on each of
that many one-page tables), and commits of one page, for the disk's own flush.
A third floor inserts the very rows that single stores write (every column as
the engine wrote it, prepared in another store) with plain SQL, one ``INSERT``
per transaction, into a copy of the store: the same schema, indexes, triggers
and full-text index, and no engine code. The three kinds of commit take turns
in blocks with the single stores, so all four see the same disk. After
phase 2 it counts a store's pages again (200 more untimed stores), once the
full-text index has gained segments from the single stores.

Records are generated before the clock starts. Run from the repository root::

    python3 benchmarks/ingest.py
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import _harness as harness
from _shared import Progress, generate

from prime_memory_folding import MemoryEngine
from prime_memory_folding.storage.sqlite import WAL_AUTOCHECKPOINT_PAGES

TARGET_RECORDS = 100_000
TARGET_BULK_SECONDS = 20.0
#: The bulk target as a rate, to judge runs of another size.
TARGET_BULK_RATE = TARGET_RECORDS / TARGET_BULK_SECONDS
TARGET_SINGLE_RATE = 2_000.0
EXIT_CHECK_FAILED = 1
#: Single stores and floor commits take turns in blocks of this many.
BLOCK = 500
#: Untimed stores whose log frames are counted, before the single stores; few
#: enough that the log does not reach its checkpoint size while they run.
PROBE_STORES = 200


def bulk(path: Path, items: list[dict[str, Any]], quiet: bool) -> float:
    """Seconds for one ``store_many`` call of ``items`` into a new store at ``path``."""
    if not quiet and len(items) >= 20_000:
        print(f"storing {len(items):,} records in one store_many call...", file=sys.stderr)
    with MemoryEngine(path, embedder="none") as engine:
        return harness.timed(engine.store_many, items)[0]


def connect_like_store(path: Path) -> sqlite3.Connection:
    """A connection to ``path`` with the store's durability and log settings."""
    db = sqlite3.connect(path, isolation_level=None)
    for pragma in (
        "journal_mode = WAL",
        "synchronous = FULL",
        f"wal_autocheckpoint = {WAL_AUTOCHECKPOINT_PAGES}",
    ):
        db.execute(f"PRAGMA {pragma}")
    return db


class CommitFloor:
    """Bare SQLite transactions that each write exactly ``pages`` pages.

    Each updates the one row of each of ``pages`` one-page tables, so a commit
    appends ``pages`` frames to the write-ahead log and flushes it, with almost
    no other work: the disk's cost of committing as much as one store writes.
    The file has the store's settings.
    """

    def __init__(self, path: Path, pages: int) -> None:
        self.path = path
        self.db = connect_like_store(path)
        self.db.execute("BEGIN")
        for i in range(pages):
            self.db.execute(f"CREATE TABLE t{i} (n INTEGER NOT NULL)")
            self.db.execute(f"INSERT INTO t{i} VALUES (0)")
        self.db.execute("COMMIT")
        self.updates = [f"UPDATE t{i} SET n = n + 1" for i in range(pages)]

    def commit(self) -> float:
        """Seconds for one transaction that changes one row on each of the pages."""
        started = time.perf_counter()
        self.db.execute("BEGIN IMMEDIATE")
        for update in self.updates:
            self.db.execute(update)
        self.db.execute("COMMIT")
        return time.perf_counter() - started

    def close(self) -> None:
        self.db.close()


class SqlStoreFloor:
    """The rows that single stores write, inserted with plain SQL: no engine code.

    The store at ``source`` is copied to ``path``, with its schema, indexes,
    triggers, full-text index and records; each commit then inserts one ready
    row (every column as the engine wrote it in another store) with one
    ``INSERT`` in its own transaction. What is left of a single store's time
    above this is the engine's own work: checks, hashing, the duplicate lookup
    and the in-memory index.
    """

    def __init__(self, path: Path, source: Path, rows: Sequence[Sequence[Any]], columns: str):
        self.path = path
        with sqlite3.connect(source) as src, sqlite3.connect(path) as dst:
            src.backup(dst)
        self.db = connect_like_store(path)
        self.rows = iter(rows)
        marks = ",".join("?" * (columns.count(",") + 1))
        self.insert = f"INSERT INTO records ({columns}) VALUES ({marks})"

    def commit(self) -> float:
        """Seconds for one transaction that inserts the next row."""
        row = next(self.rows)
        started = time.perf_counter()
        self.db.execute("BEGIN IMMEDIATE")
        self.db.execute(self.insert, row)
        self.db.execute("COMMIT")
        return time.perf_counter() - started

    def close(self) -> None:
        self.db.close()


def ready_rows(path: Path, items: list[dict[str, Any]]) -> tuple[list[tuple[Any, ...]], str]:
    """The rows the engine writes for ``items`` (stored into a new store at ``path``),
    every column but the row number, and the names of those columns."""
    with MemoryEngine(path, embedder="none") as engine:
        engine.store_many(items)
    with sqlite3.connect(path) as db:
        names = [row[1] for row in db.execute("PRAGMA table_info(records)") if row[1] != "id"]
        columns = ", ".join(names)
        rows = list(db.execute(f"SELECT {columns} FROM records ORDER BY id"))
    return rows, columns


def wal_frames(path: Path) -> int:
    """Frames in the write-ahead log of ``path`` (a passive checkpoint reports them)."""
    with sqlite3.connect(path) as db:
        return int(db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()[1])


def empty_wal(path: Path) -> None:
    with sqlite3.connect(path) as db:
        busy = db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
    if busy:
        raise RuntimeError(f"could not empty the write-ahead log of {path}")


def frames_per_store(path: Path, items: list[dict[str, Any]]) -> float:
    """Log frames that each of ``items``' single stores writes, on average."""
    with MemoryEngine(path, embedder="none") as engine:
        empty_wal(path)
        for item in items:
            engine.store(**item)
        return wal_frames(path) / len(items)


def frames_per_commit(floor: CommitFloor | SqlStoreFloor, commits: int) -> float:
    empty_wal(floor.path)
    for _ in range(commits):
        floor.commit()
    return wal_frames(floor.path) / commits


def singles(
    path: Path,
    items: list[dict[str, Any]],
    floors: Sequence[CommitFloor | SqlStoreFloor],
    quiet: bool,
) -> tuple[list[float], list[list[float]]]:
    """Seconds for each single ``store`` of ``items`` into the store at ``path``,
    and for as many commits of each floor, in blocks that take turns."""
    latencies: list[float] = []
    floor_latencies: list[list[float]] = [[] for _ in floors]
    with MemoryEngine(path, embedder="none") as engine:
        progress = Progress(
            "single stores (floor commits between blocks)",
            len(items),
            enabled=not quiet and len(items) >= 2_000,
        )
        for start in range(0, len(items), BLOCK):
            block = items[start : start + BLOCK]
            for item in block:
                started = time.perf_counter()
                engine.store(**item)
                latencies.append(time.perf_counter() - started)
            for floor, timings in zip(floors, floor_latencies):
                timings.extend(floor.commit() for _ in block)
            progress.update(len(latencies))
    return latencies, floor_latencies


def count(path: Path) -> tuple[int, float]:
    """Records in the store at ``path``, and seconds to open it (reading its whole index)."""
    opened, engine = harness.timed(MemoryEngine, path, embedder="none")
    with engine:
        return engine.stats().records, opened


def with_vectors(count_: int, dim: int, seed: int) -> list[dict[str, Any]]:
    import numpy as np

    rng = np.random.default_rng(seed)
    vectors = rng.standard_normal((count_, dim), dtype=np.float32)
    items = [rec.as_item() for rec in generate(count_, seed + 2)]
    for item, vector in zip(items, vectors):
        item["vector"] = vector
    return items


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = harness.parser(
        __doc__,
        records=(TARGET_RECORDS, "records for the bulk store_many"),
        single=(5_000, "single store calls"),
        vector_records=(
            20_000,
            "records for the store_many with vectors (0 to skip; default 20,000)",
        ),
        dim=(256, "vector dimension (default 256)"),
        seed=(1, "seed for the generated records"),
    )
    parser.add_argument(
        "--dir", type=Path, help="folder for the temporary stores (default: the system temp)"
    )
    args = parser.parse_args(argv)
    harness.at_least(parser, args, records=1, single=1, vector_records=0, dim=1)
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    bulk_items = [rec.as_item() for rec in generate(args.records, args.seed)]
    single_items = [rec.as_item() for rec in generate(args.single, args.seed + 1)]
    probe_items = [rec.as_item() for rec in generate(PROBE_STORES, args.seed + 3)]
    late_probe_items = [rec.as_item() for rec in generate(PROBE_STORES, args.seed + 5)]
    # As many rows as the plain-SQL floor commits: the frame count, then one per single store.
    sql_items = [rec.as_item() for rec in generate(args.single + PROBE_STORES, args.seed + 4)]
    vector_items = with_vectors(args.vector_records, args.dim, args.seed)

    with tempfile.TemporaryDirectory(prefix="pmf-ingest-", dir=args.dir) as tmp:
        print(f"ingest benchmark: file stores in {tmp} (WAL, synchronous=FULL), no vectors")
        store = Path(tmp) / "ingest.db"
        bulk_seconds = bulk(store, bulk_items, args.quiet)
        store_frames = frames_per_store(store, probe_items)
        pages = max(1, round(store_frames))
        rows, columns = ready_rows(Path(tmp) / "rows.db", sql_items)
        floors: list[CommitFloor | SqlStoreFloor] = [
            CommitFloor(Path(tmp) / "floor.db", pages),
            CommitFloor(Path(tmp) / "floor1.db", 1),
            SqlStoreFloor(Path(tmp) / "sql.db", store, rows, columns),
        ]
        try:
            # Counted before the single stores, as the store's own pages are.
            sql_frames = frames_per_commit(floors[2], PROBE_STORES)
            latencies, floor_latencies = singles(store, single_items, floors, args.quiet)
            floor_frames = frames_per_commit(floors[0], PROBE_STORES)
            # Again after the single stores: the full-text index has gained segments.
            late_store_frames = frames_per_store(store, late_probe_items)
        finally:
            for floor in floors:
                floor.close()
        stored, open_seconds = count(store)
        vector_seconds = 0.0
        vector_stored = 0
        vector_open_seconds = 0.0
        if vector_items:
            vector_store = Path(tmp) / "vectors.db"
            vector_seconds = bulk(vector_store, vector_items, args.quiet)
            vector_stored, vector_open_seconds = count(vector_store)

    expected = args.records + len(probe_items) + args.single + len(late_probe_items)
    if not harness.check(
        [
            f"expected {want:,} records {kind}, found {found:,}"
            for want, found, kind in (
                (expected, stored, "without vectors"),
                (args.vector_records, vector_stored, "with vectors"),
            )
            if want != found
        ],
        f"check: OK - all {expected:,} records stored without vectors and "
        f"{vector_stored:,} with vectors are in the stores",
        failed="check: FAILED",
        then="",
    ):
        return EXIT_CHECK_FAILED
    print()
    single_seconds = sum(latencies)
    (floor_p50, floor_rate), (disk_p50, disk_rate), (sql_p50, sql_rate) = (
        (statistics.median(timings), len(timings) / sum(timings)) for timings in floor_latencies
    )
    result = {
        "benchmark": "ingest",
        "python": sys.version.split()[0],
        "bulk": {
            "records": args.records,
            "seconds": bulk_seconds,
            "pass": args.records / bulk_seconds >= TARGET_BULK_RATE,
        },
        "single": {
            "calls": args.single,
            "seconds": single_seconds,
            "per_second": args.single / single_seconds,
            "median_seconds": statistics.median(latencies),
            "p99_seconds": harness.percentile(latencies, 0.99),
            "pass": args.single / single_seconds >= TARGET_SINGLE_RATE,
            "pages_per_store": store_frames,
            "pages_per_store_after": late_store_frames,
        },
        "commit_floor": {
            "pages_per_commit": floor_frames,
            "median_seconds": floor_p50,
            "per_second": floor_rate,
            "one_page_median_seconds": disk_p50,
            "one_page_per_second": disk_rate,
        },
        "sql_floor": {
            "pages_per_commit": sql_frames,
            "median_seconds": sql_p50,
            "per_second": sql_rate,
        },
        "vectors": {
            "records": args.vector_records,
            "dim": args.dim,
            "seconds": vector_seconds,
            "open_seconds": vector_open_seconds,
        },
        "stored": stored,
        "open_seconds": open_seconds,
    }
    print(harness.text_table(*table(result)))
    for line in lines(result):
        print(line)
    if args.records != TARGET_RECORDS:
        print(
            f"note: the bulk target is for {TARGET_RECORDS:,} records; "
            f"this run stored {args.records:,}, so it is judged by rate"
        )
    harness.write_json(args.json, result)
    return 0


def table(result: dict[str, Any]) -> harness.Table:
    """Each phase's seconds and rate, against its target."""
    b, s, v = result["bulk"], result["single"], result["vectors"]
    verdict = harness.verdict
    bulk_target = f"< {TARGET_BULK_SECONDS:.0f} s per {TARGET_RECORDS:,}"
    phases = [
        (f"store_many, no vectors ({b['records']:,})", b["seconds"], b["records"],
         f"{bulk_target} (>= {TARGET_BULK_RATE:,.0f}/s)", b["pass"]),
        (f"store, single calls ({s['calls']:,})", s["seconds"], s["calls"],
         f">= {TARGET_SINGLE_RATE:,.0f}/s", s["pass"]),
    ]  # fmt: skip
    if v["records"]:
        label = f"store_many, {v['dim']}-dim vectors ({v['records']:,})"
        phases.append((label, v["seconds"], v["records"], "none (context)", None))
    rows = [
        [name, f"{seconds:.2f}", f"{n / seconds:,.0f}", target, "" if ok is None else verdict(ok)]
        for name, seconds, n, target, ok in phases
    ]
    return ["phase", "seconds", "records/s", "target", "result"], rows


def lines(result: dict[str, Any]) -> list[str]:
    """The single stores' latency beside the commit floors', and the stores' opening times."""
    s, f, q, v = result["single"], result["commit_floor"], result["sql_floor"], result["vectors"]
    ms = harness.fmt_ms
    found = [
        f"single store latency: median {ms(s['median_seconds'])}, "
        f"99th percentile {ms(s['p99_seconds'])}",
        f"commit floor, taking turns with the single stores: a bare SQLite commit of "
        f"{f['pages_per_commit']:.1f} pages (a store writes {s['pages_per_store']:.1f}; "
        f"{s['pages_per_store_after']:.1f} after the single stores): median "
        f"{ms(f['median_seconds'])}, {f['per_second']:,.0f}/s; of 1 page: median "
        f"{ms(f['one_page_median_seconds'])}, {f['one_page_per_second']:,.0f}/s",
        f"single store / bare commit of as many pages: "
        f"{s['median_seconds'] / f['median_seconds']:.2f}x (median), "
        f"{f['per_second'] / s['per_second']:.2f}x (rate)",
        f"the same rows inserted with plain SQL, one INSERT per transaction, into a copy of "
        f"the store (no engine code; {q['pages_per_commit']:.1f} pages each), taking turns too: "
        f"median {ms(q['median_seconds'])}, {q['per_second']:,.0f}/s "
        f"({harness.verdict(q['per_second'] >= TARGET_SINGLE_RATE)} against the single-store "
        f"target); single store / that: {s['median_seconds'] / q['median_seconds']:.2f}x (median)",
        f"opening the store of {result['stored']:,} records (loads its index): "
        f"{result['open_seconds']:.2f} s",
    ]
    if v["records"]:
        found.append(
            f"opening the store of {v['records']:,} records with vectors: {v['open_seconds']:.2f} s"
        )
    return found


if __name__ == "__main__":
    sys.exit(main())
