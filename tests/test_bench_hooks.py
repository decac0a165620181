"""benchmarks/hooks.py runs end to end at tiny sizes, and its checks fail when they should.

Each run starts dozens of hook processes, so the tests are marked slow. The
threshold part reads the dev data sets beside the repository; without them it
is skipped.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "hooks.py"
DATASETS = ROOT.parent / "shared" / "datasets"
TINY = [
    "--sizes", "300", "--runs", "2", "--decisions-repos", "2", "--locomo-conversations", "2",
    "--locomo-questions", "5", "--longmemeval-questions", "6", "--negatives", "5",
]  # fmt: skip


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), "--quiet", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=300,
    )


def part() -> str:
    """Both parts when the dev data is here, else the latency part alone."""
    return "both" if DATASETS.is_dir() else "latency"


@pytest.mark.slow
def test_hooks_benchmark_agrees_and_reports(tmp_path: Path) -> None:
    out = tmp_path / "hooks.json"
    result = run(*TINY, "--part", part(), "--json", str(out), cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "check: OK - the planted memory injected" in result.stdout
    report = json.loads(out.read_text())
    assert report["ok"] is True
    row = report["latency"]["sizes"]["300"]
    assert row["records"] >= 300
    for name in ("prompt", "session-start", "floor"):
        assert 0 < row[name]["p50_s"] <= row[name]["p95_s"]
        assert row[name]["peak_rss_mib"] > 0
    if part() == "both":
        threshold = report["threshold"]
        assert set(threshold["workloads"]) == {"decisions", "locomo", "longmemeval"}
        assert len(threshold["workloads"]["locomo"]) == len(threshold["thresholds"])
        assert set(threshold["held_out"]) == {"decisions", "locomo", "longmemeval"}
        assert "held-out hit" in result.stdout


@pytest.mark.slow
def test_hooks_benchmark_fails_on_a_mismatch(tmp_path: Path) -> None:
    result = run(*TINY, "--part", part(), "--inject-mismatch", cwd=tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "check: FAILED (latency)" in result.stdout
    assert "planted memory was not injected" in result.stdout
    assert "p50 - floor" not in result.stdout
    if part() == "both":
        assert "check: FAILED (threshold)" in result.stdout
