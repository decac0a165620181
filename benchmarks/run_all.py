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
import json
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

from _shared import REPO_ROOT

BENCHMARKS = REPO_ROOT / "benchmarks"
SECTIONS = (
    "structure", "vector", "mcp", "recall", "fold", "ingest", "soak", "warmth", "inspector",
    "tools",
    "postgres",
)  # fmt: skip

PROFILES: dict[str, dict[str, Any]] = {
    "full": {
        "structure": [1_000, 10_000, 100_000, 1_000_000],
        "structure_queries": 20,
        "structure_rounds": 5,
        "vector": [10_000, 100_000, 1_000_000],
        "vector_queries": 20,
        "vector_rounds": 5,
        "mcp": [1_000, 5_000, 20_000],
        "mcp_searches": 200,
        "mcp_cap": 600.0,
        "mcp_floor_calls": 2_000,
        "text_records": 100_000,
        "text_queries": 200,
        "fold": [10_000, 30_000, 100_000],
        "fold_scale": ["--sizes", "100000", "1000000"],
        "starts": 7,
        "imports": 9,
        "ingest": ["--records", "100000", "--single", "5000", "--vector-records", "20000"],
        "soak": ["--processes", "8", "--writes", "5000"],
        "crash_soak": ["--kills", "1000"],
        "http_load": ["--clients", "4", "--calls", "2000"],
        "warmth": ["--records", "20000", "--rounds", "300"],
        "inspector": ["--records", "100000", "--rounds", "30"],
        "postgres": ["--sizes", "10000", "100000", "1000000"],
    },
    "quick": {
        "structure": [1_000, 10_000, 100_000],
        "structure_queries": 8,
        "structure_rounds": 3,
        "vector": [10_000, 100_000],
        "vector_queries": 10,
        "vector_rounds": 3,
        "mcp": [1_000],
        "mcp_searches": 100,
        "mcp_cap": 60.0,
        "mcp_floor_calls": 300,
        "text_records": 10_000,
        "text_queries": 50,
        "fold": [2_000, 5_000],
        "fold_scale": ["--sizes", "2000", "20000"],
        "starts": 3,
        "imports": 5,
        "ingest": ["--records", "5000", "--single", "300", "--vector-records", "2000"],
        "soak": ["--processes", "2", "--writes", "50"],
        "crash_soak": ["--kills", "5"],
        "http_load": ["--clients", "4", "--calls", "100"],
        "warmth": ["--records", "5000", "--rounds", "100"],
        "inspector": ["--records", "10000", "--rounds", "10"],
        "postgres": ["--sizes", "1000", "10000", "--queries", "10", "--stores", "50"],
    },
    # For the test suite: everything tiny, nothing timed that matters.
    "smoke": {
        "structure": [300],
        "structure_queries": 2,
        "structure_rounds": 1,
        "vector": [300],
        "vector_queries": 3,
        "vector_rounds": 1,
        "mcp": [20],
        "mcp_searches": 5,
        "mcp_cap": 30.0,
        "mcp_floor_calls": 10,
        "text_records": 200,
        "text_queries": 5,
        "fold": [100, 200],
        "fold_scale": ["--sizes", "200", "2000", "--new", "50", "--skip-locomo"],
        "starts": 1,
        "imports": 1,
        "ingest": ["--records", "300", "--single", "20", "--vector-records", "50"],
        "soak": ["--processes", "2", "--writes", "10"],
        "crash_soak": ["--kills", "2"],
        "http_load": ["--clients", "2", "--calls", "10"],
        "warmth": ["--records", "300", "--rounds", "3"],
        "inspector": ["--records", "300", "--rounds", "2"],
        "postgres": ["--quick"],
    },
}


class Log:
    """Progress on stderr, stamped with the time since the run began."""

    def __init__(self, quiet: bool) -> None:
        self.quiet = quiet
        self.started = time.perf_counter()

    def __call__(self, message: str) -> None:
        if not self.quiet:
            elapsed = time.perf_counter() - self.started
            print(
                f"[{int(elapsed // 60):02d}:{elapsed % 60:04.1f}] {message}",
                file=sys.stderr,
                flush=True,
            )


