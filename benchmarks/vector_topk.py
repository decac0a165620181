"""Exact vector top-k: this engine against the numpy floor and sqlite-vec.

For each size N, stores N random 256-dimensional vectors (one record each, no
text embedding) and asks for the 10 nearest by cosine similarity to Q random
query vectors, three ways:

- engine: ``MemoryEngine.query(vector=q, limit=10)``, records and all;
- numpy floor: one matrix-vector product over the normalised matrix, then
  ``argpartition`` and a sort of the 10 best; nothing can be faster exactly;
- sqlite-vec: a ``vec0`` table with ``distance_metric=cosine``, loaded into
  SQLite through ``apsw`` (the standard ``sqlite3`` module here cannot load
  extensions); reported as unavailable, with the reason, when it cannot load.

Before timing, all three must return the same 10 ids in the same order, best
first, for every query (ids may swap or differ only where their scores tie
within float32 rounding); otherwise the script exits with status 1. Timing
rotates the order of the systems for every query and round; a system's time is
the median over queries of each query's median over rounds. The target, at
100,000 vectors: the engine within 1.5x of the numpy floor. The script also
times the engine's steps on their own (cosine scores, top-k, building hits) to
show where its time goes.

Run from the repository root::

    python3 benchmarks/vector_topk.py --sizes 10000 100000
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import _harness as harness
import numpy as np
from _shared import store_in_batches

from prime_memory_folding import MemoryEngine

DIM = 256
K = 10
TARGET_RECORDS = 100_000
TARGET_RATIO = 1.5
ENGINE, FLOOR, SQLITE_VEC = "engine", "numpy floor", "sqlite-vec"
SYSTEMS = (FLOOR, ENGINE, SQLITE_VEC)
STEPS = ("cosine", "top_k", "rank_by_vector", "hits")
#: Scores closer than this count as a tie when checking agreement.
TIE = 1e-5
EXIT_MISMATCH = 1

System = Callable[[np.ndarray], list[int]]


def make_vectors(count: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((count, DIM), dtype=np.float32)


def normalised(matrix: np.ndarray) -> np.ndarray:
    return (matrix / np.linalg.norm(matrix, axis=1, keepdims=True)).astype(np.float32)


def floor_system(unit: np.ndarray) -> System:
    def run(query: np.ndarray) -> list[int]:
        q = query / np.linalg.norm(query)
        scores = unit @ q
        best = np.argpartition(-scores, K - 1)[:K]
        return best[np.argsort(-scores[best])].tolist()

    return run


def engine_system(engine: MemoryEngine, row_of: dict[str, int]) -> System:
    def run(query: np.ndarray) -> list[int]:
        return [row_of[hit.record.record_id] for hit in engine.query(vector=query, limit=K)]

    return run


def sqlite_vec_system(unit: np.ndarray) -> tuple[System | None, str, Any]:
    """A ``vec0`` table of the vectors, or (None, why not, None)."""
    try:
        import apsw
        import sqlite_vec
    except ImportError as exc:
        return None, f"not installed ({exc.name}); pip install apsw sqlite-vec", None
    try:
        db = apsw.Connection(":memory:")
        db.enable_load_extension(True)
        db.load_extension(sqlite_vec.loadable_path())
        version = db.execute("SELECT vec_version()").fetchone()[0]
        db.execute(
            f"CREATE VIRTUAL TABLE v USING vec0(embedding float[{DIM}] distance_metric=cosine)"
        )
        with db:
            db.executemany(
                "INSERT INTO v(rowid, embedding) VALUES (?, ?)",
                ((i, row.tobytes()) for i, row in enumerate(unit)),
            )
    except Exception as exc:  # any failure to load or fill is reported, not raised
        return None, f"failed to load: {type(exc).__name__}: {exc}", None
    sql = "SELECT rowid FROM v WHERE embedding MATCH ? AND k = ? ORDER BY distance"

    def run(query: np.ndarray) -> list[int]:
        q = (query / np.linalg.norm(query)).astype(np.float32)
        return [row[0] for row in db.execute(sql, (q.tobytes(), K))]

    return run, f"sqlite-vec {version} on SQLite {apsw.sqlite_lib_version()} via apsw", db


def disagreements(queries: np.ndarray, unit: np.ndarray, systems: dict[str, System]) -> list[str]:
    """Queries where a system's top-k differs from the floor's, in ids or order, ties aside.

    Every system promises the k best, best first. So the i-th id a system
    returns must score the same as the floor's i-th, within ``TIE``: that
    allows two ids whose scores tie to swap places (or one to stand in for
    the other at the k-th place), and nothing else.
    """

    def differs(qi: int, query: np.ndarray, got: list[int], expected: list[int]) -> str:
        if got == expected:
            return ""
        if len(got) != K or len(set(got)) != K:
            return f"on query {qi}: {got} is not {K} distinct ids"
        scores = unit @ (query / np.linalg.norm(query))
        for place, (mine, theirs) in enumerate(zip(got, expected)):
            if abs(float(scores[mine]) - float(scores[theirs])) > TIE:
                return f"on query {qi} at place {place + 1}: {got} vs {expected}"
        return ""

    return harness.disagreements(list(queries), systems, systems[FLOOR], differs)


def engine_steps(engine: MemoryEngine, queries: np.ndarray, rounds: int) -> dict[str, float]:
    """Median seconds of each step of an unfiltered vector query, on its own."""
    from prime_memory_folding.recall.query import rank_by_vector, top_k

    index = engine._index  # a benchmark may look inside
    steps: dict[str, list[float]] = {name: [] for name in STEPS}
    for _ in range(rounds):
        for query in queries:
            unit = (query / np.linalg.norm(query)).astype(np.float32)
            seconds, scores = harness.timed(index.cosine, None, unit)
            steps["cosine"].append(seconds)
            steps["top_k"].append(harness.timed(top_k, scores, K)[0])
            seconds, ranked = harness.timed(rank_by_vector, index, None, unit, K, now=time.time())
            steps["rank_by_vector"].append(seconds)
            steps["hits"].append(harness.timed(engine._reader.hits, ranked, index)[0])
    return {name: statistics.median(values) for name, values in steps.items()}


def run_size(
    count: int,
    queries: int,
    rounds: int,
    seed: int,
    folder: Path,
    log: Callable[[str], None],
    inject_mismatch: bool = False,
) -> dict[str, Any]:
    """Store, check agreement, time; one size's results (``agreement`` False on a mismatch).

    ``inject_mismatch`` (for the tests) has the engine return the right ids in
    reverse order, which the check must catch.
    """
    matrix = make_vectors(count, seed)
    unit = normalised(matrix)
    query_vectors = make_vectors(queries, seed + 1)
    log(f"vector top-{K}: storing {count:,} vectors")
    with MemoryEngine(folder / f"vectors-{count}.db", embedder="none") as engine:
        store_seconds, stored = harness.timed(
            store_in_batches,
            engine,
            range(count),
            lambda i: {"content": f"vector {i}", "vector": matrix[i]},
            show=False,
        )
        row_of = {rec.record_id: row for row, rec in enumerate(stored)}
        systems: dict[str, System] = {
            FLOOR: floor_system(unit),
            ENGINE: engine_system(engine, row_of),
        }
        if inject_mismatch:
            honest = systems[ENGINE]
            systems[ENGINE] = lambda q: honest(q)[::-1]
        log(f"vector top-{K}: loading {count:,} vectors into sqlite-vec")
        vec, vec_note, vec_db = sqlite_vec_system(unit)
        if vec is not None:
            systems[SQLITE_VEC] = vec
        problems = disagreements(query_vectors, unit, systems)
        result: dict[str, Any] = {
            "records": count,
            "dim": DIM,
            "k": K,
            "queries": queries,
            "rounds": rounds,
            "store_seconds": store_seconds,
            "sqlite_vec": vec_note if vec is not None else None,
            "sqlite_vec_unavailable": None if vec is not None else vec_note,
            "agreement": not problems,
            "problems": problems[:10],
        }
        if problems:
            return result
        log(f"vector top-{K}: timing {count:,} vectors")
        samples = harness.alternate(systems, list(query_vectors), rounds)
        result["median_seconds"] = medians = harness.median_of_medians(samples)
        result["ratio_vs_floor"] = harness.ratios(medians, FLOOR)
        result["engine_steps"] = engine_steps(engine, query_vectors, rounds)
        if vec_db is not None:
            vec_db.close()
    return result


def run(
    sizes: Sequence[int],
    *,
    queries: int = 20,
    rounds: int = 5,
    seed: int = 3,
    log: Callable[[str], None] = lambda _: None,
    inject_mismatch: bool = False,
) -> dict[str, Any]:
    """Every size in turn; the results as one JSON-ready mapping."""
    with tempfile.TemporaryDirectory(prefix="pmf-vec-") as tmp:
        results = [
            run_size(n, queries, rounds, seed, Path(tmp), log, inject_mismatch) for n in sizes
        ]
    return {"benchmark": "vector_topk", "sizes": results}


def target(results: dict[str, Any]) -> dict[str, Any] | None:
    """The engine/floor ratio at the target size, else at the largest size run."""
    runs = [r for r in results["sizes"] if r["agreement"]]
    if not runs:
        return None
    chosen = next(
        (r for r in runs if r["records"] == TARGET_RECORDS), max(runs, key=lambda r: r["records"])
    )
    ratio = chosen["ratio_vs_floor"][ENGINE]
    return {"records": chosen["records"], "ratio": ratio, "pass": ratio <= TARGET_RATIO}


def tables(sizes: Sequence[dict[str, Any]]) -> tuple[harness.Table, harness.Table]:
    """The sizes whose systems agreed: each system's median (and its ratio to the floor's),
    and the engine's steps timed alone."""
    times, steps = [], []
    for r in (r for r in sizes if r["agreement"]):
        t, ratio = r["median_seconds"], r["ratio_vs_floor"]
        cells = [
            harness.fmt_ms_ratio(t[n], ratio[n], 2) if n in t else "unavailable" for n in SYSTEMS
        ]
        times.append([f"{r['records']:,}", *cells])
        steps.append([f"{r['records']:,}", *map(harness.fmt_ms, r["engine_steps"].values())])
    header = ["vectors", *SYSTEMS[:2], f"{SQLITE_VEC} (vec0, exact)"]
    return (header, times), (["vectors", *STEPS], steps)


