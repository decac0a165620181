"""Warm and cold calls: the same work, run back to back and after a short pause.

A hot loop keeps a call's code and data in the CPU caches. A real call, an
agent's query or a store that arrives over MCP, finds them after other work
has run. On a shared virtual machine, two milliseconds of anything, even a
loop that touches almost no memory, can leave a call much slower. This script
measures by how much, for a few of the engine's paths and, for comparison,
for SQLite's own C path over a normalised tag table and a plain Python loop.

Each call is timed three ways, in interleaved rounds:

- warm: the third of three calls in a row;
- after a 2 ms spin: right after a busy loop that only reads the clock;
- after a 2 ms sleep: right after the thread slept.

Before timing, it checks that the engine's tag query and the SQL one return the
same ids for every query, and that every call gives the same answer in every
mode (and exits with status 1 if not). It prints the median of each, and the
ratio of each pause to warm.

Run from the repository root::

    python3 benchmarks/warmth.py
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
from _shared import generate
from structure import choose_queries, sqlite_system

from prime_memory_folding import MemoryEngine
from prime_memory_folding.recall.embeddings import load_embedder

PAUSE_S = 0.002
MODES = ("warm", "after a 2 ms spin", "after a 2 ms sleep")
EXIT_MISMATCH = 1
ENGINE_QUERY = "engine tag query (3 tags)"
SQL_QUERY = "sqlite sql, the same query"

Call = Callable[[int], Any]


def spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def python_loop(_: int) -> int:
    total = 0
    for i in range(2_000):
        total += i * i % 7
    return total


def build_calls(
    engine: MemoryEngine,
    writer: MemoryEngine,
    records: int,
    seed: int,
    inject_mismatch: bool = False,
) -> tuple[dict[str, Call], int]:
    """The calls to time, each taking a round number (stores use it for new content),
    and how many distinct queries the two tag queries take turns on.

    ``inject_mismatch`` (for the tests) drops one id from the SQL answers.
    """
    synthetic = generate(records, seed)
    stored = engine.store_many(rec.as_item() for rec in synthetic)
    sql, _ = sqlite_system(stored)
    queries = [q for q in choose_queries(synthetic, 20, seed) if q.kind == "tags (3)"]
    embedder = load_embedder("builtin")

    def tag_query(n: int) -> list[str]:
        return sorted(engine.match_ids(tags=queries[n % len(queries)].tags))

    def sql_tag_query(n: int) -> list[str]:
        found = sorted(sql(queries[n % len(queries)]))
        return found[1:] if inject_mismatch else found

    def embed(n: int) -> list[float]:
        [vector] = embedder.embed([f"decided to keep the {n % 7} retries in the webhook client"])
        return [float(x) for x in vector]

    def store(n: int) -> bool:
        return writer.store_result(f"note {n}: the retry budget of service {n}").created

    calls = {
        ENGINE_QUERY: tag_query,
        SQL_QUERY: sql_tag_query,
        "embed one sentence (built-in)": embed,
        "engine: single store (commit)": store,
        "python loop (2,000 steps)": python_loop,
    }
    return calls, len(queries)


def answers_agree(calls: dict[str, Call], queries: int) -> list[str]:
    """Problems found comparing the engine's tag queries with SQL's, and each call
    warm, after a spin and after a sleep."""
    problems = []
    hits = 0
    for n in range(queries):
        ours, theirs = calls[ENGINE_QUERY](n), calls[SQL_QUERY](n)
        hits += len(ours)
        if ours != theirs:
            problems.append(
                f"query {n}: the engine found {len(ours)} ids, SQLite SQL {len(theirs)}, "
                f"{len(set(ours) ^ set(theirs))} differ"
            )
    if not hits:
        problems.append(f"none of the {queries} tag queries found anything; nothing was compared")
    for name, call in calls.items():
        if name.startswith("engine: single store"):
            continue  # each store writes a new record; checked by its result below
        for n in range(3):
            warm = call(n)
            spin(PAUSE_S)
            spun = call(n)
            time.sleep(PAUSE_S)
            slept = call(n)
            if not warm == spun == slept:
                problems.append(f"{name} answered differently after a pause (call {n})")
    return problems


def time_calls(calls: dict[str, Call], rounds: int) -> dict[str, dict[str, list[float]]]:
    samples: dict[str, dict[str, list[float]]] = {n: {m: [] for m in MODES} for n in calls}
    store_ok = True
    counter = 1_000
    for rnd in range(rounds):
        modes = MODES[rnd % 3 :] + MODES[: rnd % 3]
        for name, call in calls.items():
            for mode in modes:
                counter += 3
                if mode == "warm":
                    call(counter - 2)
                    call(counter - 1)
                elif mode == "after a 2 ms spin":
                    spin(PAUSE_S)
                else:
                    time.sleep(PAUSE_S)
                started = time.perf_counter()
                result = call(counter)
                samples[name][mode].append(time.perf_counter() - started)
                if name.startswith("engine: single store") and result is not True:
                    store_ok = False
    if not store_ok:
        raise SystemExit("error: a single store did not create its record")
    return samples


def table(summary: dict[str, dict[str, float]]) -> harness.Table:
    """Each call's median warm, and after each pause with its ratio to warm."""
    rows = [
        [name, harness.fmt_ms(medians["warm"])]
        + [harness.fmt_ms_ratio(medians[m], medians[m] / medians["warm"]) for m in MODES[1:]]
        for name, medians in summary.items()
    ]
    return ["call", *MODES], rows


def main(argv: Sequence[str] | None = None) -> int:
    # --inject-mismatch: SQL's answers lose an id
    parser = harness.parser(
        __doc__,
        inject=True,
        records=(20_000, "records queried (20,000)"),
        rounds=(300, "timed rounds (300)"),
        seed=1,
    )
    args = parser.parse_args(argv)
    print(
        f"warmth benchmark: {args.records:,} records, {args.rounds} rounds; each call "
        f"warm (third in a row), after a {PAUSE_S * 1e3:.0f} ms spin, after a "
        f"{PAUSE_S * 1e3:.0f} ms sleep"
    )
    with (
        tempfile.TemporaryDirectory(prefix="pmf-warmth-") as tmp,
        MemoryEngine(Path(tmp) / "query.db", embedder="none") as engine,
        MemoryEngine(Path(tmp) / "write.db", embedder="none") as writer,
    ):
        calls, queries = build_calls(engine, writer, args.records, args.seed, args.inject_mismatch)
        if not harness.check(
            answers_agree(calls, queries),
            f"agreement: OK - the engine and SQLite SQL returned the same ids for all "
            f"{queries} tag queries, and every call answered the same warm and after each pause",
            most=10,
            then="no timings reported: the calls do not answer alike",
        ):
            return EXIT_MISMATCH
        samples = time_calls(calls, args.rounds)
    summary = {
        name: {mode: statistics.median(times) for mode, times in by_mode.items()}
        for name, by_mode in samples.items()
    }
    print()
    print(harness.text_table(*table(summary)))
    print("median per call; (Nx) = that median / the warm median")
    harness.write_json(
        args.json,
        {
            "benchmark": "warmth",
            "records": args.records,
            "rounds": args.rounds,
            "pause_s": PAUSE_S,
            "python": sys.version.split()[0],
            "median_seconds": summary,
        },
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