def script(
    name: str, args: list[str], out: Path, env: dict[str, str] | None = None
) -> dict[str, Any]:
    """Run one benchmark script with ``--json``; its JSON, or why it failed."""
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / name), *args, "--json", str(out), "--quiet"],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        env=env,
    )
    if done.returncode != 0 or not out.is_file():
        tail = (done.stdout + done.stderr).strip().splitlines()[-15:]
        return {"failed": f"{name} exited with status {done.returncode}", "output": tail}
    return dict(json.loads(out.read_text()))


# -- sections -------------------------------------------------------------------------


def structure(p: dict[str, Any], tmp: Path, log: Log) -> dict[str, Any]:
    # Structural queries never rank text, so the stores skip embedding it.
    env = dict(os.environ, PRIME_MEMORY_EMBEDDER="none")
    runs = []
    for n in p["structure"]:
        log(f"structure: {n:,} records")
        queries = p["structure_queries"] if n < 1_000_000 else max(1, p["structure_queries"] // 2)
        args = [
            "--records",
            str(n),
            "--queries",
            str(queries),
            "--rounds",
            str(p["structure_rounds"]),
            *p["inject"],
        ]
        runs.append(
            {"records": n, **script("structure.py", args, tmp / f"structure-{n}.json", env)}
        )
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
    import anyio
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
    floor = anyio.run(mcp_latency.floor_round_trips, p["mcp_floor_calls"])
    result["sdk_floor"] = {
        "calls": len(floor),
        "p50": statistics.median(floor),
        "p99": mcp_peer.percentile(floor, 0.99),
    }
    return result


def text_latency(p: dict[str, Any], tmp: Path, log: Log) -> dict[str, Any]:
    """``text_query.py``: hybrid text query latency, embedding rate and peak memory."""
    n = p["text_records"]
    log(f"text query: {n:,} records (built-in embedder)")
    args = ["--records", str(n), "--queries", str(p["text_queries"]), "--embedder", "builtin"]
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
    out = tmp / "fold-scale.json"
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / "fold.py"), *p["fold_scale"], "--dir", str(tmp),
         "--json", str(out), "--quiet"],
        capture_output=True, text=True, cwd=REPO_ROOT,
    )  # fmt: skip
    if out.is_file():
        # Exit status 1 means a target was missed; the figures still count.
        scale = {**json.loads(out.read_text()), "targets_met": done.returncode == 0}
    else:
        tail = (done.stdout + done.stderr).strip().splitlines()[-15:]
        scale = {"failed": f"fold.py exited with status {done.returncode}", "output": tail}
    log("start-up: spawn to initialize reply")
    ours_cmd = [*mcp_latency.SERVER, "--store"]
    ours = [
        mcp_latency.time_to_initialize([*ours_cmd, str(tmp / f"s{i}.db")])
        for i in range(p["starts"])
    ]
    bare = [mcp_latency.time_to_initialize(mcp_latency.FLOOR_SERVER) for _ in range(p["starts"])]
    log("start-up: import time")
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")])
    )

    def timed(code: str) -> float:
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True, env=env)
        return time.perf_counter() - started

    imports = [timed("import prime_memory_folding") for _ in range(p["imports"])]
    bare_python = [timed("pass") for _ in range(p["imports"])]
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
            "ours": statistics.median(ours),
            "bare_sdk": statistics.median(bare),
            "runs": p["starts"],
        },
        "import": {
            "package": statistics.median(imports),
            "bare_python": statistics.median(bare_python),
            "runs": p["imports"],
        },
    }


def ingest(p: dict[str, Any], tmp: Path, log: Log) -> dict[str, Any]:
    log("ingest: store_many, single stores, vectors")
    return script("ingest.py", [*p["ingest"], "--dir", str(tmp)], tmp / "ingest.json")


