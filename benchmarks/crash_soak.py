"""Crash soak: kill -9 a writer again and again, and check the store after each kill.

A writer process stores memories through the engine and prints ``ack <id>``
only after each store has returned, then now and then folds. The parent
kills it with SIGKILL at seeded random moments:

- ``store`` rounds: right after the writer's k-th acknowledgement (k random),
  so the kill lands somewhere inside the stores that follow;
- ``fold`` rounds: the writer kills itself from inside the fold's transaction,
  after a random number of SQLite progress callbacks.

After every kill it checks that the store opens, ``PRAGMA integrity_check`` is
ok, every acknowledged record and every record seen before is live or
archived (never both), every folded record's target exists, and the fold that
was running was applied wholly or not at all (its archive entries number 0 or
exactly what the dry run planned).

    python3 benchmarks/crash_soak.py                   # 2,000 kills
    python3 benchmarks/crash_soak.py --kills 50 --seed 3 --json crash.json

Exits 1 when a check fails.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import random
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

TIMEOUT = 120
DIM = 8
GROUPS = 6


def writer(store: str, seed: int, kill_in_fold: int) -> None:
    """Store and fold forever; with ``kill_in_fold`` > 0, die inside the first fold."""
    import numpy as np

    from prime_memory_folding import MemoryEngine
    from prime_memory_folding.folding import FoldPolicy

    rng = random.Random(seed)
    bases = np.random.default_rng(0).normal(size=(GROUPS, DIM))
    engine = MemoryEngine(store, embedder="none", fold_policy=FoldPolicy(similarity=0.95))
    n = 0
    while True:
        for _ in range(rng.randint(3, 20)):
            group = rng.randrange(GROUPS)
            vector = bases[group] + np.random.default_rng(seed * 1_000_003 + n).normal(
                scale=0.02, size=DIM
            )
            record = engine.store(
                f"writer {seed} memory {n} of group {group}",
                tags=[f"group{group}", f"seed{seed % 7}"],
                importance=rng.choice([0.1, 0.5, 0.9]),
                vector=vector.tolist(),
            )
            print("ack", record.record_id, flush=True)
            n += 1
        when = time.time() + rng.choice([0.0, 30 * 86_400.0])
        plan = engine.fold(dry_run=True, now=when)
        print("fold", repr(when), plan.pruned + plan.folded, flush=True)
        if kill_in_fold:

            def die(steps: list[int] = [0]) -> int:  # noqa: B006 - a counter kept across calls
                steps[0] += 1
                if steps[0] >= kill_in_fold:
                    os.kill(os.getpid(), signal.SIGKILL)
                return 0

            engine.storage.db.set_progress_handler(die, 50)  # type: ignore[attr-defined]
        engine.fold(now=when)
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


def run(store: Path, kills: int, seed: int, fold_share: float) -> dict[str, Any]:
    rng = random.Random(seed)
    seen: set[str] = set()
    problems: list[str] = []
    acked_total = 0
    modes = {"store": 0, "fold": 0}
    folds = {"applied": 0, "not applied": 0}
    started = time.perf_counter()
    for round_no in range(kills):
        mode = "fold" if rng.random() < fold_share else "store"
        modes[mode] += 1
        kill_in_fold = rng.randint(1, 400) if mode == "fold" else 0
        kill_after = rng.randint(1, 40)
        proc = subprocess.Popen(
            [sys.executable, __file__, "writer", str(store), str(seed * 100_000 + round_no),
             str(kill_in_fold)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        lines: queue.Queue[str | None] = queue.Queue()

        def read(pipe: Any = proc.stdout, out: queue.Queue[str | None] = lines) -> None:
            for line in pipe:
                out.put(line)
            out.put(None)

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        acked: list[str] = []
        fold: tuple[float, int] | None = None
        while True:
            line = lines.get(timeout=TIMEOUT)
            if line is None:
                break
            if not line.endswith("\n"):
                continue  # cut short by the kill: never a whole acknowledgement
            word, *rest = line.split()
            if word == "ack":
                acked.append(rest[0])
                if mode == "store" and len(acked) == kill_after:
                    proc.kill()
            elif word == "fold":
                fold = (float(rest[0]), int(rest[1]))
            elif word == "folded":
                fold = None
                if mode == "fold":
                    proc.kill()  # the fold finished before the chosen moment
        code = proc.wait(timeout=TIMEOUT)
        reader.join(timeout=TIMEOUT)
        stderr = proc.stderr.read() if proc.stderr else ""
        if proc.stderr:
            proc.stderr.close()
        if proc.stdout:
            proc.stdout.close()
        if code != -signal.SIGKILL:
            problems.append(f"round {round_no}: writer exited {code}: {stderr[-300:]}")
        acked_total += len(acked)
        found, live, archived = inspect(store)
        problems += [f"round {round_no}: {p}" for p in found]
        present = live | set(archived)
        lost = (seen | set(acked)) - present
        if lost:
            problems.append(f"round {round_no}: {len(lost)} records lost, e.g. {sorted(lost)[:2]}")
        both = live & set(archived)
        if both:
            problems.append(f"round {round_no}: {len(both)} records both live and archived")
        dangling = {i for r, i, _ in archived.values() if r == "folded" and i not in present}
        if dangling:
            problems.append(f"round {round_no}: folded into missing records {sorted(dangling)[:2]}")
        if fold is not None:
            when, expected = fold
            applied = sum(1 for _, _, at in archived.values() if at == when)
            if expected:
                folds["applied" if applied else "not applied"] += 1
            if applied not in (0, expected):
                problems.append(
                    f"round {round_no}: fold half applied: {applied} of {expected} entries"
                )
        seen = present
    return {
        "kills": kills,
        "modes": modes,
        "interrupted_folds": folds,
        "acknowledged": acked_total,
        "live_and_archived": len(seen),
        "problems": problems,
        "seconds": time.perf_counter() - started,
        "ok": not problems,
    }


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["writer"]:
        writer(argv[1], int(argv[2]), int(argv[3]))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=2_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--fold-share", type=float, default=0.3, help="share of kills in folds")
    parser.add_argument("--store", type=Path, help="a new store file (default: a temp file)")
    parser.add_argument("--json", type=Path, help="write the report here")
    parser.add_argument("--quiet", action="store_true", help="accepted for symmetry")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="prime-memory-crash-") as folder:
        store = args.store or Path(folder) / "crash.db"
        report = run(store, args.kills, args.seed, args.fold_share)
    print(
        f"{report['kills']} kills ({report['modes']['store']} while storing, "
        f"{report['modes']['fold']} inside a fold; interrupted folds found "
        f"{report['interrupted_folds']}): {report['acknowledged']} acknowledged "
        f"writes, {report['live_and_archived']} records live or archived, "
        f"{len(report['problems'])} problems, {report['seconds']:.1f} s"
    )
    for line in report["problems"][:20]:
        print(f"  problem: {line}")
    print("check: OK" if report["ok"] else "check: FAILED")
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
