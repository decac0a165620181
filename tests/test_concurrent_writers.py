"""Four MCP server processes write to one store at once, and nothing is lost.

The work is done by ``benchmarks/soak.py`` at CI size (4 processes x 500 stores
through real stdio servers, queries interleaved, one fold); this test then
checks the store on its own, through a fresh engine.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from prime_memory_folding import MemoryEngine

SOAK = Path(__file__).resolve().parents[1] / "benchmarks" / "soak.py"
PROCESSES, WRITES = 4, 500


def test_four_stdio_servers_store_2000_records_without_loss(tmp_path: Path) -> None:
    store = tmp_path / "shared.db"
    report_path = tmp_path / "soak.json"
    done = subprocess.run(
        [sys.executable, str(SOAK), "--processes", str(PROCESSES), "--writes", str(WRITES),
         "--query-every", "25", "--store", str(store), "--json", str(report_path)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(report_path.read_text())
    assert report["errors"] == 0 and report["problems"] == []
    assert report["fold"]["records_before"] is not None  # the fold ran while others wrote

    with MemoryEngine(store, embedder="none") as engine:
        stats = engine.stats()
        assert stats.records == PROCESSES * WRITES
        ids = engine.match_ids()
        assert len(set(ids)) == PROCESSES * WRITES
        for kind, table in stats.registries.items():
            assert len(set(table.values())) == len(table), f"{kind}: two labels share a prime"
        db = engine.storage.db  # type: ignore[attr-defined]
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        contents = {row[0] for row in db.execute("SELECT content FROM records")}
        assert contents == {
            f"soak write {n} from process {p}" for p in range(PROCESSES) for n in range(WRITES)
        }
        for p in range(PROCESSES):
            assert len(engine.match_ids(tags=[f"p{p}_0"])) == len(range(0, WRITES, 16))