def soak(p: dict[str, Any], tmp: Path, log: Log) -> dict[str, Any]:
    out = {}
    runs = (
        ("soak.py", p["soak"]),
        ("crash_soak.py", p["crash_soak"]),
        ("http_load.py", p["http_load"]),
    )
    for name, args in runs:
        log(f"soak: {name} {' '.join(args)}")
        started = time.perf_counter()
        out[name] = script(name, args, tmp / f"{name}.json")
        out[name]["args"] = " ".join(args)
        out[name]["wall_seconds"] = time.perf_counter() - started
    return out


def warmth(p: dict[str, Any], tmp: Path, log: Log) -> dict[str, Any]:
    log(f"warmth: {' '.join(p['warmth'])}")
    return script("warmth.py", [*p["warmth"], *p["inject"]], tmp / "warmth.json")


def inspector(p: dict[str, Any], tmp: Path, log: Log) -> dict[str, Any]:
    log(f"inspector: {' '.join(p['inspector'])}")
    return script("inspector.py", p["inspector"], tmp / "inspector.json")


def tools_list(p: dict[str, Any], tmp: Path, log: Log) -> dict[str, Any]:
    log("tools: the size of tools/list")
    return script("tools_list.py", [], tmp / "tools_list.json")


def postgres(p: dict[str, Any], tmp: Path, log: Log) -> dict[str, Any]:
    """``postgres.py``; not run (not a failed check) when no PostgreSQL server answers."""
    args = [*p["postgres"], *p["inject"], "--dir", str(tmp)]
    log(f"postgres: {' '.join(args)}")
    out = tmp / "postgres.json"
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / "postgres.py"), *args, "--json", str(out), "--quiet"],
        capture_output=True, text=True, cwd=REPO_ROOT,
    )  # fmt: skip
    if done.returncode == 2 and done.stdout.startswith("unavailable:"):
        return {"unavailable": done.stdout.strip().removeprefix("unavailable: ")}
    if done.returncode in (0, 1) and out.is_file():
        # Status 1 is a disagreement, which the JSON shows where it happened.
        return dict(json.loads(out.read_text()))
    tail = (done.stdout + done.stderr).strip().splitlines()[-15:]
    return {"failed": f"postgres.py exited with status {done.returncode}", "output": tail}


# -- the run --------------------------------------------------------------------------


def _has_matplotlib() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
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
    parser.add_argument("--quiet", action="store_true", help="no progress on stderr")
    parser.add_argument("--smoke", action="store_true", help=argparse.SUPPRESS)
    # For the test suite: a disagreement in every section that compares systems
    # (structure, vector, mcp, recall's text queries, warmth), and a local peer.
    parser.add_argument("--inject-mismatch", action="store_true", help=argparse.SUPPRESS)
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
    log = Log(args.quiet)
    results: dict[str, Any] = {
        "profile": profile_name,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": _report.machine(),
        "sections": {},
    }
    runners: dict[str, Callable[[dict[str, Any], Path, Log], dict[str, Any]]] = {
        "structure": structure,
        "vector": vector,
        "mcp": lambda p, tmp, log: mcp(
            p, tmp, log, skip_peer=args.no_peer, peer_command=args.peer_command
        ),
        "recall": lambda p, tmp, log: recall(p, tmp, log, with_locomo=not args.smoke),
        "fold": fold_and_startup,
        "ingest": ingest,
        "soak": soak,
        "warmth": warmth,
        "inspector": inspector,
        "tools": tools_list,
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
    results["machine"]["load_after"] = _report.load_average()
    results["machine"]["cpu_reference_ms_after"] = _report.cpu_reference_ms()
    results["targets"] = _report.targets(results)
    args.out.mkdir(parents=True, exist_ok=True)
    results["charts"] = _report.charts(
        results, [args.out, *([args.charts_dir] if args.charts_dir else [])]
    )
    (args.out / "results.json").write_text(json.dumps(results, indent=2, default=str) + "\n")
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
