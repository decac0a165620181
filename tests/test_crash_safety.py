"""kill -9 at random moments loses no acknowledged write and never half-applies a fold.

``benchmarks/crash_soak.py`` does the killing, checking the store after each
kill: 6 seeded kills in the default run, 50 (CI size) in the slow run
(``python3 -m pytest -m slow``). Most kill an engine writer, right after a
random acknowledged store or a random moment into a fold's write transaction;
some kill the real stdio MCP server while store calls are in flight, where a
write counts as acknowledged once its JSON-RPC answer has arrived. This test
then checks the final store again on its own.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from prime_memory_folding import MemoryEngine

CRASH_SOAK = Path(__file__).resolve().parents[1] / "benchmarks" / "crash_soak.py"


@pytest.mark.parametrize(
    ("kills", "fold_share", "mcp_share", "modes", "mid_fold"),
    [
        # Every kind of round at least once, the fold twice.
        pytest.param(6, 0.34, 0.17, {"store": 3, "fold": 2, "mcp": 1}, 0, id="6-kills"),
        pytest.param(
            50, 0.3, 0.12, {"store": 29, "fold": 15, "mcp": 6}, 3,
            id="50-kills", marks=pytest.mark.slow,
        ),
    ],
)  # fmt: skip
def test_kills_lose_nothing_acknowledged(
    tmp_path: Path,
    kills: int,
    fold_share: float,
    mcp_share: float,
    modes: dict[str, int],
    mid_fold: int,
) -> None:
    # A process kill leaves the page cache intact, so fsync latency only slows the
    # test down: use memory-backed /dev/shm where there is one.
    shm = Path("/dev/shm")
    folder = tmp_path
    if shm.is_dir() and os.access(shm, os.W_OK):
        folder = shm / f"prime-memory-crash-{os.getpid()}"
        folder.mkdir(exist_ok=True)
    store = folder / "crash.db"
    report_path = tmp_path / "crash.json"
    done = subprocess.run(
        [sys.executable, str(CRASH_SOAK), "--kills", str(kills), "--seed", "1",
         "--fold-share", str(fold_share), "--mcp-share", str(mcp_share),
         "--store", str(store), "--json", str(report_path)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(report_path.read_text())
    assert report["problems"] == []
    assert report["kills"] == kills
    assert report["modes"] == modes
    # Kills that found the fold's write transaction begun and left it unapplied.
    assert report["fold_kills"]["mid_fold"] >= mid_fold, report["fold_kills"]
    assert all(n > 0 for n in report["acknowledged_by_mode"].values())

    db = sqlite3.connect(store)
    try:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        live = {row[0] for row in db.execute("SELECT record_id FROM records")}
        archived = {row[0] for row in db.execute("SELECT record_id FROM archive")}
    finally:
        db.close()
    assert not live & archived
    assert len(live | archived) == report["live_and_archived"]
    with MemoryEngine(store, embedder="none") as engine:
        assert set(engine.match_ids()) == live
        engine.store("life goes on", vector=[1.0] * 8)
    if folder != tmp_path:
        for leftover in folder.iterdir():
            leftover.unlink()
        folder.rmdir()
