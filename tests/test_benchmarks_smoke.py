"""The benchmark scripts run end to end at tiny sizes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def run(script: str, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(BENCHMARKS / script), "--quiet", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=120,
    )


def test_structure_benchmark_agrees_and_reports(tmp_path: Path) -> None:
    out = tmp_path / "structure.json"
    result = run(
        "structure.py", "--records", "2000", "--queries", "5", "--rounds", "1",
        "--json", str(out), cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert "agreement: OK - all 4 systems returned identical id sets" in result.stdout
    assert "tags (2)" in result.stdout
    report = json.loads(out.read_text())
    assert report["agreement"] is True
    assert set(report["kinds"]) == {"domain", "tags (2)", "tags (3)", "domain+tags (2)"}
    assert all(query["hits"] > 0 for query in report["queries"])
    assert "where the engine's time goes" in result.stdout
    parts = report["parts_median_seconds"]
    assert set(parts) == set(report["kinds"])
    for row in parts.values():
        assert set(row) == {"engine", "index alone", "coherence check", "sqlite sql"}
        assert all(seconds > 0 for seconds in row.values())


def test_structure_benchmark_fails_when_a_system_disagrees(tmp_path: Path) -> None:
    result = run(
        "structure.py", "--records", "500", "--queries", "2", "--inject-mismatch", cwd=tmp_path
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert "agreement: FAILED" in result.stdout
    assert "modulo scan disagrees with engine" in result.stdout
    assert "median time per query" not in result.stdout


def test_ingest_benchmark_stores_everything_and_reports(tmp_path: Path) -> None:
    out = tmp_path / "ingest.json"
    result = run(
        "ingest.py", "--records", "2000", "--single", "50", "--vector-records", "200",
        "--dir", str(tmp_path), "--json", str(out), cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert "check: OK" in result.stdout
    assert "records/s" in result.stdout
    report = json.loads(out.read_text())
    assert report["bulk"]["records"] == 2000
    assert report["single"]["calls"] == 50
    # 200 untimed stores count the pages a store writes before the single stores,
    # and 200 more after them; the floor writes as many as the first count.
    assert "opening the store of 2,450 records" in result.stdout
    floor = report["commit_floor"]
    assert report["single"]["pages_per_store"] >= 1
    assert floor["pages_per_commit"] == round(report["single"]["pages_per_store"])
    assert "single store / bare commit of as many pages" in result.stdout
    assert report["single"]["pages_per_store_after"] >= 1
    sql_floor = report["sql_floor"]
    assert sql_floor["pages_per_commit"] >= 1 and sql_floor["per_second"] > 0
    assert "the same rows inserted with plain SQL" in result.stdout
    assert report["open_seconds"] > 0 and report["vectors"]["open_seconds"] > 0


def test_run_all_writes_a_report_at_tiny_sizes(tmp_path: Path) -> None:
    out = tmp_path / "results"
    result = subprocess.run(
        [
            sys.executable, str(BENCHMARKS / "run_all.py"), "--smoke", "--quiet",
            "--skip", "mcp", "fold", "ingest", "soak", "--out", str(out),
        ],
        capture_output=True, text=True, cwd=tmp_path, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    report = (out / "report.md").read_text()
    assert "## Targets" in report
    assert "## 1. Structural queries" in report
    assert "Where the engine's time goes" in report
    assert "## 2. Exact vector top-10" in report
    assert "## 8. Warm and cold calls" in report
    results = json.loads((out / "results.json").read_text())
    assert set(results["sections"]) == {"structure", "vector", "recall", "warmth"}
    assert results["sections"]["vector"]["sizes"][0]["agreement"] is True
    assert {t["target"] for t in results["targets"]} >= {
        "tag intersection >= 10x faster than SQLite SQL",
        "exact vector top-10 <= 1.5x the numpy floor",
    }
    if results.get("charts_skipped"):
        assert "None: matplotlib is not installed" in report
        assert "no charts: matplotlib is not installed" in result.stderr
    else:
        assert results["charts"] and all(Path(c).is_file() for c in results["charts"])
        assert "## Charts" in report


def without_matplotlib(tmp_path: Path) -> dict[str, str]:
    """An environment in which ``import matplotlib`` fails, installed or not."""
    fake = tmp_path / "no-matplotlib" / "matplotlib"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('matplotlib hidden for this test')\n")
    return {**os.environ, "PYTHONPATH": str(fake.parent)}


def test_run_all_refuses_a_charts_folder_without_matplotlib_before_running(
    tmp_path: Path,
) -> None:
    charts = tmp_path / "charts"
    result = subprocess.run(
        [
            sys.executable, str(BENCHMARKS / "run_all.py"), "--smoke", "--quiet",
            "--charts-dir", str(charts), "--out", str(tmp_path / "results"),
        ],
        capture_output=True, text=True, cwd=tmp_path, timeout=60,
        env=without_matplotlib(tmp_path),
    )  # fmt: skip
    assert result.returncode == 2
    assert "--charts-dir needs matplotlib" in result.stderr
    assert "pip install -e '.[bench]'" in result.stderr
    assert not (tmp_path / "results").exists() and not charts.exists()


def test_fold_benchmark_checks_agreement_and_folds_at_two_sizes(tmp_path: Path) -> None:
    result = run(
        "fold.py", "--sizes", "200", "2000", "--new", "50", "--skip-locomo", cwd=tmp_path,
    )  # fmt: skip
    out = result.stdout
    assert result.returncode in (0, 1), out + result.stderr
    assert result.returncode == (1 if "MISS" in out else 0), out
    assert out.startswith("start: load average ")
    # Agreement is deterministic, unlike the timings on a shared machine.
    assert "candidate search:  pair precision 1.000, recall 0.998 (1.000 of exhaustive's)" in out
    assert "same records archived: yes  PASS" in out
    assert "incremental fold after new stores == full fold: yes  PASS" in out
    for layout in ("one-domain", "three-domains", "no-duplicates"):
        assert f"  {layout}:" in out
    assert out.count("same records archived and merged: yes  PASS") == 3
    assert out.count("growth 200 -> 2,000: ") == 3
    assert "read " in out and "decay+prune " in out and "candidate search " in out
    assert "exact checks " in out and "write " in out
    assert "incremental fold == full fold of the same store: yes  PASS" in out
    assert "nothing new: " in out and "after 50 new: " in out
    assert "end: load average " in out


def test_warmth_benchmark_checks_answers_and_reports(tmp_path: Path) -> None:
    out = tmp_path / "warmth.json"
    result = run("warmth.py", "--records", "300", "--rounds", "2", "--json", str(out), cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "agreement: OK" in result.stdout
    report = json.loads(out.read_text())
    medians = report["median_seconds"]
    assert "engine tag query (3 tags)" in medians and "sqlite sql, the same query" in medians
    for by_mode in medians.values():
        assert set(by_mode) == {"warm", "after a 2 ms spin", "after a 2 ms sleep"}
        assert all(seconds > 0 for seconds in by_mode.values())
