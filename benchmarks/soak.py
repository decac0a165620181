"""Concurrent writers soak: N MCP server processes over stdio on one store.

Each process is a real ``python -m prime_memory_folding.mcp.server --store PATH``
driven by a raw JSON-RPC line client in its own thread. Every process stores
W distinct memories (with labels shared between processes, so prime
registrations race), runs a query every few stores, and process 0 folds once
half-way. So that the fold has work to do while the others write, the store
is seeded first, through the engine with a clock 90 days back, with faded
working memories (importance 0.1: the default policy prunes them) and pairs
of near-duplicates (explicit vectors, shared words: the fold merges each pair).
Afterwards it checks, straight from the database file:

- exactly N x W distinct soak records live, each content present once;
- the fold ran between the writes and changed the store: the archive holds
  exactly the seeded faded records as pruned and the seeded pairs as folded,
  each pair into one live folded record whose ``folded_from`` names it, and no
  seeded record is left live;
- every call answered without an error;
- prime registries consistent: no two labels of a kind share a prime, each
  label has one prime, every label on a record is registered, and every
  process reports the same registries and record count.

    python3 benchmarks/soak.py                              # 8 processes x 5,000
    python3 benchmarks/soak.py --processes 4 --writes 500 --json soak.json

Exits 1 when a check fails.
"""

from __future__ import annotations

import json
import os
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import _harness as harness
from _shared import SERVER, LineClient

TIMEOUT = 120
SHARED_TAGS = tuple(f"shared{n:02d}" for n in range(40))
DOMAINS = ("work", "home", "code", "notes")
#: Seeded records the fold must prune, and near-duplicate pairs it must merge.
SEEDED_FADED, SEEDED_PAIRS = 40, 8
#: How far back the seeded records were stored: ~90 working-memory half-lives.
SEED_AGE_S = 90 * 86_400.0
SEED_DOMAIN = "seeded"


def content_of(process: int, n: int) -> str:
    return f"soak write {n} from process {process}"


def drive(
    client: LineClient, process: int, writes: int, query_every: int, fold: bool, out: dict[str, Any]
) -> None:
    """One process's work; fills ``out`` with latencies and errors."""
    latencies: list[float] = []
    errors: list[str] = []
    for n in range(writes):
        tags = [SHARED_TAGS[(n * 7 + process) % len(SHARED_TAGS)], f"p{process}_{n % 16}"]
        arguments: dict[str, Any] = {
            "content": content_of(process, n),
            "domain": DOMAINS[n % len(DOMAINS)],
            "tags": tags,
            "importance": 0.6,
        }
        started = time.perf_counter()
        try:
            stored = client.call_tool("prime_memory_store", arguments)["structuredContent"]
            if not stored["created"]:
                errors.append(f"store {n} reinforced instead of creating")
        except RuntimeError as exc:
            errors.append(f"store {n}: {exc}")
        latencies.append(time.perf_counter() - started)
        try:
            if query_every and n % query_every == query_every - 1:
                client.call_tool("prime_memory_query", {"tags": [tags[0]], "limit": 5})
            if fold and n == writes // 2:
                fold = client.call_tool("prime_memory_fold", {"dry_run": False})
                out["fold"] = fold["structuredContent"]
        except RuntimeError as exc:
            errors.append(f"after store {n}: {exc}")
    out["latencies"] = latencies
    out["errors"] = errors


