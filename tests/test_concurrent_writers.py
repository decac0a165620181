"""MCP server processes write to one store at once, and nothing is lost.

The work is done by ``benchmarks/soak.py`` (stores through real stdio servers,
queries interleaved, one fold over seeded faded records and near-duplicate
pairs): 2 processes x 100 stores in the default run, and at CI size, 4 x 500,
in the slow run (``python3 -m pytest -m slow``). This test then checks the
store on its own, through a fresh engine and the archive.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from prime_memory_folding import MemoryEngine

SOAK = Path(__file__).resolve().parents[1] / "benchmarks" / "soak.py"


@pytest.mark.parametrize(
    ("processes", "writes"),
    [
        pytest.param(2, 100, id="2x100"),
        pytest.param(4, 500, id="4x500", marks=pytest.mark.slow),
    ],
)
def test_stdio_servers_writing_at_once_lose_no_record(
    tmp_path: Path, processes: int, writes: int
) -> None:
    store = tmp_path / "shared.db"
    report_path = tmp_path / "soak.json"
    done = subprocess.run(
        [sys.executable, str(SOAK), "--processes", str(processes), "--writes", str(writes),
         "--query-every", "25", "--store", str(store), "--json", str(report_path)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(report_path.read_text())
    assert report["errors"] == 0 and report["problems"] == []
    # The fold ran while the others wrote, and it changed the store.
    fold, seeded = report["fold"], report["seeded"]
    assert fold["records_after"] < fold["records_before"]
    assert fold["pruned"] == seeded["faded"] > 0
    assert fold["created"] == seeded["pairs"] > 0 and fold["folded"] == 2 * seeded["pairs"]

    with MemoryEngine(store, embedder="none") as engine:
        stats = engine.stats()
        assert stats.records == processes * writes + seeded["pairs"]
        folded_ids = set(engine.match_ids(tags=["folded"]))
        assert len(folded_ids) == seeded["pairs"]
        ids = engine.match_ids()
        assert len(set(ids)) == len(ids) == processes * writes + seeded["pairs"]
        for kind, table in stats.registries.items():
            assert len(set(table.values())) == len(table), f"{kind}: two labels share a prime"
        db = engine.storage.db  # type: ignore[attr-defined]
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        contents = [
            content
            for record_id, content in db.execute("SELECT record_id, content FROM records")
            if record_id not in folded_ids
        ]
        assert sorted(contents) == sorted(
            f"soak write {n} from process {p}" for p in range(processes) for n in range(writes)
        )
        archived = dict(db.execute("SELECT reason, count(*) FROM archive GROUP BY reason"))
        assert archived == {"pruned": seeded["faded"], "folded": 2 * seeded["pairs"]}
        into = {row[0] for row in db.execute("SELECT folded_into FROM archive")}
        assert into == folded_ids | {None}
        for p in range(processes):
            assert len(engine.match_ids(tags=[f"p{p}_0"])) == len(range(0, writes, 16))
