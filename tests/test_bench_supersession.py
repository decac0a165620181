"""benchmarks/supersession.py runs end to end on a few pairs and reports what it measured."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "datasets" / "longmemeval" / "longmemeval-s-dev.json"


def test_the_cases_file_is_well_formed() -> None:
    cases = json.loads((ROOT / "benchmarks" / "supersession_cases.json").read_text())["cases"]
    assert len({c["id"] for c in cases}) == len(cases)
    for case in cases:
        assert {"id", "project", "kind", "changes", "split", "old", "new", "source"} <= set(case)
        assert case["split"] in ("design", "held-out")
        assert case["old"] != case["new"] and case["source"]
    changing = [c for c in cases if c["changes"]]
    assert {c["kind"] for c in changing} == {
        "version bump",
        "rename",
        "reversed decision",
        "number",
    }
    assert len(changing) >= 40 and len(cases) - len(changing) >= 40


def test_the_supersession_benchmark_measures_pairs_an_engine_and_longmemeval(
    tmp_path: Path,
) -> None:
    out = tmp_path / "supersession.json"
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "supersession.py"), "--quiet",
         "--pairs", "6", "--lme-questions", "1", "--data", str(DATA), "--json", str(out)],
        capture_output=True, text=True, cwd=tmp_path, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(out.read_text())
    pairs = report["pairs"]["splits"]["all"]
    assert pairs["changing"] == 6 and pairs["unchanging"] == 6
    assert pairs["detected"] >= 5 and pairs["false_alarms"] == 0
    engine = report["engine"]
    assert engine["changing"] == 6 and engine["detected"] >= 5
    assert "precision" in done.stdout and "in an engine" in done.stdout
    if DATA.is_file():
        lme = report["longmemeval"]
        assert lme["questions"] == 1
        assert set(lme["plain"]) >= {"current_first", "stale_first", "closed"}
        assert "knowledge-update" in done.stdout
    else:
        assert report["longmemeval"] is None