def seed(store: Path, now: float) -> dict[str, list[Any]]:
    """Store the fold's work through the engine, dated ``SEED_AGE_S`` before ``now``.

    Returns the ids of the faded records (``"faded"``) and of the pairs
    (``"pairs"``, as lists of two ids).
    """
    import numpy as np

    from prime_memory_folding import MemoryEngine

    basis = np.eye(SEEDED_PAIRS + 1, dtype=np.float32)
    faded = [
        {
            "content": f"seeded scratch note {n} about a build that is long over",
            "domain": SEED_DOMAIN,
            "tags": [f"scratch{n % 4}"],
            "importance": 0.1,
        }
        for n in range(SEEDED_FADED)
    ]
    pairs = [
        {
            "content": f"seeded decision {i}: the team deploys service {i} on Tuesdays"
            + (" again" if twin else ""),
            "domain": SEED_DOMAIN,
            "tags": [f"pair{i}"],
            "importance": 0.6,
            # Two near-parallel vectors per pair (cosine ~0.999), orthogonal to other pairs.
            "vector": (basis[i] + (0.05 * basis[-1] if twin else 0)).tolist(),
        }
        for i in range(SEEDED_PAIRS)
        for twin in (False, True)
    ]
    with MemoryEngine(store, embedder="none", clock=lambda: now - SEED_AGE_S) as engine:
        stored = engine.store_many(faded + pairs)
    ids = [record.record_id for record in stored]
    return {
        "faded": ids[:SEEDED_FADED],
        "pairs": [ids[k : k + 2] for k in range(SEEDED_FADED, len(ids), 2)],
    }


def check_fold(db: sqlite3.Connection, seeded: dict[str, list[Any]]) -> list[str]:
    """Problems with what the fold did to the seeded records."""
    problems: list[str] = []
    archived: dict[str, tuple[str, str | None]] = {
        rid: (reason, into)
        for rid, reason, into in db.execute("SELECT record_id, reason, folded_into FROM archive")
    }
    live = {
        rid: json.loads(metadata)
        for rid, metadata in db.execute("SELECT record_id, metadata FROM records")
    }
    pruned = {rid for rid, (reason, _) in archived.items() if reason == "pruned"}
    if pruned != set(seeded["faded"]):
        problems.append(
            f"pruned {len(pruned)} records, expected exactly the {len(seeded['faded'])} faded "
            f"seeds ({len(pruned & set(seeded['faded']))} of them)"
        )
    folded = {rid for rid, (reason, _) in archived.items() if reason == "folded"}
    pair_ids = {rid for pair in seeded["pairs"] for rid in pair}
    if folded != pair_ids:
        problems.append(f"folded {len(folded)} records, expected the {len(pair_ids)} paired seeds")
    for pair in seeded["pairs"]:
        targets = {archived.get(rid, ("", None))[1] for rid in pair}
        into = targets.pop() if len(targets) == 1 else None
        if into is None or into not in live:
            problems.append(f"pair {pair} was not folded into one live record")
        elif sorted(live[into].get("folded_from", [])) != sorted(pair):
            problems.append(f"folded record {into} lists {live[into].get('folded_from')}")
    still_live = (set(seeded["faded"]) | pair_ids) & set(live)
    if still_live:
        problems.append(f"{len(still_live)} seeded records are still live")
    return problems


def check_store(path: Path, processes: int, writes: int, seeded: dict[str, list[Any]]) -> list[str]:
    """Problems found in the database file itself; empty when all is well."""
    problems: list[str] = []
    db = sqlite3.connect(path)
    try:
        if db.execute("PRAGMA integrity_check").fetchone()[0] != "ok":
            problems.append("integrity_check failed")
        rows = db.execute("SELECT record_id, content, domain, subdomain, tags FROM records")
        records = rows.fetchall()
        soak = [r for r in records if r[2] != SEED_DOMAIN]
        ids = [r[0] for r in records]
        contents = [r[1] for r in soak]
        expected = {content_of(p, n) for p in range(processes) for n in range(writes)}
        if len(soak) != processes * writes:
            problems.append(f"{len(soak)} soak records, expected {processes * writes}")
        if len(records) - len(soak) != len(seeded["pairs"]):
            problems.append(
                f"{len(records) - len(soak)} seeded records live, expected "
                f"{len(seeded['pairs'])} folded ones"
            )
        if len(set(ids)) != len(ids):
            problems.append("duplicate record ids")
        if set(contents) != expected or len(contents) != len(set(contents)):
            missing = len(expected - set(contents))
            problems.append(f"contents differ: {missing} missing, {len(contents)} present")
        problems += check_fold(db, seeded)
        primes: dict[str, dict[str, int]] = {}
        for kind, label, prime in db.execute("SELECT kind, label, prime FROM primes"):
            table = primes.setdefault(kind, {})
            if label in table:
                problems.append(f"{kind} label {label!r} has two primes")
            table[label] = prime
        for kind, table in primes.items():
            if len(set(table.values())) != len(table):
                problems.append(f"two {kind} labels share a prime")
        for _, _, domain, subdomain, tags in records:
            for kind, label in [("domain", domain), ("subdomain", subdomain)] + [
                ("tag", t) for t in json.loads(tags)
            ]:
                if label not in primes.get(kind, {}):
                    problems.append(f"{kind} label {label!r} on a record has no prime")
    finally:
        db.close()
    return problems


