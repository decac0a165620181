"""The benchmark scripts run end to end at tiny sizes.

Each run is a subprocess of a second or more, so those tests are marked slow
(``python3 -m pytest -m slow``); the default run keeps the checks made in
process and the scripts' refusals, which exit at once.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests import pg_helpers
from tests.conftest import skip_unless_ci

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def run(script: str, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(BENCHMARKS / script), "--quiet", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=120,
    )


@pytest.fixture
def pg_server() -> str:
    """The test PostgreSQL server's URL; the benchmarks make and drop their own databases."""
    reason = pg_helpers.unavailable()
    if reason is not None:
        skip_unless_ci(reason)
    return pg_helpers.server_url()


def bench_databases(server: str, prefix: str) -> set[str]:
    """The scratch databases whose names start with ``prefix``: one test's own, since
    the tests run on two workers and another benchmark's may come and go meanwhile."""
    import psycopg

    pattern = prefix.replace("_", "\\_") + "%"
    with psycopg.connect(server, autocommit=True) as conn:
        rows = conn.execute("SELECT datname FROM pg_database WHERE datname LIKE %s", (pattern,))
        return {row[0] for row in rows}


@pytest.mark.slow
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
    assert "scope gate: 2,000 records over 50 scopes" in result.stdout
    assert "every answer equals a set computation over (scope, domain, tags)" in result.stdout
    gate = report["scope_gate"]
    assert (gate["records"], gate["scopes"], gate["agreement"]) == (2000, 50, True)
    assert len(gate["visible"]) == 3 and gate["current"] in gate["visible"]
    assert set(gate["kinds"]) == {"tags (2)", "domain+tags (2)"}
    for row in gate["kinds"].values():
        assert row["queries"] >= 1
        medians = row["median_seconds"]
        assert set(medians) == {"ungated", "visible (3)", "one scope"}
        assert all(seconds > 0 for seconds in medians.values())
        ratios = row["ratio_vs_ungated"]
        assert ratios["ungated"] == 1.0
        for name in ("visible (3)", "one scope"):
            assert ratios[name] == medians[name] / medians["ungated"]
            assert f"({ratios[name]:.2f}x)" in result.stdout
        # Queries come from the current scope; it is within the visible ones, within all.
        hits = row["mean_hits"]
        assert 1 <= hits["one scope"] <= hits["visible (3)"] <= hits["ungated"]


