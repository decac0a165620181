"""Crash soak: kill -9 a writer again and again, and check the store after each kill.

Every round starts one process on the store and kills it with SIGKILL at a
seeded random moment. There are three kinds of round:

- ``store``: an engine writer stores memories one by one and prints
  ``ack <id>`` after each store has returned, folding now and then; it is
  killed right after its k-th acknowledgement (k random), so the kill lands
  somewhere inside the stores that follow;
- ``fold``: the writer stores a batch of 100-300 memories that a fold 30 days
  on prunes or merges, then folds. It prints a marker once the fold's write
  transaction has begun (``BEGIN IMMEDIATE`` returned), and the parent kills
  it after a random delay drawn over the fold transactions' measured duration
  (up to 1.25 x the median so far), so most kills land inside the transaction
  and some at or after its commit;
- ``mcp``: the real stdio MCP server (``python -m prime_memory_folding.mcp.server``)
  gets ``prime_memory_store`` calls, several in flight at once; a write counts
  as acknowledged only when its JSON-RPC answer has arrived and is not an
  error. It is killed right after the k-th answer, while later calls are
  still being served.

After every kill it checks that the store opens, ``PRAGMA integrity_check`` is
ok, every acknowledged record and every record seen before is live or
archived (never both), every folded record's target exists, and the fold that
was running was applied wholly or not at all (its archive entries number 0 or
exactly what the dry run planned). A fold kill counts as landing mid-fold only
when the marker was seen and the fold, which had work to do, was not applied;
of those, it also counts the kills after the fold had started writing its log
(the ``-wal`` file had grown since the marker), i.e. inside the commit.

    python3 benchmarks/crash_soak.py                   # 2,000 kills
    python3 benchmarks/crash_soak.py --kills 50 --seed 3 --json crash.json

Exits 1 when a check fails.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import queue
import random
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import _harness as harness
from _shared import HELLO, SERVER

TIMEOUT = 120
DIM = 8
GROUPS = 6
THIRTY_DAYS = 30 * 86_400.0
#: The kill delay in fold rounds before any fold transaction has been measured.
FIRST_FOLD_ESTIMATE_S = 0.2


def wal_bytes(store: str | Path) -> int:
    try:
        return os.path.getsize(f"{store}-wal")
    except OSError:
        return 0


def writer(store: str, seed: int, fold_mode: bool) -> None:
    """Store and fold until killed; in fold mode, a large foldable batch before each fold."""
    import numpy as np

    from prime_memory_folding import MemoryEngine
    from prime_memory_folding.fold.folding import FoldPolicy

    rng = random.Random(seed)
    bases = np.random.default_rng(0).normal(size=(GROUPS, DIM))
    engine = MemoryEngine(store, embedder="none", fold_policy=FoldPolicy(similarity=0.95))
    storage = engine.storage
    # The fold's own write transaction (a fold may also run short ones of its
    # own, such as merging the text index's small segments, which stay unmarked).
    plain_exclusive = storage.exclusive

    @contextlib.contextmanager
    def marked_transaction() -> Iterator[None]:
        with plain_exclusive():
            print("txn", wal_bytes(store), flush=True)
            started = time.perf_counter()
            yield
        print("committed", time.perf_counter() - started, flush=True)

    def item(n: int) -> dict[str, Any]:
        group = rng.randrange(GROUPS)
        noise = np.random.default_rng(seed * 1_000_003 + n).normal(scale=0.02, size=DIM)
        return {
            "content": f"writer {seed} memory {n} of group {group}",
            "tags": [f"group{group}", f"seed{seed % 7}"],
            "importance": rng.choice([0.1, 0.5, 0.9]),
            "vector": (bases[group] + noise).tolist(),
        }

    n = 0
    while True:
        if fold_mode:
            batch = [item(n + k) for k in range(rng.randint(100, 300))]
            for record in engine.store_many(batch):
                print("ack", record.record_id, flush=True)
            n += len(batch)
        else:
            for _ in range(rng.randint(3, 20)):
                record = engine.store(**item(n))
                print("ack", record.record_id, flush=True)
                n += 1
        when = time.time() + (THIRTY_DAYS if fold_mode else rng.choice([0.0, THIRTY_DAYS]))
        plan = engine.fold(dry_run=True, now=when)
        print("fold", repr(when), plan.pruned + plan.folded, flush=True)
        storage.exclusive = marked_transaction  # type: ignore[method-assign]
        try:
            engine.fold(now=when)
        finally:
            del storage.exclusive
        print("folded", flush=True)


def inspect(store: Path) -> tuple[list[str], set[str], dict[str, tuple[str, str | None, float]]]:
    """(problems, live ids, archived id -> (reason, folded_into, archived_at))."""
    from prime_memory_folding import MemoryEngine, PrimeMemoryError

    problems: list[str] = []
    try:
        with MemoryEngine(store, embedder="none") as engine:
            engine.stats()
    except PrimeMemoryError as exc:
        problems.append(f"the store does not open: {exc}")
    db = sqlite3.connect(store)
    try:
        verdict = [row[0] for row in db.execute("PRAGMA integrity_check")]
        if verdict != ["ok"]:
            problems.append(f"integrity_check: {verdict[:3]}")
        live = {row[0] for row in db.execute("SELECT record_id FROM records")}
        archived = {
            row[0]: (row[1], row[2], row[3])
            for row in db.execute("SELECT record_id, reason, folded_into, archived_at FROM archive")
        }
    finally:
        db.close()
    return problems, live, archived


def lines_of(pipe: Any) -> queue.Queue[str | None]:
    """Whole lines from ``pipe`` as a reader thread sees them; None at the end."""
    lines: queue.Queue[str | None] = queue.Queue()

    def read() -> None:
        for line in pipe:
            if line.endswith("\n"):  # a line cut short by the kill is never a whole message
                lines.put(line)
        lines.put(None)

    threading.Thread(target=read, daemon=True).start()
    return lines


class Round:
    """What one killed process acknowledged, and what the parent saw of its fold."""

    def __init__(self) -> None:
        self.acked: list[str] = []
        self.problems: list[str] = []
        self.fold: tuple[float, int] | None = None  # (when, planned entries) of a running fold
        self.marker_wal: int | None = None  # -wal bytes when the fold's transaction began
        self.killed_wal = 0
        self.fold_txn_s: list[float] = []  # durations of fold transactions that committed


def writer_round(
    store: Path, seed: int, mode: str, kill_after: int, delay: float
) -> tuple[Round, int, str]:
    """Run an engine writer until the kill; returns (round, exit code, stderr)."""
    result = Round()
    proc = subprocess.Popen(
        [sys.executable, __file__, "writer", str(store), str(seed), str(int(mode == "fold"))],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stdout is not None
    lines = lines_of(proc.stdout)
    killed = False

    def kill() -> None:
        nonlocal killed
        if not killed:
            proc.kill()
            killed = True

    while True:
        line = lines.get(timeout=TIMEOUT)
        if line is None:
            break
        word, *rest = line.split()
        if word == "ack":
            result.acked.append(rest[0])
            if mode == "store" and len(result.acked) == kill_after:
                kill()
        elif word == "fold":
            result.fold = (float(rest[0]), int(rest[1]))
        elif word == "txn":
            result.marker_wal = int(rest[0])
            if mode == "fold" and not killed:
                try:
                    after = lines.get(timeout=delay)
                except queue.Empty:
                    kill()  # the chosen moment came while the fold was still running
                    continue
                kill()  # the fold committed before the chosen moment came
                if after is not None and after.startswith("committed"):
                    result.fold_txn_s.append(float(after.split()[1]))
                    result.fold = None
                if after is None:
                    break
        elif word == "committed":
            result.fold_txn_s.append(float(rest[0]))
            result.fold = None
    code = proc.wait(timeout=TIMEOUT)
    result.killed_wal = wal_bytes(store)
    stderr = proc.stderr.read() if proc.stderr else ""
    for pipe in (proc.stdout, proc.stderr):
        if pipe:
            pipe.close()
    return result, code, stderr


def mcp_round(
    store: Path, rng: random.Random, round_no: int, kill_after: int
) -> tuple[Round, int, str]:
    """Drive the stdio MCP server with pipelined stores until the kill."""
    result = Round()
    env = {**os.environ, "PRIME_MEMORY_EMBEDDER": "none"}
    proc = subprocess.Popen(
        [*SERVER, "--store", str(store)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True,
    )  # fmt: skip
    assert proc.stdin is not None and proc.stdout is not None
    lines = lines_of(proc.stdout)
    ids = itertools.count(1)
    in_flight: set[int] = set()
    window = rng.randint(1, 8)
    vectors = random.Random(round_no)
    killed = False

    def send(message: dict[str, Any]) -> None:
        assert proc.stdin is not None
        proc.stdin.write(json.dumps(message) + "\n")
        proc.stdin.flush()

    def store_call() -> None:
        request_id = next(ids)
        group = vectors.randrange(GROUPS)
        arguments = {
            "content": f"mcp round {round_no} memory {request_id} of group {group}",
            "tags": [f"group{group}", "mcp"],
            "importance": vectors.choice([0.1, 0.5, 0.9]),
            "vector": [vectors.gauss(0.0, 1.0) for _ in range(DIM)],
        }
        call = {"name": "prime_memory_store", "arguments": arguments}
        send({"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": call})
        in_flight.add(request_id)

    try:
        send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": HELLO})
        line = lines.get(timeout=TIMEOUT)
        if line is None or json.loads(line).get("id") != 0:
            result.problems.append(f"no answer to initialize: {line!r}")
            proc.kill()
        else:
            send({"jsonrpc": "2.0", "method": "notifications/initialized"})
            for _ in range(window):
                store_call()
    except BrokenPipeError:
        pass
    while True:
        line = lines.get(timeout=TIMEOUT)
        if line is None:
            break
        frame = json.loads(line)
        if frame.get("id") not in in_flight:
            continue
        in_flight.discard(frame["id"])
        answer = frame.get("result")
        if answer is None or answer.get("isError"):
            result.problems.append(f"store {frame['id']} failed: {str(frame)[:300]}")
            continue
        # An answer that reached the client before the kill is acknowledged, whenever read.
        result.acked.append(answer["structuredContent"]["record"]["record_id"])
        if len(result.acked) >= kill_after and not killed:
            proc.kill()
            killed = True
        elif not killed:
            with contextlib.suppress(BrokenPipeError):
                store_call()
    code = proc.wait(timeout=TIMEOUT)
    stderr = proc.stderr.read() if proc.stderr else ""
    for pipe in (proc.stdin, proc.stdout, proc.stderr):
        if pipe:
            with contextlib.suppress(BrokenPipeError):
                pipe.close()
    return result, code, stderr


def run(store: Path, kills: int, seed: int, fold_share: float, mcp_share: float) -> dict[str, Any]:
    rng = random.Random(seed)
    seen: set[str] = set()
    problems: list[str] = []
    n_mcp = round(kills * mcp_share)
    n_fold = min(round(kills * fold_share), kills - n_mcp)
    modes = ["mcp"] * n_mcp + ["fold"] * n_fold + ["store"] * (kills - n_mcp - n_fold)
    rng.shuffle(modes)
    acknowledged = {"store": 0, "fold": 0, "mcp": 0}
    fold_kills = {
        "mid_fold": 0,
        "mid_fold_log_written": 0,
        "after_commit": 0,
        "without_work": 0,
    }
    fold_txn_s: list[float] = []
    started = time.perf_counter()
    for round_no, mode in enumerate(modes):
        kill_after = rng.randint(1, 40)
        estimate = 1.25 * statistics.median(fold_txn_s) if fold_txn_s else FIRST_FOLD_ESTIMATE_S
        delay = rng.uniform(0.0, estimate)
        if mode == "mcp":
            result, code, stderr = mcp_round(store, rng, round_no, kill_after)
        else:
            child_seed = seed * 100_000 + round_no
            result, code, stderr = writer_round(store, child_seed, mode, kill_after, delay)
        if mode == "fold":
            fold_txn_s += result.fold_txn_s
        if code != -signal.SIGKILL:
            problems.append(f"round {round_no} ({mode}): exited {code}: {stderr[-300:]}")
        problems += [f"round {round_no} ({mode}): {p}" for p in result.problems]
        acknowledged[mode] += len(result.acked)
        found, live, archived = inspect(store)
        problems += [f"round {round_no} ({mode}): {p}" for p in found]
        present = live | set(archived)
        lost = (seen | set(result.acked)) - present
        if lost:
            problems.append(f"round {round_no} ({mode}): {len(lost)} records lost, e.g. "
                            f"{sorted(lost)[:2]}")  # fmt: skip
        both = live & set(archived)
        if both:
            problems.append(f"round {round_no}: {len(both)} records both live and archived")
        dangling = {i for r, i, _ in archived.values() if r == "folded" and i not in present}
        if dangling:
            problems.append(
                f"round {round_no}: folded into missing records {sorted(map(str, dangling))[:2]}"
            )
        if result.fold is not None:
            when, expected = result.fold
            applied = sum(1 for _, _, at in archived.values() if at == when)
            if applied not in (0, expected):
                problems.append(
                    f"round {round_no}: fold half applied: {applied} of {expected} entries"
                )
            if mode == "fold" and result.marker_wal is not None:
                if not expected:
                    fold_kills["without_work"] += 1
                elif applied:
                    fold_kills["after_commit"] += 1
                else:
                    fold_kills["mid_fold"] += 1
                    if result.killed_wal > result.marker_wal:
                        fold_kills["mid_fold_log_written"] += 1
        elif mode == "fold":
            fold_kills["after_commit"] += 1
        seen = present
    return {
        "kills": kills,
        "modes": {m: modes.count(m) for m in ("store", "fold", "mcp")},
        "fold_kills": fold_kills,
        "median_fold_transaction_s": statistics.median(fold_txn_s) if fold_txn_s else None,
        "acknowledged": sum(acknowledged.values()),
        "acknowledged_by_mode": acknowledged,
        "live_and_archived": len(seen),
        "problems": problems,
        "seconds": time.perf_counter() - started,
        "ok": not problems,
    }


def summary(report: dict[str, Any]) -> str:
    modes, folds = report["modes"], report["fold_kills"]
    return (
        f"{report['kills']} kills ({modes['store']} of a storing writer, {modes['fold']} of a "
        f"folding writer, {modes['mcp']} of the MCP server): {folds['mid_fold']} landed "
        f"mid-fold ({folds['mid_fold_log_written']} after it began writing the log), "
        f"{folds['after_commit']} after the fold committed, {folds['without_work']} in a fold "
        f"without work; {report['acknowledged']} acknowledged writes "
        f"({report['acknowledged_by_mode']['mcp']} answered by the server), "
        f"{report['live_and_archived']} records live or archived, "
        f"{len(report['problems'])} problems, {report['seconds']:.1f} s"
    )


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["writer"]:
        writer(argv[1], int(argv[2]), argv[3] == "1")
        return 0
    parser = harness.parser(
        __doc__,
        kills=2_000,
        seed=1,
        fold_share=(0.3, "share of fold rounds"),
        mcp_share=(0.2, "share of rounds killing the MCP server"),
    )
    parser.add_argument("--store", type=Path, help="a new store file (default: a temp file)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="prime-memory-crash-") as folder:
        store = args.store or Path(folder) / "crash.db"
        report = run(store, args.kills, args.seed, args.fold_share, args.mcp_share)
    print(summary(report))
    return harness.conclude(report, args.json, report["problems"])


if __name__ == "__main__":
    sys.exit(main())
