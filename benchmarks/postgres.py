"""The PostgreSQL store beside the SQLite store, with plain SQL over the same tables as the floor.

    python3 benchmarks/postgres.py                          # 10,000, 100,000 and 1,000,000 records
    python3 benchmarks/postgres.py --sizes 10000 100000     # chosen sizes
    python3 benchmarks/postgres.py --quick                  # tiny, for the smoke test

One SQLite store and one PostgreSQL database (a new one with a random name on
the server ``--pg`` names, dropped at the end) grow to each size in turn with
the same records: English-like sentences embedded with the built-in model
(each text embedded once, the vector given to both stores), a domain, a
subdomain, 1 to 5 Zipf-distributed tags, a unique importance, and one of three
scopes (the current project, ``global``, another project). Records are
loaded with ``store_many`` in batches of 10,000 (COPY on PostgreSQL). Both
engines read the same fixed clock, so strengths do not decay during the run.

At each size, side by side, the systems taking turns:

- **store**: single ``engine.store`` calls on each backend, and a plain-SQL
  ``INSERT`` of a full row in its own transaction on PostgreSQL (the floor;
  its rows are deleted afterwards);
- **tag query**: ``engine.query(tags=[a, b])`` (the 10 best by importance x
  strength in the visible scopes) on each backend, and the same question in
  plain SQL (``tag_primes @> ... AND scope = ANY(...) ORDER BY
  importance * strength DESC LIMIT 10``);
- **text query**: ``engine.query(text=...)`` (BM25 and cosine fused) on each
  backend, and plain SQL's ``plainto_tsquery`` ranked by ``ts_rank``: a
  cheaper question (every word must match, no vectors), so its answers are
  not compared, only its time;
- **vector top-10**: ``engine.query(vector=...)`` on each backend, and plain
  SQL reading every visible vector with numpy's exact top-10 (PostgreSQL here
  has no vector extension);
- **fold**: ``engine.fold(dry_run=True)`` (read, decay, candidate search and
  checks; nothing written, so both stores keep the same records) up to
  ``--fold-max`` records (default 100,000); reported as not available where
  the backend cannot fold;
- **start-up**: spawn ``python3 -m prime_memory_folding.mcp.server --store
  ...`` over stdio, ``initialize``, then one tag query through
  ``prime_memory_query``: the time to its answer. The floor: a fresh Python
  process that connects with psycopg and runs the plain-SQL tag query;
- **memory**: the resident memory (``VmRSS``) of each of those processes
  after its first queries (for the server, the tag query and a text query).

Start-up and memory are also measured, in the same turns, for a server on a
second PostgreSQL store (a schema of the same database) that keeps the first
size's records: at the largest size, the growing store's figures over that
one's are the start-up and memory targets, measured side by side.

Before anything is timed, the systems must agree: both stores hold the same
number of records; every tag query returns the same 10 records, in the same
order, from both engines, the plain SQL and both servers; every vector query
returns the same 10 records from both engines and the floor (ties within
float32 rounding aside). Otherwise the script prints the disagreements and
exits with status 1, without timings.

Targets: at 1,000,000 records, the tag query on PostgreSQL within 1.5x of the
plain SQL; a PostgreSQL server's start-up and memory on 1,000,000 records
within 1.5x of those on 10,000 (with the default sizes, the second store's).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import secrets
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any
from urllib.parse import quote

import _harness as harness
import numpy as np
from _shared import SERVER, LineClient, Progress, generate, memory_kib, scratch_database
from text_query import sentences

from prime_memory_folding import MemoryEngine
from prime_memory_folding.errors import NotAvailable
from prime_memory_folding.recall.embeddings import load_embedder
from prime_memory_folding.storage.pg_decay import STORE_DECAY

DEFAULT_PG = (
    os.environ.get("PRIME_MEMORY_TEST_PG") or "postgresql://postgres@127.0.0.1:5432/postgres"
)
DEFAULT_SIZES = (10_000, 100_000, 1_000_000)
QUICK_SIZES = (300, 600)
TARGET_RECORDS = 1_000_000
BASE_RECORDS = 10_000
TARGET_RATIO = 1.5
#: Share of text queries whose top-10 must be SQLite's, and the text query's p50 at 1M.
TEXT_SAME = 0.95
TEXT_P50 = 0.150
BATCH = 10_000
LIMIT = 10
SCOPE = "project:bench"
#: Where the records go: the current project, global, and a project no read sees.
SCOPES = (SCOPE, SCOPE, SCOPE, "global", "project:other")
#: The fixed clock both engines read: the run's start (see main).
T0 = time.time()
EXIT_MISMATCH = 1
SYSTEMS = ("sqlite", "postgres", "plain sql")
#: The PostgreSQL store that stays at the first size, in start-up and memory.
BASE_SYSTEM = "postgres, {:,} records"


@dataclass
class Stores:
    sqlite: MemoryEngine
    postgres: MemoryEngine
    conn: Any  # a psycopg connection (autocommit) for the plain SQL
    sqlite_path: Path
    pg_url: str
    #: A second PostgreSQL store that keeps the first sizes's records (a schema of
    #: the same database), whose servers start beside the growing store's.
    base_url: str
    base_conn: Any
    base_records: int


# -- data -------------------------------------------------------------------------------


class Generated:
    """The records of the whole run, generated once, handed out in slices."""

    def __init__(self, total: int, seed: int) -> None:
        self.labels = generate(total, seed)
        self.texts = sentences(total, seed, 8, 20)
        rng = random.Random(seed + 7)
        self.importance = [rng.random() for _ in range(total)]
        self.scopes = [rng.choice(SCOPES) for _ in range(total)]

    def items(self, start: int, end: int) -> list[dict[str, Any]]:
        return [
            {
                "content": self.texts[i],
                "domain": self.labels[i].domain,
                "subdomain": self.labels[i].subdomain,
                "tags": list(self.labels[i].tags),
                "importance": self.importance[i],
                "scope": self.scopes[i],
            }
            for i in range(start, end)
        ]


# -- the PostgreSQL database of this run ----------------------------------------------


# -- loading ----------------------------------------------------------------------------


def load(
    stores: Stores,
    data: Generated,
    start: int,
    end: int,
    embed: Callable[[list[str]], np.ndarray],
    quiet: bool,
) -> dict[str, float]:
    """Store records ``start`` to ``end`` into both stores; seconds per backend."""
    spent = {"embedding": 0.0, "sqlite": 0.0, "postgres": 0.0}
    progress = Progress(f"loading {start:,}-{end:,}", end - start, enabled=not quiet)
    for low in range(start, end, BATCH):
        high = min(low + BATCH, end)
        batch = data.items(low, high)
        t0 = time.perf_counter()
        vectors = embed([item["content"] for item in batch])
        spent["embedding"] += time.perf_counter() - t0
        for item, vector in zip(batch, vectors):
            item["vector"] = vector
        for name in ("sqlite", "postgres"):
            engine = getattr(stores, name)
            t0 = time.perf_counter()
            if low == 0:
                # The very first record, alone, is embedded by the engine itself,
                # which names the store's embedding space (the built-in model's);
                # a first batch with vectors given would make it a custom space,
                # in which text is not embedded.
                engine.store_many([{k: v for k, v in batch[0].items() if k != "vector"}])
                engine.store_many(batch[1:])
            else:
                engine.store_many(batch)
            spent[name] += time.perf_counter() - t0
        progress.update(high - start)
    return spent


# -- questions --------------------------------------------------------------------------


def tag_pairs(data: Generated, n: int, count: int, seed: int) -> list[list[str]]:
    """``count`` pairs of tags that occur together on visible records among the first ``n``."""
    rng = random.Random(seed + 11)
    pairs: list[list[str]] = []
    seen: set[tuple[str, ...]] = set()
    tries = 0
    while len(pairs) < count and tries < 100 * count:
        tries += 1
        i = rng.randrange(n)
        tags = data.labels[i].tags
        if len(tags) < 2 or data.scopes[i] == "project:other":
            continue
        pair = tuple(sorted(rng.sample(tags, 2)))
        if pair not in seen:
            seen.add(pair)
            pairs.append(list(pair))
    return pairs


def visible_scopes(engine: MemoryEngine) -> list[str]:
    return list(engine.whoami().visible)


def tag_primes(conn: Any) -> dict[str, int]:
    return {
        label: int(prime)
        for label, prime in conn.execute("SELECT label, prime FROM primes WHERE kind = 'tag'")
    }


# -- the systems ------------------------------------------------------------------------

TAG_SQL = (
    "SELECT content FROM records WHERE tag_primes @> %s::bigint[] AND scope = ANY(%s) "
    "ORDER BY importance * strength DESC LIMIT 10"
)
TEXT_SQL = (
    "SELECT content FROM records, plainto_tsquery('english', %s) AS q "
    "WHERE lex @@ q AND scope = ANY(%s) ORDER BY ts_rank(lex, q) DESC LIMIT 10"
)
VECTOR_SQL = "SELECT content, vector FROM records WHERE scope = ANY(%s) AND vector IS NOT NULL"
INSERT_SQL = (
    "INSERT INTO records (record_id, dedupe_key, domain, subdomain, tags, tag_product, "
    "content, vector, importance, strength, created_at, updated_at, accessed_at, "
    "access_count, metadata, instance_key, strength_at, scope) VALUES "
    "(%s, %s, %s, %s, %s, %s, %s, %s, %s, 1.0, %s, %s, %s, 0, '{}', NULL, %s, %s)"
)
FLOOR_SCOPE = "project:plain-sql-floor"


def sql_tag(conn: Any, primes: list[int], scopes: list[str]) -> list[str]:
    return [row[0] for row in conn.execute(TAG_SQL, (primes, scopes))]


def sql_text(conn: Any, text: str, scopes: list[str]) -> list[str]:
    return [row[0] for row in conn.execute(TEXT_SQL, (text, scopes))]


def sql_vector(conn: Any, unit: np.ndarray, scopes: list[str]) -> list[tuple[str, float]]:
    rows = conn.execute(VECTOR_SQL, (scopes,)).fetchall()
    matrix = np.frombuffer(b"".join(bytes(v) for _, v in rows), dtype="<f4").reshape(len(rows), -1)
    norms = np.linalg.norm(matrix, axis=1)
    scores = (matrix @ unit) / np.where(norms > 0, norms, 1.0)
    best = np.argpartition(-scores, LIMIT)[:LIMIT] if len(rows) > LIMIT else np.arange(len(rows))
    best = best[np.argsort(-scores[best], kind="stable")]
    return [(rows[i][0], float(scores[i])) for i in best]


def contents(hits: list[Any]) -> list[str]:
    return [hit.record.content for hit in hits]


def vector_agrees(got: list[tuple[str, float]], floor: list[tuple[str, float]]) -> bool:
    """The same 10, best first: the i-th scores as the floor's i-th, within float32 rounding."""
    if len(got) != len(floor):
        return False
    return all(abs(a[1] - b[1]) <= 1e-5 for a, b in zip(got, floor))