@pytest.mark.slow
def test_structure_benchmark_fails_when_the_scope_gate_disagrees(tmp_path: Path) -> None:
    result = run(
        "structure.py", "--records", "500", "--queries", "2", "--rounds", "1",
        "--inject-scope-mismatch", cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 1, result.stdout + result.stderr
    assert "scope gate agreement: FAILED" in result.stdout
    assert "visible (3) disagrees with the set computation" in result.stdout
    assert "gated median / ungated median" not in result.stdout


@pytest.mark.slow
def test_structure_benchmark_can_skip_the_scope_gate(tmp_path: Path) -> None:
    out = tmp_path / "structure.json"
    result = run(
        "structure.py", "--records", "300", "--queries", "1", "--rounds", "1",
        "--scope-records", "0", "--json", str(out), cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert "scope gate" not in result.stdout
    assert json.loads(out.read_text())["scope_gate"] is None


@pytest.mark.slow
def test_structure_benchmark_fails_when_a_system_disagrees(tmp_path: Path) -> None:
    result = run(
        "structure.py", "--records", "500", "--queries", "2", "--inject-mismatch", cwd=tmp_path
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert "agreement: FAILED" in result.stdout
    assert "modulo scan disagrees with engine" in result.stdout
    assert "median time per query" not in result.stdout


@pytest.mark.slow
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


@pytest.mark.slow
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
    assert set(results["sections"]) == {
        "structure", "vector", "recall", "warmth", "inspector", "tools", "hooks", "postgres",
    }  # fmt: skip
    postgres = results["sections"]["postgres"]
    assert "unavailable" in postgres or [r["agreement"] for r in postgres["sizes"]] == [True, True]
    assert "## 12. PostgreSQL beside SQLite and plain SQL" in report
    assert "## 11. Hook processes" in report
    assert "## 9. The inspector's pages" in report
    assert "## 10. The size of `tools/list`" in report
    assert results["sections"]["vector"]["sizes"][0]["agreement"] is True
    assert {t["target"] for t in results["targets"]} >= {
        "tag intersection >= 10x faster than SQLite SQL",
        "exact vector top-10 <= 1.5x the numpy floor",
        "MCP tools/list < 2,000 tokens",
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


@pytest.mark.slow
def test_fold_benchmark_checks_agreement_and_folds_at_two_sizes(tmp_path: Path) -> None:
    result = run(
        "fold.py", "--sizes", "200", "2000", "--new", "50", "--skip-locomo",
        "--shared-sizes", "300", "3000", cwd=tmp_path,
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
    # The widely-shared-words layouts, on both backends: the candidate search
    # finds what the exhaustive screen finds.
    agreed = "recall 1.0000, 0 extra, same records archived: yes  PASS"
    assert out.count(agreed) == 6, out
    assert out.count("a full fold after it merges 0 more  PASS") == 6
    # Two incremental folds at each size of each layout: the first, and the next.
    assert out.count("then the first incremental fold ") == 12
    assert out.count("then the next incremental fold ") == 12
    assert out.count("the read floor (plain SQL reading every record's text and vector: ") == 6
    # Every full fold there is the median of three: copies of the store as built.
    assert out.count(" full fold (median of 3: ") == 12
    assert "end: load average " in out


@pytest.mark.slow
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


# -- every comparison is checked, and a failed check fails the run ------------------

STAND_IN_PEER = [sys.executable, str(Path(__file__).with_name("memory_graph_server.py"))]


@pytest.mark.slow
def test_run_all_fails_and_judges_nothing_when_every_section_disagrees(tmp_path: Path) -> None:
    out = tmp_path / "results"
    result = subprocess.run(
        [
            sys.executable, str(BENCHMARKS / "run_all.py"), "--smoke", "--quiet",
            "--skip", "fold", "ingest", "soak", "inspector", "tools", "hooks", "postgres",
            "--out", str(out),
            "--inject-mismatch", "--peer-command", *STAND_IN_PEER,
        ],
        capture_output=True, text=True, cwd=tmp_path, timeout=300,
    )  # fmt: skip
    assert result.returncode == 1, result.stdout + result.stderr
    results = json.loads((out / "results.json").read_text())
    sections = results["sections"]
    assert set(sections) == {"structure", "vector", "mcp", "recall", "warmth"}
    # Each section's disagreement is found where it happened, and fails the run.
    failed = result.stderr.split("failed checks", 1)[1]
    for where in (
        "structure: runs, 300 records: structure.py exited with status 1",
        "vector: sizes, 300 records: the systems compared disagree",
        "mcp: sizes, 20 records: the systems compared disagree",
        "recall: text_latency: text_query.py exited with status 1",
        "warmth: warmth.py exited with status 1",
    ):
        assert where in failed
    # No ratio and no verdict from a comparison that disagreed.
    assert [row["agreement"] for row in sections["mcp"]["sizes"]] == [False]
    assert "store_throughput_ratio" not in sections["mcp"]["sizes"][0]
    assert sections["mcp"]["peer"].endswith("(given with --peer-command)")
    assert "ratio_vs_floor" not in sections["vector"]["sizes"][0]
    assert {t["target"] for t in results["targets"]} == {
        "tag intersection >= 10x faster than SQLite SQL",
        "exact vector top-10 <= 1.5x the numpy floor",
        "MCP store p50 <= 2 ms",
        "text query p50 <= 15 ms",
        "resident memory <= 400 MB",
        ">= 10x the reference memory server's store throughput",
    }
    for target in results["targets"]:
        assert (target["comparable"], target["pass"], target["measured"]) == (False, None, None)
    report = (out / "report.md").read_text()
    assert "## Failed checks" in report
    assert "PASS" not in report and "MISS" not in report
    assert report.count("**not comparable**") == 6
    assert "store throughput, ours / reference" not in report
    assert not results["charts"]


def test_run_all_fails_on_one_size_that_disagrees_among_agreeing_ones() -> None:
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import _report
    finally:
        sys.path.remove(str(BENCHMARKS))
    good = {"records": 300, "agreement": True, "ratio_vs_floor": {"engine": 1.2}}
    results = {"sections": {"vector": {"sizes": [good, {"records": 1000, "agreement": False}]}}}
    assert _report.disagreements(results) == [
        "vector: sizes, 1,000 records: the systems compared disagree"
    ]
    [target] = _report.targets(results)
    assert (target["comparable"], target["pass"], target["measured"]) == (False, None, None)
    results["sections"]["vector"]["sizes"].pop()
    [target] = _report.targets(results)
    assert (target["comparable"], target["pass"], target["measured"]) == (True, True, "1.20x")


# -- what each benchmark compares -------------------------------------------------------


@pytest.mark.slow
def test_vector_benchmark_rejects_the_right_ids_in_the_wrong_order(tmp_path: Path) -> None:
    result = run(
        "vector_topk.py", "--sizes", "300", "--queries", "2", "--rounds", "1", "--inject-mismatch",
        cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 1, result.stdout + result.stderr
    assert "agreement FAILED" in result.stdout
    assert "engine disagrees on query 0 at place 1" in result.stdout
    assert "target:" not in result.stdout


def test_vector_agreement_allows_tied_ids_to_swap_and_nothing_else() -> None:
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import numpy as np
        import vector_topk
    finally:
        sys.path.remove(str(BENCHMARKS))
    rng = np.random.default_rng(7)
    unit = vector_topk.normalised(rng.standard_normal((40, 8), dtype=np.float32))
    unit[1] = unit[0]  # rows 0 and 1 tie on every query
    query = unit[0] + 0.01 * rng.standard_normal(8, dtype=np.float32)
    floor = vector_topk.floor_system(unit)
    best = floor(query)
    assert set(best[:2]) == {0, 1}

    def check(answer: list[int]) -> list[str]:
        systems = {vector_topk.FLOOR: floor, "other": lambda q: answer}
        return vector_topk.disagreements(np.array([query]), unit, systems)

    assert check([best[1], best[0], *best[2:]]) == []  # a tie, swapped
    assert check(best[::-1])  # the right ids, the wrong order
    assert check([best[0], best[2], best[1], *best[3:]])  # two that do not tie, swapped
    assert check([*best[:9], next(i for i in range(40) if i not in best)])  # a wrong id
    assert check(best[:9])  # too few


@pytest.mark.slow
def test_warmth_benchmark_fails_when_sql_answers_otherwise(tmp_path: Path) -> None:
    result = run(
        "warmth.py", "--records", "300", "--rounds", "1", "--inject-mismatch", cwd=tmp_path
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert "agreement: FAILED" in result.stdout
    assert "query 0: the engine found" in result.stdout
    assert "median per call" not in result.stdout


# -- text_query.py says what it measured ------------------------------------------------


@pytest.mark.slow
def test_text_query_benchmark_names_its_embedder_and_checks_its_store(tmp_path: Path) -> None:
    out = tmp_path / "text.json"
    result = run(
        "text_query.py", "--records", "200", "--queries", "5", "--embedder", "builtin",
        "--json", str(out), cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(out.read_text())
    assert report["embedder"] == "builtin:minilm-distilled-256"
    assert "store_many with embedding (builtin:minilm-distilled-256):" in result.stdout
    assert "check: OK - 200 records stored, each with a vector" in result.stdout


def test_text_query_benchmark_refuses_to_run_without_an_embedder(tmp_path: Path) -> None:
    # The test suite's environment sets PRIME_MEMORY_EMBEDDER=none.
    assert os.environ["PRIME_MEMORY_EMBEDDER"] == "none"
    result = run("text_query.py", "--records", "200", "--queries", "5", cwd=tmp_path)
    assert result.returncode == 2
    assert "PRIME_MEMORY_EMBEDDER is 'none', so nothing would be embedded" in result.stderr
    assert "records/s" not in result.stdout


@pytest.mark.slow
def test_text_query_benchmark_fails_when_the_store_is_short(tmp_path: Path) -> None:
    result = run(
        "text_query.py", "--records", "200", "--queries", "5", "--embedder", "builtin",
        "--inject-mismatch", cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 1, result.stdout + result.stderr
    assert "check: FAILED" in result.stdout and "stored 199 records, expected 200" in result.stdout
    assert "records/s" not in result.stdout


# -- the scripts no other test runs -----------------------------------------------------


@pytest.mark.slow
def test_mcp_peer_benchmark_drives_both_servers_and_compares(tmp_path: Path) -> None:
    out = tmp_path / "peer.json"
    result = run(
        "mcp_peer.py", "--sizes", "20", "--searches", "5", "--cap", "60",
        "--peer-command", *STAND_IN_PEER, "--json", str(out), cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    [row] = json.loads(out.read_text())["sizes"]
    assert row["agreement"] is True
    assert set(row["systems"]) == {"prime-memory-mcp", "server-memory (reference)"}
    for system in row["systems"].values():
        assert system["stores"]["calls"] == 20 and system["searches"]["calls"] == 5
        assert system["agreement"]["missed"] == [] and len(system["agreement"]["probed"]) == 5
    assert row["store_throughput_ratio"] > 0
    assert "store throughput, ours / peer" in result.stdout
    assert "agreement: OK" in result.stdout


@pytest.mark.slow
def test_mcp_latency_benchmark_starts_stores_and_reports(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, str(BENCHMARKS / "mcp_latency.py"), "--records", "5", "--starts", "1",
         "--floor-calls", "3", "--sdk-records", "0"],
        capture_output=True, text=True, cwd=tmp_path, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "prime-memory-mcp  median" in out and "bare SDK server   median" in out
    assert "(b) prime_memory_store round trips, 5 records, lean client" in out
    # (c), the SDK client's part, is left out to keep this short; run_all's MCP
    # section drives the same client against the same floor server.
    assert "(c)" not in out
    assert out.count("store p50") == 1 and out.count("SDK floor (trivial tool)") == 1
    assert "targets (lean client): p50 <= 2 ms:" in out


def _tiny_locomo(path: Path) -> Path:
    """Two LoCoMo-format conversations of a few turns, with questions about them."""

    def conversation(n: int, turns: list[tuple[str, str]]) -> dict[str, object]:
        session = [
            {"speaker": speaker, "dia_id": f"D1:{i + 1}", "text": text}
            for i, (speaker, text) in enumerate(turns)
        ]
        return {
            "speaker_a": "Ann",
            "speaker_b": "Bo",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": session,
        }

    samples = [
        {
            "sample_id": "tiny-1",
            "conversation": conversation(
                1,
                [
                    ("Ann", "I adopted a grey cat called Pixel last week."),
                    ("Bo", "My sister moved to Lisbon for a new job."),
                    ("Ann", "We painted the kitchen yellow on Sunday."),
                ],
            ),
            "qa": [
                {"question": "What is the name of Ann's cat?", "evidence": ["D1:1"], "category": 4},
                {"question": "Where did Bo's sister move?", "evidence": ["D1:2"], "category": 4},
                {"question": "What was never said?", "evidence": [], "category": 5},
            ],
        },
        {
            "sample_id": "tiny-2",
            "conversation": conversation(
                2,
                [
                    ("Ann", "The marathon in Berlin starts at nine."),
                    ("Bo", "I am reading a book about volcanoes."),
                ],
            ),
            "qa": [{"question": "Which book is Bo reading?", "evidence": ["D:1:2"], "category": 1}],
        },
    ]
    path.write_text(json.dumps(samples))
    return path


@pytest.mark.slow
def test_locomo_recall_benchmark_scores_a_tiny_dataset(tmp_path: Path) -> None:
    data = _tiny_locomo(tmp_path / "tiny-locomo.json")
    out = tmp_path / "locomo.json"
    result = run(
        "locomo_recall.py", "--data", str(data), "--no-st", "--json", str(out), cwd=tmp_path
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "2 conversations, 5 turns, 3 questions (1 without usable evidence skipped)" in (
        result.stdout
    )
    report = json.loads(out.read_text())
    assert (report["conversations"], report["questions"]) == (2, 3)
    assert set(report["systems"]) == {"bm25", "builtin", "hybrid (default)"}
    for table in report["systems"].values():
        assert table["overall"]["n"] == 3
        # Three turns at most per conversation: every answer is within the top 5.
        assert table["overall"]["R@5"] == 100.0
    assert result.stdout.splitlines()[-1].startswith("overall R@5=100.0")


@pytest.mark.slow
def test_locomo_recall_measures_recall_counts_on_later_questions(tmp_path: Path) -> None:
    data = _tiny_locomo(tmp_path / "tiny-locomo.json")
    out = tmp_path / "locomo.json"
    result = run(
        "locomo_recall.py", "--data", str(data), "--no-st", "--recalls", "--json", str(out),
        cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert "recall counts: later questions' R@10" in result.stdout
    found = json.loads(out.read_text())["recall_counts"]
    assert set(found) == {"returned", "evidence"}
    for table in found.values():
        assert "no term" in table["in_sample"]
        later = table["in_sample"]["no term"]["overall"]
        assert later["n"] == 1  # of the three questions with evidence, the second one
        assert table["held_out"]["overall"]["n"] == 1


def _benchmark_module(name: str) -> Any:
    sys.path.insert(0, str(BENCHMARKS))
    try:
        return __import__(name)
    finally:
        sys.path.remove(str(BENCHMARKS))


def test_locomo_recall_stores_each_dialogue_session_with_its_id(tmp_path: Path) -> None:
    locomo = _benchmark_module("locomo_recall")
    data = _tiny_locomo(tmp_path / "tiny-locomo.json")
    samples = json.loads(data.read_text())
    first = samples[0]["conversation"]
    first["session_2_date_time"] = "1:56 pm on 8 May, 2023"  # the same date as session 1
    first["session_2"] = [{"speaker": "Bo", "dia_id": "D2:1", "text": "The kitchen looks sunny."}]
    data.write_text(json.dumps(samples))
    conv = locomo.load(data)[0]
    engine, dia_of = locomo.build(conv, "none")
    with engine:
        session_of = {dia: engine.get(rid).session for rid, dias in dia_of.items() for dia in dias}
    assert session_of == {
        "D1:1": "tiny-1:1", "D1:2": "tiny-1:1", "D1:3": "tiny-1:1", "D2:1": "tiny-1:2"
    }  # fmt: skip


@pytest.mark.slow
def test_locomo_recall_tunes_leave_one_out_and_turns_each_part_off(tmp_path: Path) -> None:
    locomo = _benchmark_module("locomo_recall")
    data = _tiny_locomo(tmp_path / "tiny-locomo.json")
    out = tmp_path / "locomo.json"
    result = run(
        "locomo_recall.py", "--data", str(data), "--no-st", "--loo", "--parts",
        "--json", str(out), cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(out.read_text())
    steps = report["leave_one_out"]["steps"]
    assert [step["part"] for step in steps] == [name for name, _, _ in locomo.PARTS]
    assert steps[1]["defaults"] == {"time_weight": 0.4, "time_tail": 0.5}
    for step in steps:
        assert [fold["held_out"] for fold in step["folds"]] == ["tiny-1", "tiny-2"]
        assert step["held_out"]["overall"]["n"] == 3
    parts = report["parts"]
    assert list(parts) == [name for name, _ in locomo.ABLATION]
    for table in parts.values():
        assert table["overall"]["n"] == 3 and table["overall"]["R@5"] == 100.0
    assert parts["defaults"] == report["systems"]["hybrid (default)"]
    assert "one part at a time, in sample (R@10; stores built once):" in result.stdout
    assert "held-out overall R@5=100.0" in result.stdout


def test_the_locomo_report_labels_the_published_figure_apart() -> None:
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import _report
    finally:
        sys.path.remove(str(BENCHMARKS))
    row = {"R@5": 50.0, "R@10": 60.0, "R@25": 70.0, "R@50": 80.0, "n": 3}
    loco = {
        "data": "/data/locomo10-dev.json",
        "conversations": 5,
        "systems": {"hybrid (default)": {"overall": row}},
    }
    text = _report._recall({"locomo": loco})
    assert "| DRAGON (published; all 10 conversations) | - |" in text
    assert "in locomo10-dev.json, 5 conversations" in text
    assert "not measured in this run" in text


@pytest.mark.slow
def test_longmemeval_benchmark_scores_generated_questions(tmp_path: Path) -> None:
    out = tmp_path / "longmemeval.json"
    result = run(
        "longmemeval_recall.py", "--tiny", "--no-st", "--loo", "--json", str(out), cwd=tmp_path
    )
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(out.read_text())
    assert set(report["systems"]) == {"bm25", "builtin", "hybrid (default)"}
    overall = report["systems"]["hybrid (default)"]["overall"]
    assert overall["n"] == 4
    for metric in ("turn all@10", "turn any@5", "session all@5", "session any@10"):
        assert 0 <= overall[metric] <= 100
    # The one gold turn of each generated question names its topic; BM25 finds it.
    assert report["systems"]["bm25"]["overall"]["turn all@5"] == 100
    assert set(report["leave_one_out"]["held_out"]) >= {"turn all@10", "session all@5"}
    assert result.stdout.strip().splitlines()[-1].startswith("overall turn all@10=")


@pytest.mark.slow
def test_longmemeval_stores_each_haystack_session_and_turns_each_part_off(
    tmp_path: Path,
) -> None:
    lme = _benchmark_module("longmemeval_recall")
    question = lme.parse(lme.tiny())[0]
    engine, keys_of = lme.build(question, "none")
    with engine:
        for rid, keys in keys_of.items():
            # A turn repeated in a later session reinforces the first, which keeps its session.
            assert engine.get(rid).session == keys[0][0]
    assert len({sid for keys in keys_of.values() for sid, _ in keys}) == 6

    out = tmp_path / "longmemeval.json"
    result = run("longmemeval_recall.py", "--tiny", "--no-st", "--parts", "--json", str(out),
                 cwd=tmp_path)  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(out.read_text())
    parts = report["parts"]
    assert list(parts) == [name for name, _ in _benchmark_module("locomo_recall").ABLATION]
    assert parts["defaults"] == report["systems"]["hybrid (default)"]["overall"]
    for row in parts.values():
        assert row["n"] == 4 and 0 <= row["turn all@10"] <= 100
    assert "one part at a time, in sample (stores built once):" in result.stdout


def test_longmemeval_scores_follow_the_papers_protocol() -> None:
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import longmemeval_recall as lme
    finally:
        sys.path.remove(str(BENCHMARKS))
    session = lme.Session("s", 0.0, [(0, "a"), (2, "b")])
    question = lme.Question(
        "q", "multi-session", "?", 0.0, [session],
        frozenset({("s1", 0), ("s2", 4)}), frozenset({"s1", "s2"}),
    )  # fmt: skip
    # Six turns of s1 first: s2's gold turn is 7th, so all@5 misses it, any@5 does not.
    ranked = [("s1", i) for i in range(6)] + [("s2", 4)] + [(f"x{i}", 0) for i in range(9)]
    scores = lme.score(question, ranked)
    assert scores["turn any@5"] == 1.0 and scores["turn all@5"] == 0.0
    assert scores["turn all@10"] == 1.0
    # Sessions count once each, in the order of their best turn: s1, s2, x0, ...
    assert scores["session all@5"] == 1.0
    assert lme.score(question, ranked[6:])["session all@5"] == 0.0
    assert lme.score(question, ranked[6:])["session any@5"] == 1.0
    empty = lme.Question("e", "temporal-reasoning", "?", 0.0, [session])
    assert set(lme.score(empty, []).values()) == {1.0}
    assert lme.parse_date("2023/05/20 (Sat) 02:21") == 1684549260.0


def _tiny_decisions(path: Path) -> Path:
    """Two repositories of three ADRs in the decisions data set's format; each query
    shares a word with its decision that no other memory of its repository holds."""

    def adr(repo: str, n: int, decision: str, distractors: list[str], query: str) -> dict[str, Any]:
        return {
            "id": f"{repo}#{n:03d}", "path": f"docs/adr/{n:04d}.md", "title": decision,
            "decision": decision, "distractors": distractors, "query": query, "number": n,
            "date": "",
        }  # fmt: skip

    def repo(name: str, adrs: list[dict[str, Any]]) -> dict[str, Any]:
        return {"repo": name, "commit": "0" * 40, "licence": "MIT",
                "ordered_by": "file number / date", "adrs": adrs}  # fmt: skip

    api, web = "acme/api", "acme/web"
    data = {"repos": [
        repo(api, [
            adr(api, 1, "Keep orders in PostgreSQL. Every order lives in PostgreSQL.",
                ["Backups become a nightly job.", "Developers need a local server."],
                "Orders vanish when the single file database is corrupted."),
            adr(api, 2, "Adopt semantic versioning. Every release gets a semver tag.",
                ["Clients can pin a major version."],
                "Consumers cannot tell whether an upgrade breaks their release pipeline."),
            adr(api, 3, "Write structured logs. Services write JSON lines to stdout.",
                ["Grep gets harder without jq.", "Dashboards parse fields directly."],
                "Plain text logs cannot be searched by field."),
        ]),
        repo(web, [
            adr(web, 1, "Write the frontend in TypeScript. New modules use TypeScript.",
                ["The build needs a compile step."],
                "Type errors reach customers too often from our frontend."),
            adr(web, 2, "Render pages on the server. The first paint comes from the server.",
                ["Hosting costs rise a little.", "Search engines index them."],
                "Slow phones show blank pages for seconds before the bundle loads."),
            adr(web, 3, "Keep feature flags in a config service. Flags are read at startup.",
                ["They change without a deploy."],
                "Switching a half-finished feature off forces a redeploy today."),
        ]),
    ]}  # fmt: skip
    path.write_text(json.dumps(data))
    return path


@pytest.mark.slow
def test_decisions_recall_benchmark_scores_a_tiny_dataset_and_checks_its_stores(
    tmp_path: Path,
) -> None:
    data = _tiny_decisions(tmp_path / "tiny-decisions.json")
    out = tmp_path / "decisions.json"
    result = run("decisions_recall.py", "--data", str(data), "--loo", "--json", str(out),
                 cwd=tmp_path)  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert "2 repositories, 6 ADRs (queries), 15 memories (15 distinct" in result.stdout
    assert "check: every store holds exactly the memories given" in result.stdout
    report = json.loads(out.read_text())
    assert report["check"]["ok"] and report["queries"] == 6
    for layout in ("per_repo", "shared"):
        systems = report["systems"][layout]
        assert set(systems) == {"hybrid", "keyword", "parts off", "BM25"}
        for table in systems.values():
            assert table["overall"]["n"] == 6
            assert set(table["per_repo"]) == {"acme/api", "acme/web"}
            assert 0 <= table["overall"]["R@1"] <= table["overall"]["R@5"] <= 100
            assert 0 <= table["overall"]["MRR@10"] <= 1
        # Each query shares a word with its decision that no other memory holds.
        assert systems["BM25"]["overall"]["R@1"] == 100.0
    loo = report["leave_one_out"]
    assert loo["held_out"]["n"] == 6 and len(loo["grid"]) == 24
    assert [fold["held_out"] for fold in loo["folds"]] == ["acme/api", "acme/web"]
    assert "leave one repository out (24 settings" in result.stdout
    last = result.stdout.strip().splitlines()[-1]
    assert last.startswith("hybrid per repository (R@5 / MRR@10): acme/api ")

    # A store one memory short fails the check, and no figure is reported.
    failed = run("decisions_recall.py", "--data", str(data), "--inject-mismatch", cwd=tmp_path)
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert "check: FAILED - 1 problem(s)" in failed.stdout
    assert "acme/api holds 7 records (7 stored) for 8 memories" in failed.stdout
    assert "R@5" not in failed.stdout


@pytest.mark.slow
def test_recall_ideas_checks_its_baseline_against_the_engine(tmp_path: Path) -> None:
    out = tmp_path / "ideas.json"
    result = run("recall_ideas.py", "--tiny", "--loo", "--json", str(out), cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "agreement: OK" in result.stdout
    report = json.loads(out.read_text())
    agreement = report["agreement"]
    assert agreement["engine"] == agreement["re-implementation"]
    assert "sentence vectors: best sentence" in report["ideas"]
    assert "the engine's default now" in report["ideas"]
    assert len(report["leave_one_out"]) == 4


@pytest.mark.slow
def test_recall_ideas_scores_the_weak_categories_per_category(tmp_path: Path) -> None:
    data = _tiny_locomo(tmp_path / "tiny-locomo.json")
    out = tmp_path / "weak.json"
    result = run(
        "recall_ideas.py", "--tiny", "--weak", "--locomo", str(data), "--json", str(out),
        cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert "agreement: OK" in result.stdout
    weak = json.loads(out.read_text())["weak_categories"]
    assert set(weak) == {"engine", *recall_ideas_families()}
    for name in recall_ideas_families():
        for table in (weak[name]["in_sample"], weak[name]["held_out"]):
            assert {"overall", "multi-hop", "single-hop"} <= set(table)
            assert all(0.0 <= v <= 100.0 for v in table.values())
        assert set(weak[name]["longmemeval"]) == {"lme turn all@10", "lme session all@5"}


def recall_ideas_families() -> list[str]:
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import recall_ideas
    finally:
        sys.path.remove(str(BENCHMARKS))
    return list(recall_ideas.WEAK_IDEAS)


@pytest.mark.slow
def test_text_query_benchmark_times_the_embedder_alone_and_another_reach(tmp_path: Path) -> None:
    out = tmp_path / "text.json"
    result = run(
        "text_query.py", "--records", "600", "--queries", "5", "--compare-reach", "1",
        "--embedder", "builtin",
        "--json", str(out), cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(out.read_text())
    assert report["embed_rate"] > 0
    assert report["vector_bytes"] == 4 * 256
    assert "embedding alone, 600 texts" in result.stdout
    for gate in ("no gate", "domain gate"):
        assert report[gate]["p50_s_reach_compared"] > 0
    assert "with context from 1 neighbour(s) a side" in result.stdout


@pytest.mark.slow
def test_text_query_benchmark_times_the_ranking_before_the_time_prior(tmp_path: Path) -> None:
    out = tmp_path / "text.json"
    result = run(
        "text_query.py", "--records", "600", "--queries", "6", "--compare-before",
        "--embedder", "builtin", "--json", str(out), cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(out.read_text())
    for gate in ("no gate", "domain gate"):
        assert report[gate]["p50_s_before"] > 0
    timeless = 6 - report["queries_naming_a_time"]
    assert f"the {timeless} queries that name no time got the same hits" in result.stdout
    assert "now / before = " in result.stdout
    timed = run(
        "text_query.py", "--records", "600", "--queries", "4", "--compare-before",
        "--time-phrase", "yesterday", "--embedder", "builtin", "--json", str(out), cwd=tmp_path,
    )  # fmt: skip
    assert timed.returncode == 0, timed.stdout + timed.stderr
    assert json.loads(out.read_text())["queries_naming_a_time"] == 4


@pytest.mark.slow
def test_inspector_benchmark_checks_pages_against_the_engine_and_reports(tmp_path: Path) -> None:
    out = tmp_path / "inspector.json"
    result = run(
        "inspector.py", "--records", "300", "--rounds", "2", "--json", str(out), cwd=tmp_path
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "agreement: OK - every page lists the records its engine calls return" in result.stdout
    report = json.loads(out.read_text())
    assert report["agreement"] is True
    assert set(report["p50_seconds"]) == {
        "memories page",
        "memories page, text query",
        "a memory's page",
    }
    for sides in report["p50_seconds"].values():
        assert set(sides) == {"page", "engine"}
        assert all(seconds > 0 for seconds in sides.values())


@pytest.mark.slow
def test_inspector_benchmark_fails_when_a_page_and_the_engine_disagree(tmp_path: Path) -> None:
    result = run(
        "inspector.py", "--records", "200", "--rounds", "1", "--inject-mismatch", cwd=tmp_path
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert "agreement: FAILED" in result.stdout
    assert "page p50" not in result.stdout


@pytest.mark.slow
def test_token_count_benchmark_counts_every_turn(tmp_path: Path) -> None:
    data = tmp_path / "locomo.json"
    turns = [
        {"speaker": "A", "text": f"turn {n}: we met at the cafe on Main Street"} for n in range(7)
    ]
    data.write_text(
        json.dumps([{"conversation": {"session_1": turns, "speaker_a": "A"}, "qa": []}]),
        encoding="utf-8",
    )
    out = tmp_path / "tokens.json"
    result = run("token_count.py", "--locomo", str(data), "--json", str(out), cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(out.read_text())["LoCoMo dev turns"]
    assert report["texts"] == 7 and report["estimate_tokens"] > 7 * 10
    assert "LoCoMo dev turns: 7 texts" in result.stdout
    for reference in ("o200k_base", "cl100k_base"):
        if reference in report:  # with the bench extra installed
            assert 0.8 < report[reference]["estimate_over_reference"] < 1.5


@pytest.mark.slow
def test_tools_list_benchmark_measures_the_real_servers_answer(tmp_path: Path) -> None:
    out = tmp_path / "tools_list.json"
    result = run("tools_list.py", "--json", str(out), cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "check: OK - all 8 tools listed, each with an input schema" in result.stdout
    report = json.loads(out.read_text())
    assert set(report["tools"]) == {
        "prime_memory_encode", "prime_memory_store", "prime_memory_query", "prime_memory_fold",
        "prime_memory_stats", "prime_memory_forget", "prime_memory_update",
        "prime_memory_reinforce",
    }  # fmt: skip
    total = report["total"]
    assert report["target_tokens"] == 2_000
    assert "estimate" in report["pass"]
    for counter, passed in report["pass"].items():
        # Each tool's parts, without the JSON that joins them, add up to less than the reply.
        parts = sum(p[counter] for tool in report["tools"].values() for p in tool.values())
        assert 0 < parts < total[counter] < total["bytes"]
        assert passed is (total[counter] < 2_000)
        verdict = "PASS" if passed else "MISS"
        assert f"target < 2,000 tokens by {counter}: {verdict}" in result.stdout
    size = f"tools/list reply: {total['bytes']:,} bytes; {total['estimate']:,} tokens by estimate"
    assert size in result.stdout


def test_tools_list_benchmark_checks_that_every_tool_is_listed() -> None:
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import tools_list
    finally:
        sys.path.remove(str(BENCHMARKS))
    line = json.dumps({"result": {"tools": [{"name": "a", "inputSchema": {}}, {"name": "c"}]}})
    assert tools_list.check(line, {"a", "b"}) == [
        "b is not listed",
        "c is listed but not registered",
        "c has no input schema",
    ]
    whole = json.dumps({"result": {"tools": [{"name": n, "inputSchema": {}} for n in "ab"]}})
    assert tools_list.check(whole, {"a", "b"}) == []


# -- PostgreSQL -------------------------------------------------------------------------


@pytest.mark.slow
def test_postgres_benchmark_checks_three_systems_and_reports(
    tmp_path: Path, pg_server: str
) -> None:
    before = bench_databases(pg_server, "pmf_bench_checks_")
    out = tmp_path / "postgres.json"
    result = run(
        "postgres.py", "--quick", "--pg", pg_server, "--dir", str(tmp_path), "--json", str(out),
        "--db-prefix", "pmf_bench_checks_",
        cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("agreement: OK") == 2
    report = json.loads(out.read_text())
    sizes = report["sizes"]
    assert [r["records"] for r in sizes] == [300, 600]
    # Each size stores the same records in both; the first size's single stores stay.
    assert sizes[0]["counts"] == {"sqlite": 300, "postgres": 300, "plain sql": 300}
    assert sizes[1]["counts"] == {"sqlite": 610, "postgres": 610, "plain sql": 610}
    for size in sizes:
        assert set(size["p50_seconds"]) == {
            "store",
            "tag query",
            "text query",
            "text query, every match scored",
            "vector top-10",
        }
        # Both engines give the same text top-10, planned or with every match scored.
        assert size["text_top10_same"] == size["text_top10_same_exact"] == 1.0
        assert size["vector_scan_seconds"] > 0
        for times in size["p50_seconds"].values():
            assert set(times) == {"sqlite", "postgres", "plain sql"}
            assert all(t > 0 for t in times.values())
        # A server on a second store that keeps the first size's records starts in turn.
        assert size["base_system"] == "postgres, 300 records"
        wanted = {*times, "postgres, 300 records"}
        assert set(size["startup_seconds"]) == set(size["rss_mib"]) == wanted
        assert size["fold"]["sqlite"]["seconds"] > 0
        assert set(size["fold"]["postgres"]) <= {"seconds", "after", "unavailable"}
    assert {t["target"] for t in report["targets"]} == {
        "PostgreSQL tag query <= 1.5x plain SQL",
        "text top-10 the same as SQLite's for >= 95 % of queries",
        "text top-10 the same as SQLite's for >= 95 % of queries, every match scored",
        "PostgreSQL text query p50 <= 150 ms",
        "PostgreSQL server start-up at the largest size <= 1.5x the smallest",
        "PostgreSQL server memory at the largest size <= 1.5x the smallest",
    }
    # Agreement is judged at every size; the other targets only at their sizes.
    for target in report["targets"]:
        assert target["indicative"] == ("top-10" not in target["target"])
        if "top-10" in target["target"]:
            assert target["pass"]
    assert "pg/sql" in result.stdout and "start-up to the first answered tag query" in (
        result.stdout
    )
    assert bench_databases(pg_server, "pmf_bench_checks_") == before  # its database was dropped


@pytest.mark.slow
def test_postgres_benchmark_fails_when_plain_sql_disagrees(tmp_path: Path, pg_server: str) -> None:
    result = run(
        "postgres.py", "--quick", "--sizes", "300", "--pg", pg_server, "--dir", str(tmp_path),
        "--inject-mismatch", cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 1, result.stdout + result.stderr
    assert "agreement: FAILED" in result.stdout
    assert "plain sql 9" in result.stdout
    assert "pg/sql" not in result.stdout and "PASS" not in result.stdout
    assert "MISS" not in result.stdout


def test_postgres_benchmark_says_when_no_server_answers(tmp_path: Path) -> None:
    result = run(
        "postgres.py", "--quick", "--pg", "postgresql://postgres@127.0.0.1:1/postgres",
        cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 2
    assert result.stdout.startswith("unavailable: cannot connect to PostgreSQL at ")


@pytest.mark.slow
def test_locomo_recall_runs_on_postgres_beside_sqlite(tmp_path: Path, pg_server: str) -> None:
    before = bench_databases(pg_server, "pmf_locomo_")
    data = _tiny_locomo(tmp_path / "tiny-locomo.json")
    out = tmp_path / "locomo.json"
    result = run(
        "locomo_recall.py", "--data", str(data), "--no-st", "--store", pg_server,
        "--json", str(out), cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(out.read_text())
    assert set(report["postgres"]["systems"]) == set(report["systems"])
    for table in report["postgres"]["systems"].values():
        assert table["overall"]["n"] == 3
    assert set(report["backend_r10"]) == {"bm25", "builtin", "hybrid (default)"}
    assert "R@10, PostgreSQL against SQLite (target: within 1 point):" in result.stdout
    assert result.stdout.splitlines()[-1].startswith("overall R@5=100.0")
    assert bench_databases(pg_server, "pmf_locomo_") == before


@pytest.mark.slow
def test_run_all_lists_the_postgres_sections_failed_check(tmp_path: Path, pg_server: str) -> None:
    out = tmp_path / "results"
    skip = [
        "structure", "vector", "mcp", "recall", "fold", "ingest", "soak", "warmth", "inspector",
        "tools", "hooks",
    ]  # fmt: skip
    result = subprocess.run(
        [
            sys.executable, str(BENCHMARKS / "run_all.py"), "--smoke", "--quiet",
            "--skip", *skip, "--out", str(out), "--inject-mismatch",
        ],
        capture_output=True, text=True, cwd=tmp_path, timeout=300,
    )  # fmt: skip
    assert result.returncode == 1, result.stdout + result.stderr
    assert "postgres: sizes, 300 records: the systems compared disagree" in result.stderr
    results = json.loads((out / "results.json").read_text())
    assert set(results["sections"]) == {"postgres"}
    assert len(results["targets"]) == 3
    for target in results["targets"]:
        assert (target["comparable"], target["pass"], target["measured"]) == (False, None, None)
    assert "## 12. PostgreSQL beside SQLite and plain SQL" in (out / "report.md").read_text()
