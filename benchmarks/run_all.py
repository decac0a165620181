"""Run every benchmark and write ``report.md``, ``results.json`` and charts.

    python3 benchmarks/run_all.py --quick          # under 5 minutes
    python3 benchmarks/run_all.py                  # the full run, up to an hour
    python3 benchmarks/run_all.py --charts-dir docs/charts

Sections, each measured side by side in this one run:

1. structure: ``structure.py`` at each size (domain, tags and domain+tags
   queries: the engine, a naive scan, a modulo scan and SQLite SQL);
2. vector: ``vector_topk.py`` (the engine's exact top-10 against the numpy
   floor and sqlite-vec);
3. mcp: ``mcp_peer.py`` (this server against the reference memory server
   over stdio), and the SDK's own floor for a trivial tool;
4. recall: ``locomo_recall.py`` (BM25, dense and hybrid R@k on LoCoMo) and
   ``text_query.py`` (text query latency, embedding rate, peak memory);
5. fold: ``fold.py`` fold time and merge quality, server start-up
   (``mcp_latency.py``) and import time;
6. ingest: ``ingest.py``;
7. soak: ``soak.py`` (concurrent MCP writers), ``crash_soak.py`` (kill -9
   during stores and folds) and ``http_load.py`` (concurrent HTTP clients),
   for their checks only;
8. warmth: ``warmth.py`` (the same calls warm and after a 2 ms pause, which
   tells how much this machine's caches forget between calls);
9. inspector: ``inspector.py`` (server time per page of ``prime-memory ui``
   beside the engine calls each page makes);
10. tools: ``tools_list.py`` (the size of the stdio server's ``tools/list``
    answer, in bytes and tokens, which every agent session pays for).
11. postgres: ``postgres.py`` (the PostgreSQL store beside the SQLite store
    and plain SQL over the same tables; not run when no PostgreSQL server
    answers at ``PRIME_MEMORY_TEST_PG`` or the default address).

Every script checks that the systems it compares agree before it times them.
A check that fails anywhere (any size, any system, any script) is listed in the
report; its comparison is "not comparable" (no ratio, no PASS or MISS, no
timings or chart from it), and the run exits with status 1.
Results go to ``--out`` (default ``benchmarks/results/``, not committed);
charts go to ``--charts-dir`` too when given.
"""

from __future__ import annotations

import argparse
import datetime
import os
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import _harness as harness
from _shared import REPO_ROOT

BENCHMARKS = REPO_ROOT / "benchmarks"
SECTIONS = (
    "structure", "vector", "mcp", "recall", "fold", "ingest", "soak", "warmth", "inspector",
    "tools", "hooks",
    "postgres",
)  # fmt: skip

#: Each setting in the three profiles: (full, quick, smoke); the smoke profile, for the
#: test suite, runs everything tiny and times nothing that matters.
SETTINGS: dict[str, tuple[Any, Any, Any]] = {
    "structure": ([1_000, 10_000, 100_000, 1_000_000], [1_000, 10_000, 100_000], [300]),
    "structure_queries": (20, 8, 2),
    "structure_rounds": (5, 3, 1),
    "vector": ([10_000, 100_000, 1_000_000], [10_000, 100_000], [300]),
    "vector_queries": (20, 10, 3),
    "vector_rounds": (5, 3, 1),
    "mcp": ([1_000, 5_000, 20_000], [1_000], [20]),
    "mcp_searches": (200, 100, 5),
    "mcp_cap": (600.0, 60.0, 30.0),
    "mcp_floor_calls": (2_000, 300, 10),
    "text_records": (100_000, 10_000, 200),
    "text_queries": (200, 50, 5),
    "fold": ([10_000, 30_000, 100_000], [2_000, 5_000], [100, 200]),
    "fold_scale": ("--sizes 100000 1000000", "--sizes 2000 20000",
                   "--sizes 200 2000 --new 50 --skip-locomo"),
    "starts": (7, 3, 1),
    "imports": (9, 5, 1),
    "ingest": ("--records 100000 --single 5000 --vector-records 20000",
               "--records 5000 --single 300 --vector-records 2000",
               "--records 300 --single 20 --vector-records 50"),
    "soak": ("--processes 8 --writes 5000", "--processes 2 --writes 50",
             "--processes 2 --writes 10"),
    "crash_soak": ("--kills 1000", "--kills 5", "--kills 2"),
    "http_load": ("--clients 4 --calls 2000", "--clients 4 --calls 100", "--clients 2 --calls 10"),
    "warmth": ("--records 20000 --rounds 300", "--records 5000 --rounds 100",
               "--records 300 --rounds 3"),
    "inspector": ("--records 100000 --rounds 30", "--records 10000 --rounds 10",
                  "--records 300 --rounds 2"),
    "postgres": ("--sizes 10000 100000 1000000", "--sizes 1000 10000 --queries 10 --stores 50",
                 "--quick"),
    "tools": ("", "", ""),
    "hooks": ("", "--sizes 10000 --runs 10 --decisions-repos 3 --locomo-conversations 2 "
                  "--longmemeval-questions 20",
              "--part latency --sizes 300 --runs 2"),
}  # fmt: skip
PROFILES: dict[str, dict[str, Any]] = {
    name: {key: value.split() if isinstance(value, str) else value for key, value in (
        (key, values[i]) for key, values in SETTINGS.items()
    )}
    for i, name in enumerate(("full", "quick", "smoke"))
}  # fmt: skip
Log = harness.Log