# -- processes --------------------------------------------------------------------------


FLOOR_PROCESS = """
import json, sys, time
import psycopg
url, sql = sys.argv[1], sys.argv[2]
primes, scopes = json.loads(sys.argv[3]), json.loads(sys.argv[4])
with psycopg.connect(url) as conn:
    rows = [r[0] for r in conn.execute(sql, (primes, scopes))]
rss = 0
for line in open("/proc/self/status"):
    if line.startswith("VmRSS:"):
        rss = int(line.split()[1])
print(json.dumps({"contents": rows, "rss_kib": rss}), flush=True)
"""


def server_start(store: str, pair: list[str], question: str) -> dict[str, Any]:
    """Spawn the MCP server, time spawn to its first tag query's answer, read its memory."""
    started = time.perf_counter()
    # The servers hold no vectors of their own: their memory is what the store's
    # size costs without the vector cache (which holds 4 bytes a dimension a record).
    env = {**os.environ, "PRIME_MEMORY_VECTOR_CACHE": "off"}
    client = LineClient([*SERVER, "--store", store, "--scope", SCOPE], env=env)
    try:
        reply = client.call_tool(
            "prime_memory_query", {"tags": pair, "limit": LIMIT, "max_tokens": 100_000}
        )
        seconds = time.perf_counter() - started
        client.call_tool("prime_memory_query", {"text": question, "limit": LIMIT})
        memory = memory_kib(client.proc.pid)["rss_kib"]
    finally:
        client.close()
    hits = reply["structuredContent"]["hits"]
    return {"seconds": seconds, "rss_kib": memory, "contents": [h["content"] for h in hits]}


