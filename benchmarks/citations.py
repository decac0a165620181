"""Citation checks: what checking a query's cited code costs, cold and warm.

In a temporary git repository of ``--files`` Python files of 200 lines, it
stores ``--records`` memories; ``--hits`` of them (10 by default) share a
word no other holds, and each cites ``--cites`` line ranges (3 by default) in
different files. A text query for that word returns exactly those hits. The
same query runs on two engines over the same store: one checks citations (the
default), one does not (``check_citations=False``), taking turns. Cold: the
first query of a new engine, whose file cache is empty (the operating
system's page cache is warm, as on a developer's machine). Warm: the query
repeated on the same engine. Target: the checks add at most 10 ms to the
warm query.

Before timing, it checks that both engines return the same hits in the same
order and that every citation reads ``verified``; otherwise it exits with
status 1 and reports no times.

Run from the repository root::

    python3 benchmarks/citations.py
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import _harness as harness

from prime_memory_folding import MemoryEngine

WORD = "zebracrossing"
#: The target: the checks' cost on a warm 10-hit query.
TARGET_S = 0.010


def make_repo(folder: Path, files: int) -> None:
    folder.mkdir(parents=True)
    for n in range(files):
        lines = [f"def function_{n}_{i}(value):\n    return value + {i}\n" for i in range(100)]
        (folder / f"module_{n}.py").write_text("".join(lines), encoding="utf-8")
    for args in (
        ["init", "-q"],
        ["add", "."],
        ["-c", "user.email=bench@example.com", "-c", "user.name=bench", "commit", "-qm", "code"],
    ):
        subprocess.run(["git", *args], cwd=folder, check=True)


def fill(store: Path, repo: Path, args: Any) -> None:
    with MemoryEngine(store, scope="global", embedder="none") as engine:
        engine.store_many(
            {"content": f"note {n} about module {n % args.files} and its helpers"}
            for n in range(args.records - args.hits)
        )
        for n in range(args.hits):
            cites = [
                {"path": f"module_{(n + k) % args.files}.py", "lines": f"{10 * k + 1}-{10 * k + 6}"}
                for k in range(args.cites)
            ]
            engine.store(f"{WORD} note {n}: where the helpers live", cites=cites, repo=repo)


def ask(engine: MemoryEngine, hits: int) -> tuple[float, list[Any]]:
    started = time.perf_counter()
    found = engine.query(WORD, limit=hits)
    return time.perf_counter() - started, found


def main(argv: list[str] | None = None) -> int:
    parser = harness.parser(
        __doc__ or "",
        records=(10_000, "memories in the store"),
        hits=(10, "memories the query returns, each with citations"),
        cites=(3, "citations of each such memory"),
        files=(30, "files in the repository"),
        rounds=(30, "timed rounds of each kind"),
    )
    args = parser.parse_args(argv)
    log = harness.Log(args.quiet)
    report: dict[str, Any] = {"conditions": harness.conditions(), **vars(args)}
    report.pop("json", None)
    with tempfile.TemporaryDirectory(prefix="pmf-cite-") as tmp:
        repo, store = Path(tmp) / "repo", Path(tmp) / "memory.db"
        make_repo(repo, args.files)
        log(f"storing {args.records:,} memories, {args.hits} with {args.cites} citations each")
        fill(store, repo, args)

        def engine(check: bool) -> MemoryEngine:
            return MemoryEngine(store, scope="global", embedder="none", check_citations=check)

        with engine(True) as checked, engine(False) as plain:
            _, with_checks = ask(checked, args.hits)
            _, without = ask(plain, args.hits)
            problems: list[str] = []
            if [h.record.record_id for h in with_checks] != [h.record.record_id for h in without]:
                problems.append("the engines with and without checks return other hits")
            if len(with_checks) != args.hits:
                problems.append(f"the query returned {len(with_checks)} hits, not {args.hits}")
            states = {c.state for h in with_checks for c in h.citations}
            if states != {"verified"}:
                problems.append(f"citations read {sorted(states)}, not all verified")
            report["ok"] = not problems
            if problems:
                return harness.conclude(report, args.json, problems)
            samples: dict[str, list[float]] = {"warm on": [], "warm off": []}
            for _ in range(args.rounds):
                samples["warm on"].append(ask(checked, args.hits)[0])
                samples["warm off"].append(ask(plain, args.hits)[0])
        cold: dict[str, list[float]] = {"cold on": [], "cold off": []}
        for _ in range(max(3, args.rounds // 3)):
            for check, name in ((True, "cold on"), (False, "cold off")):
                with engine(check) as fresh:
                    cold[name].append(ask(fresh, args.hits)[0])
        samples.update(cold)
    p50 = {name: statistics.median(values) for name, values in samples.items()}
    added = {kind: p50[f"{kind} on"] - p50[f"{kind} off"] for kind in ("warm", "cold")}
    report["p50_seconds"] = p50
    report["added_seconds"] = added
    report["pass"] = added["warm"] <= TARGET_S
    rows = [
        [kind, harness.fmt_ms(p50[f"{kind} on"]), harness.fmt_ms(p50[f"{kind} off"]),
         f"{added[kind] * 1000:+.2f} ms"]
        for kind in ("warm", "cold")
    ]  # fmt: skip
    print(
        f"citation checks: {args.records:,} records, a query of {args.hits} hits with "
        f"{args.cites} citations each ({args.hits * args.cites} checks); "
        f"{harness.conditions_line(report['conditions'])}"
    )
    print(harness.text_table(["query", "checks on", "checks off", "added"], rows))
    print(
        f"warm: the checks add {added['warm'] * 1000:.2f} ms, target <= "
        f"{TARGET_S * 1000:.0f} ms: {harness.verdict(bool(report['pass']))}"
    )
    return harness.conclude(report, args.json)


if __name__ == "__main__":
    sys.exit(main())