def script(
    name: str, args: list[str], out: Path, env: dict[str, str] | None = None
) -> dict[str, Any]:
    """Run one benchmark script with ``--json``; its JSON, or why it failed."""
    return harness.run_script(name, args, out, env=env)[0]


# -- sections -------------------------------------------------------------------------


def structure(p: dict[str, Any], tmp: Path, log: Log) -> dict[str, Any]:
    # Structural queries never rank text, so the stores skip embedding it.
    env = dict(os.environ, PRIME_MEMORY_EMBEDDER="none")
    runs = []
    for n in p["structure"]:
        log(f"structure: {n:,} records")
        queries = p["structure_queries"] if n < 1_000_000 else max(1, p["structure_queries"] // 2)
        args = f"--records {n} --queries {queries} --rounds {p['structure_rounds']}".split()
        found = script("structure.py", [*args, *p["inject"]], tmp / f"structure-{n}.json", env)
        runs.append({"records": n, **found})
    return {"runs": runs}


def vector(p: dict[str, Any], tmp: Path, log: Log) -> dict[str, Any]:
    import vector_topk

    return vector_topk.run(
        p["vector"],
        queries=p["vector_queries"],
        rounds=p["vector_rounds"],
        log=log,
        inject_mismatch=bool(p["inject"]),
    )


def mcp(
    p: dict[str, Any],
    tmp: Path,
    log: Log,
    skip_peer: bool = False,
    peer_command: list[str] | None = None,
) -> dict[str, Any]:
    import mcp_latency
    import mcp_peer

    result = mcp_peer.run(
        p["mcp"],
        searches=p["mcp_searches"],
        cap=p["mcp_cap"],
        with_peer=not skip_peer,
        peer_command=peer_command,
        log=log,
        inject_mismatch=bool(p["inject"]),
    )
    log(f"mcp: SDK floor, {p['mcp_floor_calls']:,} trivial calls")
    floor = mcp_latency.round_trips(
        mcp_latency.FLOOR_SERVER, "echo", mcp_latency.echo_arguments, p["mcp_floor_calls"], sdk=True
    )
    result["sdk_floor"] = {
        "calls": len(floor),
        "p50": statistics.median(floor),
        "p99": harness.percentile(floor, 0.99),
    }
    return result


def text_latency(p: dict[str, Any], tmp: Path, log: Log) -> dict[str, Any]:
    """``text_query.py``: hybrid text query latency, embedding rate and peak memory."""
    n = p["text_records"]
    log(f"text query: {n:,} records (built-in embedder)")
    args = f"--records {n} --queries {p['text_queries']} --embedder builtin".split()
    found = script("text_query.py", [*args, *p["inject"]], tmp / "text_query.json")
    if "failed" in found:
        return found
    return {
        "records": found["records"],
        "queries": found["queries"],
        "embedder": found["embedder"],
        "store_rate": found["store_rate"],
        "p50": found["no gate"]["p50_s"],
        "p95": found["no gate"]["p95_s"],
        "gated_p50": found["domain gate"]["p50_s"],
        "max_rss_mb": found["max_rss_mb"],
    }


def recall(p: dict[str, Any], tmp: Path, log: Log, with_locomo: bool = True) -> dict[str, Any]:
    result: dict[str, Any] = {"text_latency": text_latency(p, tmp, log)}
    if with_locomo:
        import locomo_recall

        if not locomo_recall.DEFAULT_DATA.is_file():
            # Data this run may not have, not a failed check.
            result["locomo"] = {"unavailable": f"no LoCoMo data at {locomo_recall.DEFAULT_DATA}"}
        else:
            log("recall: LoCoMo (BM25, dense, hybrid)")
            result["locomo"] = script("locomo_recall.py", ["--no-st"], tmp / "locomo.json")
    return result


def fold_and_startup(p: dict[str, Any], tmp: Path, log: Log) -> dict[str, Any]:
    import fold
    import mcp_latency

    times = []
    for n in p["fold"]:
        log(f"fold: {n:,} records")
        folder = tmp / f"fold-{n}"
        folder.mkdir()
        seconds, report = fold.time_fold(n, 7, folder)
        times.append({"records": n, "seconds": seconds, "after": report.records_after})
    log("fold: merge quality")
    (tmp / "quality").mkdir()
    precision, recall_, predicted, truth = fold.merge_quality(7, tmp / "quality")
    log("fold: agreement, scale and incremental folds (fold.py)")
    args = [*p["fold_scale"], "--dir", str(tmp)]
    # Exit status 1 means a target was missed; the figures still count.
    scale, done = harness.run_script("fold.py", args, tmp / "fold-scale.json", accept=(0, 1))
    if "failed" not in scale:
        scale["targets_met"] = done.returncode == 0
    log("start-up: spawn to initialize reply, the two servers in turns")
    started = mcp_latency.startups(tmp, p["starts"])
    log("start-up: import time")
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")])
    )

    def python(code: str) -> Callable[[], float]:
        command = [sys.executable, "-c", code]
        return lambda: harness.timed(subprocess.run, command, check=True, env=env)[0]

    imports = harness.in_turns(
        {"package": python("import prime_memory_folding"), "bare_python": python("pass")},
        p["imports"],
    )
    return {
        "fold": times,
        "fold_scale": scale,
        "merge_quality": {
            "precision": precision,
            "recall": recall_,
            "pairs": predicted,
            "true_pairs": truth,
        },
        "startup": {
            "ours": statistics.median(started[mcp_latency.OURS]),
            "bare_sdk": statistics.median(started[mcp_latency.BARE]),
            "runs": p["starts"],
        },
        "import": {
            **{name: statistics.median(seconds) for name, seconds in imports.items()},
            "runs": p["imports"],
        },
    }