def floor_start(url: str, primes: list[int], scopes: list[str]) -> dict[str, Any]:
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", FLOOR_PROCESS, url, TAG_SQL, json.dumps(primes), json.dumps(scopes)],
        capture_output=True,
        text=True,
        check=True,
    )
    seconds = time.perf_counter() - started
    found = json.loads(done.stdout)
    return {"seconds": seconds, "rss_kib": found["rss_kib"], "contents": found["contents"]}


# -- one size ---------------------------------------------------------------------------


def measure(
    stores: Stores,
    data: Generated,
    n: int,
    args: argparse.Namespace,
    embed: Callable[[list[str]], np.ndarray],
    log: Callable[[str], None],
) -> dict[str, Any]:
    sq, pg, conn = stores.sqlite, stores.postgres, stores.conn
    scopes = visible_scopes(pg)
    problems: list[str] = []
    result: dict[str, Any] = {"records": n}

    stats = {"sqlite": sq.stats(), "postgres": pg.stats()}
    counts = {name: st.records for name, st in stats.items()}
    for name, st in stats.items():
        if st.embedding_space != args.embedder_name:
            problems.append(
                f"{name}: embedding space {st.embedding_space!r}, not {args.embedder_name!r}"
            )
    row = conn.execute("SELECT count(*) FROM records").fetchone()
    counts["plain sql"] = int(row[0])
    size = conn.execute(
        "SELECT pg_total_relation_size('records'), pg_indexes_size('records')"
    ).fetchone()
    result["disk_mib"] = {"records": size[0] / 2**20, "of which indexes": size[1] / 2**20}
    result["counts"] = counts
    if len(set(counts.values())) != 1:
        problems.append(f"record counts differ: {counts}")

    # -- agreement: tag queries
    pairs = tag_pairs(data, n, args.queries, args.seed)
    primes_of = tag_primes(conn)
    pair_primes = [[primes_of[t] for t in pair] for pair in pairs]
    for pair, primes in zip(pairs, pair_primes):
        a = contents(sq.query(tags=pair, limit=LIMIT))
        b = contents(pg.query(tags=pair, limit=LIMIT))
        c = sql_tag(conn, primes, scopes)
        if args.inject_mismatch:
            c = c[:-1]
        if not (a == b == c) or len(a) == 0:
            problems.append(
                f"tag query {pair}: sqlite {len(a)} hits, postgres {len(b)}, plain sql {len(c)}; "
                f"same order: sqlite=postgres {a == b}, postgres=sql {b == c}"
            )
    # -- agreement: vector queries
    questions = sentences(args.queries, args.seed + 2, 3, 8)
    vq = [v / np.linalg.norm(v) for v in embed(questions[: args.vector_queries])]
    # pgvector's HNSW index is approximate: there, PostgreSQL's misses are counted
    # (its candidates are still ranked exactly), not held against the run.
    approximate = getattr(args, "pgvector", False)
    exact_vectors = []
    for i, unit in enumerate(vq):
        floor = sql_vector(conn, unit, scopes)
        for name, engine in (("sqlite", sq), ("postgres", pg)):
            got = [(h.record.content, h.score) for h in engine.query(vector=unit, limit=LIMIT)]
            agrees = vector_agrees(got, floor)
            if name == "postgres":
                exact_vectors.append(agrees)
            if not agrees and not (approximate and name == "postgres"):
                problems.append(f"vector query {i}: {name} differs from the exact top-10")
    result["vector_exact_share"] = statistics.mean(exact_vectors)
    # -- text: how often both engines give the same top-10, with the default
    # settings (a broad query past 10,000 records planned) and with every match scored
    default = sq.ranking
    exact = replace(default, exact_store=max(default.exact_store, 2 * n))
    for label, ranking in (("", default), ("_exact", exact)):
        sq.ranking = pg.ranking = ranking
        overlap, same, ordered = [], [], []
        for q in questions:
            a = contents(sq.query(text=q, limit=LIMIT))
            b = contents(pg.query(text=q, limit=LIMIT))
            overlap.append(len(set(a) & set(b)) / max(len(a), 1))
            same.append(set(a) == set(b))
            ordered.append(a == b)
        result[f"text_top10_overlap{label}"] = statistics.mean(overlap)
        # The share of queries whose top-10 is the same records, and in the same order.
        result[f"text_top10_same{label}"] = statistics.mean(same)
        result[f"text_top10_same_order{label}"] = statistics.mean(ordered)
    sq.ranking = pg.ranking = default
    if problems:
        result["agreement"] = False
        result["problems"] = problems
        return result

    # -- timings, side by side
    def side_by_side(
        calls: dict[str, Callable[[int], object]], count: int, rounds: int
    ) -> dict[str, float]:
        return harness.pooled_medians(harness.alternate(calls, range(count), rounds))

    def asked(
        key: str, values: list[Any], sql: Callable[..., object], floor: list[Any]
    ) -> dict[str, Callable[[int], object]]:
        """The same question to both engines, ``query(KEY=values[q])``, and to plain SQL."""
        return {
            "sqlite": lambda q: sq.query(**{key: values[q]}, limit=LIMIT),
            "postgres": lambda q: pg.query(**{key: values[q]}, limit=LIMIT),
            "plain sql": lambda q: sql(conn, floor[q], scopes),
        }

    p50: dict[str, dict[str, float]] = {}
    for kind, key, values, sql, floor, rounds in (
        ("tag query", "tags", pairs, sql_tag, pair_primes, args.rounds),
        ("text query", "text", questions, sql_text, questions, args.rounds),
        ("text query, every match scored", "text", questions, sql_text, questions, 1),
        ("vector top-10", "vector", vq, sql_vector, vq, 1),
    ):
        log(f"{n:,}: {kind}")
        sq.ranking = pg.ranking = exact if kind.endswith("scored") else default
        p50[kind] = side_by_side(asked(key, values, sql, floor), len(values), rounds)
    sq.ranking = pg.ranking = default

    # A floor under an exact text query without pgvector: numpy scoring every
    # vector of a matrix of the store's shape and taking the best 40, as the
    # vector cache does (random vectors: the time does not depend on them).
    matrix = np.random.default_rng(args.seed).standard_normal((n, len(vq[0])), dtype=np.float32)
    scans = []
    for unit in vq * 4:
        started = time.perf_counter()
        np.argpartition(-(matrix @ unit), 40)[:40]
        scans.append(time.perf_counter() - started)
    del matrix
    result["vector_scan_seconds"] = statistics.median(scans)

    log(f"{n:,}: single stores")
    rng = random.Random(f"{args.seed}:{n}:stores")
    single = [
        {
            "content": f"single store {n} {i}: " + " ".join(rng.sample(questions, 1)),
            "domain": "domain00",
            "tags": ["tag000", f"tag{rng.randrange(200):03d}"],
            "importance": rng.random(),
        }
        for i in range(args.stores)
    ]
    vectors = embed([item["content"] for item in single])
    tag_product = str(primes_of["tag000"])
    floor_rows = [
        (
            f"floor-{n}-{i}",
            secrets.token_hex(16),
            "domain00",
            "notes",
            '["tag000"]',
            tag_product,
            f"plain sql floor {n} {i}: " + item["content"],
            np.asarray(vectors[i], dtype="<f4").tobytes(),
            item["importance"],
            T0,
            T0,
            T0,
            T0,
            FLOOR_SCOPE,
        )
        for i, item in enumerate(single)
    ]
    single_stores: dict[str, Callable[[int], object]] = {
        "sqlite": lambda q: sq.store(**single[q], vector=vectors[q]),
        "postgres": lambda q: pg.store(**single[q], vector=vectors[q]),
        "plain sql": lambda q: conn.execute(INSERT_SQL, floor_rows[q]),
    }
    p50 = {"store": side_by_side(single_stores, len(single), 1), **p50}
    conn.execute("DELETE FROM records WHERE scope = %s", (FLOOR_SCOPE,))

    log(f"{n:,}: fold (dry run)")
    fold: dict[str, Any] = {}
    for name, engine in (("sqlite", sq), ("postgres", pg)):
        if n > args.fold_max:
            fold[name] = {"skipped": f"above --fold-max {args.fold_max:,}"}
            continue
        try:
            seconds, report = harness.timed(engine.fold, dry_run=True)
            fold[name] = {"seconds": seconds, "after": report.records_after}
        except NotAvailable as exc:
            fold[name] = {"unavailable": str(exc)}

    log(f"{n:,}: start-up to the first answered query, {args.starts} of each")
    base = BASE_SYSTEM.format(stores.base_records)
    want = contents(pg.query(tags=pairs[0], limit=LIMIT))
    base_pair = tag_pairs(data, stores.base_records, 1, args.seed)[0]
    base_primes = [primes_of[t] for t in base_pair]
    base_want = sql_tag(stores.base_conn, base_primes, scopes)
    starts = harness.in_turns(
        {
            "sqlite": lambda: server_start(str(stores.sqlite_path), pairs[0], questions[0]),
            "postgres": lambda: server_start(stores.pg_url, pairs[0], questions[0]),
            "plain sql": lambda: floor_start(stores.pg_url, pair_primes[0], scopes),
            base: lambda: server_start(stores.base_url, base_pair, questions[0]),
        },
        args.starts,
    )
    for name, found in ((name, f) for name, runs in starts.items() for f in runs):
        if found["contents"] != (base_want if name == base else want):
            problems.append(
                f"{name} process answered the first tag query otherwise: "
                f"{found['contents'][:3]} against {want[:3]}"
            )
    if problems:
        result["agreement"] = False
        result["problems"] = problems
        return result

    result.update(
        agreement=True,
        queries={"tag": len(pairs), "text": len(questions), "vector": len(vq)},
        p50_seconds=p50,
        fold=fold,
        base_system=base,
        startup_seconds={k: statistics.median(r["seconds"] for r in v) for k, v in starts.items()},
        rss_mib={k: statistics.median(r["rss_kib"] for r in v) / 1024 for k, v in starts.items()},
    )
    return result


