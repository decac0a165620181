"""benchmarks/citations.py runs end to end at a tiny size and reports what it measured."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_citation_benchmark_checks_both_engines_agree_and_reports(tmp_path: Path) -> None:
    out = tmp_path / "citations.json"
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "citations.py"), "--quiet",
         "--records", "200", "--files", "5", "--rounds", "2", "--json", str(out)],
        capture_output=True, text=True, cwd=tmp_path, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(out.read_text())
    assert report["ok"] is True
    assert set(report["p50_seconds"]) == {"warm on", "warm off", "cold on", "cold off"}
    assert "check: OK" in done.stdout and "warm: the checks add" in done.stdout