def soak(p: dict[str, Any], tmp: Path, log: Log) -> dict[str, Any]:
    out = {}
    runs = (
        ("soak.py", p["soak"]),
        ("crash_soak.py", p["crash_soak"]),
        ("http_load.py", p["http_load"]),
    )
    for name, args in runs:
        log(f"soak: {name} {' '.join(args)}")
        seconds, out[name] = harness.timed(script, name, args, tmp / f"{name}.json")
        out[name].update(args=" ".join(args), wall_seconds=seconds)
    return out


Section = Callable[[dict[str, Any], Path, Log], dict[str, Any]]


def scripted(section: str, name: str, *, inject: bool = False, folder: bool = False) -> Section:
    """A section that runs one script with its profile's arguments (and ``--inject-mismatch``
    when the run has it, and ``--dir`` for its stores, when asked)."""

    def run(p: dict[str, Any], tmp: Path, log: Log) -> dict[str, Any]:
        args = [*p[section], *(p["inject"] if inject else []), *(["--dir", str(tmp)] * folder)]
        log(f"{section}: {name} {' '.join(args)}")
        return script(name, args, tmp / f"{section}.json")

    return run


def postgres(p: dict[str, Any], tmp: Path, log: Log) -> dict[str, Any]:
    """``postgres.py``; not run (not a failed check) when no PostgreSQL server answers."""
    args = [*p["postgres"], *p["inject"], "--dir", str(tmp)]
    log(f"postgres: {' '.join(args)}")
    # Status 1 is a disagreement, which the JSON shows where it happened.
    found, done = harness.run_script("postgres.py", args, tmp / "postgres.json", accept=(0, 1))
    if done.returncode == 2 and done.stdout.startswith("unavailable:"):
        return {"unavailable": done.stdout.strip().removeprefix("unavailable: ")}
    return found