# -- output -----------------------------------------------------------------------------


def size_table(r: dict[str, Any]) -> harness.Table:
    """One size's p50 per call, start-up to the first answered tag query and resident
    memory, with PostgreSQL's over plain SQL's and over SQLite's."""
    s, m = r["startup_seconds"], r["rss_mib"]
    figures = [
        *((kind, row, harness.fmt_ms) for kind, row in r["p50_seconds"].items()),
        ("start-up to the first answered tag query", s, harness.fmt_ms),
        ("resident memory after it (MiB)", m, lambda v: f"{v:,.0f}"),
    ]
    rows = [
        [what, *(shown(row[name]) for name in SYSTEMS)]
        + [harness.times(row["postgres"], row[other]) for other in ("plain sql", "sqlite")]
        for what, row, shown in figures
    ]
    return ["per call (p50)", *SYSTEMS, "pg/sql", "pg/sqlite"], rows


def fold_text(fold: dict[str, dict[str, Any]]) -> str:
    """Each engine's dry-run fold: its time, or why there is none."""
    return "; ".join(
        f"{name} {f['seconds']:.2f} s"
        if "seconds" in f
        else f"{name} {'skipped' if 'skipped' in f else 'not available'} "
        f"({f.get('skipped') or f.get('unavailable')})"
        for name, f in fold.items()
    )


