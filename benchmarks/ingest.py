"""Write throughput: ``store_many`` in bulk, single ``store`` calls, and bulk with vectors.

Every phase writes to a store file in a fresh temporary folder (the store runs
in WAL mode with ``synchronous = FULL``, so every commit is flushed to disk):

1. bulk: one ``store_many`` call with N short records and no vectors;
2. single: M ``store`` calls, one transaction each, into the store from phase 1;
3. vectors (for context, no target): one ``store_many`` call with V records,
   each with a random 256-dimensional vector, into a new store.

Records are generated before the clock starts. Run from the repository root::

    python3 benchmarks/ingest.py
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from _shared import Progress, fmt_ms, generate, verdict

from prime_memory_folding import MemoryEngine

TARGET_RECORDS = 100_000
TARGET_BULK_SECONDS = 20.0
#: The bulk target as a rate, to judge runs of another size.
TARGET_BULK_RATE = TARGET_RECORDS / TARGET_BULK_SECONDS
TARGET_SINGLE_RATE = 2_000.0
EXIT_CHECK_FAILED = 1


def bulk(path: Path, items: list[dict[str, Any]], quiet: bool) -> float:
    """Seconds for one ``store_many`` call of ``items`` into a new store at ``path``."""
    if not quiet and len(items) >= 20_000:
        print(f"storing {len(items):,} records in one store_many call...", file=sys.stderr)
    with MemoryEngine(path, embedder="none") as engine:
        started = time.perf_counter()
        engine.store_many(items)
        return time.perf_counter() - started


def singles(path: Path, items: list[dict[str, Any]], quiet: bool) -> list[float]:
    """Seconds for each of ``len(items)`` single ``store`` calls into the store at ``path``."""
    latencies = []
    with MemoryEngine(path, embedder="none") as engine:
        progress = Progress("single stores", len(items), enabled=not quiet and len(items) >= 2_000)
        for done, item in enumerate(items, 1):
            started = time.perf_counter()
            engine.store(**item)
            latencies.append(time.perf_counter() - started)
            if done % 500 == 0 or done == len(items):
                progress.update(done)
    return latencies


def count(path: Path) -> tuple[int, float]:
    """Records in the store at ``path``, and seconds to open it (reading its whole index)."""
    started = time.perf_counter()
    with MemoryEngine(path, embedder="none") as engine:
        opened = time.perf_counter() - started
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
    parser = argparse.ArgumentParser(
        description="Measure store_many and single store throughput into a file store."
    )
    parser.add_argument(
        "--records", type=int, default=TARGET_RECORDS, help="records for the bulk store_many"
    )
    parser.add_argument("--single", type=int, default=5_000, help="single store calls")
    parser.add_argument(
        "--vector-records",
        type=int,
        default=20_000,
        help="records for the store_many with vectors (0 to skip; default 20,000)",
    )
    parser.add_argument("--dim", type=int, default=256, help="vector dimension (default 256)")
    parser.add_argument("--seed", type=int, default=1, help="seed for the generated records")
    parser.add_argument(
        "--dir", type=Path, help="folder for the temporary stores (default: the system temp)"
    )
    parser.add_argument("--json", type=Path, help="also write the results to this JSON file")
    parser.add_argument("--quiet", action="store_true", help="no progress on stderr")
    args = parser.parse_args(argv)
    if args.records < 1 or args.single < 1 or args.vector_records < 0 or args.dim < 1:
        parser.error("--records and --single must be at least 1, --vector-records at least 0")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    bulk_items = [rec.as_item() for rec in generate(args.records, args.seed)]
    single_items = [rec.as_item() for rec in generate(args.single, args.seed + 1)]
    vector_items = with_vectors(args.vector_records, args.dim, args.seed)

    with tempfile.TemporaryDirectory(prefix="pmf-ingest-", dir=args.dir) as tmp:
        print(f"ingest benchmark: file stores in {tmp} (WAL, synchronous=FULL), no vectors")
        store = Path(tmp) / "ingest.db"
        bulk_seconds = bulk(store, bulk_items, args.quiet)
        latencies = singles(store, single_items, args.quiet)
        stored, open_seconds = count(store)
        vector_seconds = 0.0
        vector_stored = 0
        vector_open_seconds = 0.0
        if vector_items:
            vector_store = Path(tmp) / "vectors.db"
            vector_seconds = bulk(vector_store, vector_items, args.quiet)
            vector_stored, vector_open_seconds = count(vector_store)

    expected = args.records + args.single
    if stored != expected or vector_stored != args.vector_records:
        print(
            f"check: FAILED - expected {expected:,} and {args.vector_records:,} records, "
            f"found {stored:,} and {vector_stored:,}"
        )
        return EXIT_CHECK_FAILED
    print(
        f"check: OK - all {expected:,} records stored without vectors and "
        f"{vector_stored:,} with vectors are in the stores"
    )
    print()

    bulk_rate = args.records / bulk_seconds
    single_seconds = sum(latencies)
    single_rate = args.single / single_seconds
    vector_rate = args.vector_records / vector_seconds if vector_seconds else 0.0
    p50 = statistics.median(latencies)
    p99 = statistics.quantiles(latencies, n=100)[98] if len(latencies) >= 2 else latencies[0]
    bulk_ok = bulk_rate >= TARGET_BULK_RATE
    single_ok = single_rate >= TARGET_SINGLE_RATE

    rows = [
        (
            f"store_many, no vectors ({args.records:,})",
            bulk_seconds,
            bulk_rate,
            f"< {TARGET_BULK_SECONDS:.0f} s per {TARGET_RECORDS:,} (>= {TARGET_BULK_RATE:,.0f}/s)",
            verdict(bulk_ok),
        ),
        (
            f"store, single calls ({args.single:,})",
            single_seconds,
            single_rate,
            f">= {TARGET_SINGLE_RATE:,.0f}/s",
            verdict(single_ok),
        ),
    ]
    if args.vector_records:
        rows.append(
            (
                f"store_many, {args.dim}-dim vectors ({args.vector_records:,})",
                vector_seconds,
                vector_rate,
                "none (context)",
                "",
            )
        )
    print(f"{'phase':<40}{'seconds':>9}{'records/s':>12}  {'target':<34}result")
    print("-" * 101)
    for name, seconds, rate, target, result in rows:
        print(f"{name:<40}{seconds:>9.2f}{rate:>12,.0f}  {target:<34}{result}".rstrip())
    print(f"single store latency: median {fmt_ms(p50)}, 99th percentile {fmt_ms(p99)}")
    print(f"opening the store of {stored:,} records (loads its index): {open_seconds:.2f} s")
    if vector_stored:
        print(
            f"opening the store of {vector_stored:,} records with vectors: "
            f"{vector_open_seconds:.2f} s"
        )
    if args.records != TARGET_RECORDS:
        print(
            f"note: the bulk target is for {TARGET_RECORDS:,} records; "
            f"this run stored {args.records:,}, so it is judged by rate"
        )

    if args.json:
        result = {
            "benchmark": "ingest",
            "python": sys.version.split()[0],
            "bulk": {"records": args.records, "seconds": bulk_seconds, "pass": bulk_ok},
            "single": {
                "calls": args.single,
                "seconds": single_seconds,
                "per_second": single_rate,
                "median_seconds": p50,
                "p99_seconds": p99,
                "pass": single_ok,
            },
            "vectors": {
                "records": args.vector_records,
                "dim": args.dim,
                "seconds": vector_seconds,
                "open_seconds": vector_open_seconds,
            },
            "open_seconds": open_seconds,
        }
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