# -- the run --------------------------------------------------------------------------


def _has_matplotlib() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    # --inject-mismatch: a disagreement in every section that compares systems
    parser = harness.parser(__doc__, inject=True, json=False)
    parser.add_argument("--quick", action="store_true", help="smaller sizes; under 5 minutes")
    parser.add_argument("--out", type=Path, default=BENCHMARKS / "results", help="results folder")
    parser.add_argument(
        "--charts-dir", type=Path, help="also write the charts here (e.g. docs/charts)"
    )
    parser.add_argument(
        "--skip", nargs="+", choices=SECTIONS, default=[], help="sections to leave out"
    )
    parser.add_argument(
        "--no-peer", action="store_true", help="no reference server (no Node needed)"
    )
    parser.add_argument(
        "--mcp-cap", type=float, help="seconds per MCP system and phase before it is stopped"
    )
    # For the test suite: tiny sizes, and a local peer.
    parser.add_argument("--smoke", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--peer-command", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.charts_dir is not None and not _has_matplotlib():
        # Say so now, not after an hour of benchmarks.
        parser.error(
            "--charts-dir needs matplotlib, which is not installed; "
            "install the bench extra: pip install -e '.[bench]'"
        )
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    import _report

    profile_name = "smoke" if args.smoke else "quick" if args.quick else "full"
    p = dict(PROFILES[profile_name])
    p["inject"] = ["--inject-mismatch"] if args.inject_mismatch else []
    if args.mcp_cap is not None:
        p["mcp_cap"] = args.mcp_cap
    log = Log(args.quiet, stamped=True)
    results: dict[str, Any] = {
        "profile": profile_name,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": _report.machine(),
        "sections": {},
    }
    runners: dict[str, Section] = {
        "structure": structure,
        "vector": vector,
        "mcp": lambda p, tmp, log: mcp(
            p, tmp, log, skip_peer=args.no_peer, peer_command=args.peer_command
        ),
        "recall": lambda p, tmp, log: recall(p, tmp, log, with_locomo=not args.smoke),
        "fold": fold_and_startup,
        "ingest": scripted("ingest", "ingest.py", folder=True),
        "soak": soak,
        "warmth": scripted("warmth", "warmth.py", inject=True),
        "inspector": scripted("inspector", "inspector.py"),
        "tools": scripted("tools", "tools_list.py"),
        "hooks": scripted("hooks", "hooks.py"),
        "postgres": postgres,
    }
    chosen = [s for s in SECTIONS if s not in args.skip]
    started = time.perf_counter()
    for number, name in enumerate(chosen, 1):
        log(f"section {number}/{len(chosen)}: {name}")
        with tempfile.TemporaryDirectory(prefix=f"pmf-all-{name}-") as tmp:
            try:
                results["sections"][name] = runners[name](p, Path(tmp), log)
            except Exception as exc:  # one broken section must not lose the others
                results["sections"][name] = {
                    "failed": f"{type(exc).__name__}: {exc}",
                    "output": traceback.format_exc().splitlines()[-8:],
                }
    results["seconds"] = time.perf_counter() - started
    results["machine"].update({f"{k}_after": v for k, v in harness.conditions().items()})
    results["targets"] = _report.targets(results)
    args.out.mkdir(parents=True, exist_ok=True)
    results["charts"] = _report.charts(
        results, [args.out, *([args.charts_dir] if args.charts_dir else [])]
    )
    harness.write_json(args.out / "results.json", results)
    (args.out / "report.md").write_text(_report.markdown(results))
    if results.get("charts_skipped"):
        print(f"no charts: {results['charts_skipped']}", file=sys.stderr)  # even with --quiet
    log(f"done in {results['seconds']:.0f} s: {args.out / 'report.md'}")
    failed = _report.disagreements(results)
    if failed:
        print("failed checks (not comparable; see the report):", file=sys.stderr)
        for problem in failed:
            print(f"  {problem}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