def print_size(r: dict[str, Any]) -> None:
    n = r["records"]
    print(f"\n{n:,} records ({r['counts']['postgres']:,} stored in each)")
    q = r.get("queries", {})
    ok = (
        f"agreement: OK - same record count; the same top-10 from both engines and plain SQL "
        f"for {q.get('tag')} tag queries (and from both servers for the first); the exact "
        f"top-10 from SQLite for {q.get('vector')} vector queries, and from PostgreSQL for "
        f"{100 * r['vector_exact_share']:.0f} % of them; text top-10 overlap "
        f"between the engines {100 * r['text_top10_overlap']:.0f} %, the same top-10 for "
        f"{100 * r['text_top10_same']:.0f} % of text queries "
        f"({100 * r['text_top10_same_order']:.0f} % in the same order); with every match "
        f"scored, overlap {100 * r['text_top10_overlap_exact']:.0f} %, the same top-10 for "
        f"{100 * r['text_top10_same_exact']:.0f} % "
        f"({100 * r['text_top10_same_order_exact']:.0f} % in the same order)"
    )
    if not harness.check(r.get("problems", []), ok, most=10):
        return
    print(harness.text_table(*size_table(r), indent="  "))
    disk = r["disk_mib"]
    print(
        f"  PostgreSQL's records table: {disk['records']:,.0f} MiB on disk, "
        f"{disk['of which indexes']:,.0f} MiB of it indexes"
    )
    print(
        f"  numpy scoring every vector and taking the best 40 (the vector cache's scan): "
        f"{harness.fmt_ms(r['vector_scan_seconds'])}"
    )
    print(f"  fold, dry run: {fold_text(r['fold'])} (plain SQL has no fold)")
    s, m, base = r["startup_seconds"], r["rss_mib"], r["base_system"]
    print(
        f"  a server on {base}, started in the same turns: start-up {harness.fmt_ms(s[base])}, "
        f"memory {m[base]:,.0f} MiB; postgres over it: start-up "
        f"{harness.times(s['postgres'], s[base])}, memory {harness.times(m['postgres'], m[base])}"
    )