def main(argv: Sequence[str] | None = None) -> int:
    # --inject-mismatch: the engine's answers in the wrong order
    parser = harness.parser(__doc__, inject=True, queries=20, rounds=5, seed=3)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    args = parser.parse_args(argv)
    chosen = harness.options(args, "queries", "rounds", "seed", "inject_mismatch")
    results = run(args.sizes, **chosen, log=harness.Log(args.quiet))
    for r in results["sizes"]:
        where = f"{r['records']:,} vectors"
        harness.check(r["problems"], f"{where}: agreement OK", failed=f"{where}: agreement FAILED")
        if r["sqlite_vec_unavailable"]:
            print(f"  sqlite-vec unavailable: {r['sqlite_vec_unavailable']}")
    times, steps = tables(results["sizes"])
    if times[1]:
        print(harness.text_table(*times))
        print("median per query; (Nx) = that median / the numpy floor's")
        print("the engine's steps, each timed alone:")
        print(harness.text_table(*steps))
    verdict = target(results)
    if verdict:
        print(
            f"target: engine <= {TARGET_RATIO}x the numpy floor at {verdict['records']:,} vectors: "
            f"{verdict['ratio']:.2f}x  {harness.verdict(verdict['pass'])}"
        )
    harness.write_json(args.json, results)
    return 0 if all(r["agreement"] for r in results["sizes"]) else EXIT_MISMATCH


if __name__ == "__main__":
    sys.exit(main())