def run(
    store: Path, processes: int, writes: int, query_every: int, env: dict[str, str]
) -> dict[str, Any]:
    seeded = seed(store, time.time())
    command = [*SERVER, "--store", str(store)]
    clients = [LineClient(command, env, timeout=TIMEOUT, handshake=False) for _ in range(processes)]
    results: list[dict[str, Any]] = [{} for _ in clients]
    started = time.perf_counter()
    try:
        for client in clients:
            client.handshake()
        threads = [
            threading.Thread(
                target=drive, args=(client, p, writes, query_every, p == 0, results[p])
            )
            for p, client in enumerate(clients)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        elapsed = time.perf_counter() - started
        views = [c.call_tool("prime_memory_stats", {})["structuredContent"] for c in clients]
    finally:
        codes = [client.close() for client in clients]
    errors = [e for result in results for e in result.get("errors", ["worker died"])]
    problems = check_store(store, processes, writes, seeded)
    if any(view["registries"] != views[0]["registries"] for view in views):
        problems.append("processes disagree on the prime registries")
    live = processes * writes + len(seeded["pairs"])
    if any(view["records"] != live for view in views):
        problems.append(f"process views of the count: {[v['records'] for v in views]}, not {live}")
    if any(codes):
        problems.append(f"server exit codes {codes}")
    latencies = sorted(x for result in results for x in result.get("latencies", []))
    quantiles = statistics.quantiles(latencies, n=100) if len(latencies) > 1 else [0.0] * 99
    return {
        "processes": processes,
        "writes": writes,
        "records": views[0]["records"],
        "errors": len(errors),
        "first_errors": errors[:5],
        "problems": problems,
        "seconds": elapsed,
        "stores_per_s": processes * writes / elapsed,
        "store_p50_ms": quantiles[49] * 1000,
        "store_p99_ms": quantiles[98] * 1000,
        "seeded": {"faded": len(seeded["faded"]), "pairs": len(seeded["pairs"])},
        "fold": {
            k: results[0].get("fold", {}).get(k)
            for k in ("records_before", "records_after", "pruned", "folded", "created")
        },
        "ok": not errors and not problems,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = harness.parser(
        __doc__,
        processes=8,
        writes=(5_000, "stores per process"),
        query_every=(10, "0: no queries"),
    )
    parser.add_argument("--store", type=Path, help="a new store file (default: a temp file)")
    parser.add_argument(
        "--embedder", default="none", help="PRIME_MEMORY_EMBEDDER for the servers (default none)"
    )
    args = parser.parse_args(argv)
    env = {**os.environ, "PRIME_MEMORY_EMBEDDER": args.embedder}
    with tempfile.TemporaryDirectory(prefix="prime-memory-soak-") as folder:
        store = args.store or Path(folder) / "soak.db"
        if store.exists():
            parser.error(f"{store} exists; the soak needs a new store")
        report = run(store, args.processes, args.writes, args.query_every, env)
    print(
        f"{report['processes']} processes x {report['writes']} stores: "
        f"{report['records']} records, {report['errors']} errors, "
        f"{report['stores_per_s']:.0f} stores/s, p50 {report['store_p50_ms']:.2f} ms, "
        f"p99 {report['store_p99_ms']:.2f} ms, {report['seconds']:.1f} s; the fold between "
        f"them pruned {report['fold']['pruned']} and folded {report['fold']['folded']} "
        f"seeded records"
    )
    return harness.conclude(report, args.json, report["first_errors"] + report["problems"])


if __name__ == "__main__":
    sys.exit(main())