def judge(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The targets, judged on the sizes measured (indicative when not the target sizes)."""
    ok = [r for r in results if r.get("agreement")]
    if not ok:
        return []
    out = []
    top = max(ok, key=lambda r: r["records"])
    tag = top["p50_seconds"]["tag query"]
    value = tag["postgres"] / tag["plain sql"]
    out.append(
        {
            "target": "PostgreSQL tag query <= 1.5x plain SQL",
            "records": top["records"],
            "indicative": top["records"] != TARGET_RECORDS,
            "measured": value,
            "pass": value <= TARGET_RATIO,
        }
    )
    for label, key in (("", ""), (", every match scored", "_exact")):
        worst = min(ok, key=lambda r: r[f"text_top10_same{key}"])
        out.append(
            {
                "target": f"text top-10 the same as SQLite's for >= 95 % of queries{label}",
                "records": worst["records"],
                "indicative": False,
                "measured": worst[f"text_top10_same{key}"],
                "unit": "share",
                "pass": worst[f"text_top10_same{key}"] >= TEXT_SAME,
            }
        )
    text = top["p50_seconds"]["text query"]
    out.append(
        {
            "target": "PostgreSQL text query p50 <= 150 ms",
            "records": top["records"],
            "indicative": top["records"] != TARGET_RECORDS,
            "measured": text["postgres"] * 1000,
            "unit": "ms",
            "floor": text["sqlite"] * 1000,
            "scan": top["vector_scan_seconds"] * 1000,
            "pass": text["postgres"] <= TEXT_P50,
        }
    )
    # Start-up and memory at the largest size over a store of the first size,
    # the two servers started in turns in the same minutes.
    base = top["base_system"]
    base_records = min(r["records"] for r in ok)
    for key, label in (("startup_seconds", "start-up"), ("rss_mib", "memory")):
        value = top[key]["postgres"] / top[key][base]
        out.append(
            {
                "target": f"PostgreSQL server {label} at the largest size <= 1.5x the smallest",
                "records": top["records"],
                "base_records": base_records,
                "indicative": (top["records"], base_records) != (TARGET_RECORDS, BASE_RECORDS),
                "measured": value,
                "pass": value <= TARGET_RATIO,
            }
        )
    return out


# -- the run ----------------------------------------------------------------------------


# -- tag queries over tied and varied salience --------------------------------------------


class FixedClock:
    """A clock that reads ``now`` until told otherwise."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


#: Tags of the tied and varied layouts; each holds 1/20 of the records.
LAYOUT_TAGS = 20
#: The largest size at which the stored-salience bound's read is timed too.
BOUND_MAX = 100_000
DAY = 86_400.0


def layout_items(layout: str, low: int, high: int, rng: random.Random) -> list[dict[str, Any]]:
    """Records ``low`` to ``high`` of a layout: one tag of 20 each, no vectors.

    ``tied``: every record at the default importance; ``varied``: importances
    spread from 0.05 to 0.99, so all four tiers decay at their own pace.
    """
    return [
        {
            "content": f"note {i} about item {i % 997}",
            "tags": [f"t{i % LAYOUT_TAGS}"],
            **({} if layout == "tied" else {"importance": round(rng.uniform(0.05, 0.99), 4)}),
        }
        for i in range(low, high)
    ]


def floor_salience(conn: Any, prime: int, now: float, limit: int) -> list[str]:
    """The same question in plain SQL: every gated record's decayed salience, sorted."""
    order = STORE_DECAY
    since = "greatest(accessed_at, coalesce(strength_at, accessed_at))"
    salience = (
        f"importance * strength * CASE WHEN importance >= {order.permanent_from} THEN 1 "
        f"ELSE power(2::float8, -greatest(%s - {since}, 0) / "
        f"CASE WHEN importance >= {order.long_term_from} THEN {order.long_term_half_life} "
        f"WHEN importance >= {order.short_term_from} THEN {order.short_term_half_life} "
        f"ELSE {order.working_half_life} END) END"
    )
    rows = conn.execute(
        f"SELECT record_id FROM records WHERE tag_primes @> ARRAY[%s]::bigint[] "
        f"ORDER BY {salience} DESC, updated_at DESC, id LIMIT %s",
        (prime, now, limit),
    )
    return [row[0] for row in rows]


def layout_size(
    engine: MemoryEngine, conn: Any, now: float, n: int, limit: int, rounds: int
) -> tuple[dict[str, Any], list[tuple[str, dict[str, list[str]]]]]:
    """One size of a layout: each tag's question, checked, then timed in turns."""
    from prime_memory_folding.engine import pushdown

    tags = [f"t{k}" for k in range(LAYOUT_TAGS)]
    primes = dict(conn.execute("SELECT label, prime FROM primes WHERE kind = 'tag'"))
    matches = pushdown.decay_matches

    def ids(hits: list[Any]) -> list[str]:
        return [hit.record.record_id for hit in hits]

    def bound(tag: str) -> list[str]:
        pushdown.decay_matches = lambda *_: False  # the read it replaces
        try:
            return ids(engine.query(tags=[tag], limit=limit))
        finally:
            pushdown.decay_matches = matches

    systems: dict[str, Callable[[str], list[str]]] = {
        "engine": lambda tag: ids(engine.query(tags=[tag], limit=limit)),
        "sql": lambda tag: floor_salience(conn, primes[tag], now, limit),
    }
    if n <= BOUND_MAX:  # past it, the read it replaces takes seconds a query
        systems["bound"] = bound
    wrong = []
    for tag in tags:
        answers = {name: system(tag) for name, system in systems.items()}
        if len({tuple(a) for a in answers.values()}) != 1:
            wrong.append((tag, answers))
    if wrong:
        return {}, wrong
    p50 = harness.pooled_medians(harness.alternate(systems, tags, rounds=rounds))
    return {"records": n, **{f"{k}_ms": v * 1000 for k, v in p50.items()}}, []


def salience_layouts(args: argparse.Namespace) -> int:
    """Tag queries over the tied and varied layouts at each size: the engine's
    decay order, the stored-salience bound it replaces, and plain SQL's sort."""
    import psycopg

    limit, rounds = 5, args.rounds
    results: dict[str, list[dict[str, Any]]] = {}
    failed = False
    for layout in ("tied", "varied"):
        rng = random.Random(args.seed)
        clock = FixedClock(T0)
        with scratch_database(args.pg, args.db_prefix) as url:
            engine = MemoryEngine(url, clock=clock, embedder="none")
            conn = psycopg.connect(url, autocommit=True)
            loaded, rows = 0, []
            try:
                for n in args.sizes:
                    progress = Progress(
                        f"{layout}: loading to {n:,}", n - loaded, enabled=not args.quiet
                    )
                    for low in range(loaded, n, BATCH):
                        high = min(low + BATCH, n)
                        clock.now = T0 + (0.0 if layout == "tied" else low / n * 30 * DAY)
                        engine.store_many(layout_items(layout, low, high, rng))
                        progress.update(high - loaded)
                    loaded = n
                    conn.execute("VACUUM ANALYZE records")  # as autovacuum leaves a loaded table
                    clock.now = T0 + 40 * DAY
                    row, wrong = layout_size(engine, conn, clock.now, n, limit, rounds)
                    if wrong:
                        print(f"{layout} at {n:,}: the systems disagree on {len(wrong)} tags:")
                        for tag, answers in wrong[:3]:
                            print(f"  {tag}: {answers}")
                        failed = True
                        break
                    rows.append(row)
                    replaced = (
                        f", the stored-salience bound {row['bound_ms']:.2f} ms"
                        if "bound_ms" in row
                        else ""
                    )
                    print(
                        f"{layout} {n:>9,}: engine {row['engine_ms']:.2f} ms, "
                        f"plain SQL sort {row['sql_ms']:.2f} ms{replaced}"
                    )
            finally:
                conn.close()
                engine.close()
        results[layout] = rows
        if failed:
            break
        if len(rows) > 1:
            first, last = rows[0], rows[-1]
            growth = last["engine_ms"] / first["engine_ms"]
            ok = growth <= 1.5
            print(
                f"{harness.verdict(ok)} {layout}: tag query at {last['records']:,} over "
                f"{first['records']:,}: {growth:.2f}x (target <= 1.5x); plain SQL's sort "
                f"{last['sql_ms'] / first['sql_ms']:.2f}x"
            )
    harness.write_json(args.json, {"salience_layouts": results})
    return EXIT_MISMATCH if failed else 0


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    # --inject-mismatch: the plain SQL's tag query drops a hit
    parser = harness.parser(
        __doc__,
        inject=True,
        queries=(20, "tag and text questions"),
        vector_queries=5,
        rounds=(3, "rounds of tag and text queries"),
        stores=(200, "single stores per backend"),
        starts=(3, "server starts per backend"),
        fold_max=(
            100_000,
            "largest size to fold (dry run); these sentences share many words, so a fold's "
            "candidate search grows fast past it",
        ),
        seed=1,
    )
    parser.add_argument("--sizes", type=int, nargs="+", help="record counts, ascending")
    parser.add_argument("--quick", action="store_true", help="tiny sizes (300, 600)")
    parser.add_argument(
        "--pg", default=DEFAULT_PG, help=f"a PostgreSQL server (default {DEFAULT_PG})"
    )
    parser.add_argument("--dir", type=Path, help="parent folder of the SQLite store")
    parser.add_argument(
        "--pgserver",
        action="store_true",
        help="run on a PostgreSQL with pgvector that the pgserver wheel starts (instead of --pg)",
    )
    parser.add_argument(
        "--salience-layouts",
        action="store_true",
        help="only the tag queries over the tied and varied layouts (no vectors, no SQLite)",
    )
    parser.add_argument(
        "--db-prefix",
        default="pmf_bench_",
        help="the scratch database's name, before a random suffix (default pmf_bench_)",
    )
    args = parser.parse_args(argv)
    if args.sizes is None:
        args.sizes = list(QUICK_SIZES if args.quick else DEFAULT_SIZES)
    if args.quick:
        args.queries, args.vector_queries, args.rounds = 4, 2, 1
        args.stores, args.starts = 10, 1
    if sorted(args.sizes) != args.sizes or args.sizes[0] < 100:
        parser.error("--sizes must be ascending, each at least 100")
    harness.at_least(parser, args, queries=1, vector_queries=1, rounds=1, stores=1, starts=1)
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.pgserver:
        with tempfile.TemporaryDirectory(prefix="pmf-pgserver-") as folder:
            # pgserver finds its lock folder through platformdirs.
            os.environ.setdefault("XDG_RUNTIME_DIR", folder)
            import pgserver

            server = pgserver.get_server(Path(folder) / "data", cleanup_mode="stop")
            try:
                args.pg, args.pgserver, args.pgvector = server.get_uri(), False, True
                print("on pgserver's PostgreSQL, with pgvector")
                return main_on(args)
            finally:
                server.cleanup()
    return main_on(args)


def main_on(args: argparse.Namespace) -> int:
    try:
        import psycopg

        psycopg.connect(args.pg, connect_timeout=5).close()
    except ImportError:
        print("unavailable: psycopg is not installed (pip install -e '.[postgres]')")
        return 2
    except Exception as exc:  # psycopg.OperationalError
        print(f"unavailable: cannot connect to PostgreSQL at {args.pg}: {exc}".strip())
        return 2

    if args.salience_layouts:
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
        return salience_layouts(args)
    log = harness.Log(args.quiet)
    # A terminated run still drops its database (the finally blocks below).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    # The servers run their default configuration: text embedded with the built-in model.
    os.environ.pop("PRIME_MEMORY_EMBEDDER", None)
    before = harness.conditions()
    print(f"start: {harness.conditions_line(before)}")
    embedder = load_embedder("builtin")
    args.embedder_name = embedder.name

    def embed(texts: list[str]) -> np.ndarray:
        return np.asarray(embedder.embed(texts), dtype=np.float32)

    data = Generated(args.sizes[-1], args.seed)
    results: list[dict[str, Any]] = []
    clock = lambda: T0  # noqa: E731
    failed = False
    with (
        scratch_database(args.pg, args.db_prefix) as url,
        tempfile.TemporaryDirectory(prefix="pmf-pg-", dir=args.dir) as folder,
    ):
        sqlite_path = Path(folder) / "bench.db"
        sq = MemoryEngine(sqlite_path, scope=SCOPE, clock=clock, embedder=embedder)
        pg = MemoryEngine(url, scope=SCOPE, clock=clock, embedder=embedder)
        conn = psycopg.connect(url, autocommit=True)
        base_records = args.sizes[0]
        conn.execute('CREATE SCHEMA "base"')
        joiner = "&" if "?" in url else "?"
        base_url = f"{url}{joiner}options={quote('-csearch_path=base,public')}"
        with MemoryEngine(base_url, scope=SCOPE, clock=clock, embedder=embedder) as base:
            for low in range(0, base_records, BATCH):
                batch = data.items(low, min(low + BATCH, base_records))
                base.store_many(batch)
        base_conn = psycopg.connect(base_url, autocommit=True)
        stores = Stores(sq, pg, conn, sqlite_path, url, base_url, base_conn, base_records)
        try:
            loaded = 0
            for n in args.sizes:
                # With pgvector, each size's records are loaded as a bulk import
                # would be: the HNSW index is built again after them (inserting
                # into it one record at a time runs at about 130 records a second).
                hnsw = getattr(args, "pgvector", False) and loaded > 0
                if hnsw:
                    conn.execute("DROP INDEX IF EXISTS records_embedding")
                spent = load(stores, data, loaded, n, embed, args.quiet)
                if hnsw:
                    started = time.perf_counter()
                    conn.execute("SET maintenance_work_mem = '4GB'")
                    conn.execute(
                        "CREATE INDEX records_embedding ON records "
                        "USING hnsw (embedding vector_cosine_ops)"
                    )
                    spent["hnsw index"] = time.perf_counter() - started
                    print(f"the HNSW index built again in {spent['hnsw index']:.0f} s")
                loaded = n
                conn.execute("VACUUM ANALYZE records")  # as autovacuum leaves a loaded table
                result = measure(stores, data, n, args, embed, log)
                result["load_seconds"] = spent
                results.append(result)
                print_size(result)
                if not result["agreement"]:
                    failed = True
                    break
                # The single stores went into both; the next size adds to them.
        finally:
            conn.close()
            base_conn.close()
            sq.close()
            pg.close()
    targets = [] if failed else judge(results)
    if targets:
        print()
    for t in targets:
        scale = f"{t['records']:,}" + (
            f" over {t['base_records']:,}" if "base_records" in t else ""
        )
        note = (
            " (indicative: the targets are set at 1,000,000 over 10,000)" if t["indicative"] else ""
        )
        unit = t.get("unit")
        shown = (
            f"{100 * t['measured']:.0f} % (the worst size)"
            if unit == "share"
            else f"{t['measured']:.0f} ms (SQLite's, the same question on the same records: "
            f"{t['floor']:.0f} ms; numpy's scan of every vector alone: {t['scan']:.0f} ms)"
            if unit == "ms"
            else f"{t['measured']:.2f}x"
        )
        print(f"{harness.verdict(t['pass'])} {t['target']}: {shown} at {scale}{note}")
    after = harness.conditions()
    print(f"end: {harness.conditions_line(after)}")
    harness.write_json(
        args.json,
        {
            "sizes": results,
            "targets": targets,
            "load_before": before["load"],
            "load_after": after["load"],
            "cpu_reference_ms_before": before["cpu_reference_ms"],
            "cpu_reference_ms_after": after["cpu_reference_ms"],
        },
    )
    return EXIT_MISMATCH if failed else 0


if __name__ == "__main__":
    sys.exit(main())
