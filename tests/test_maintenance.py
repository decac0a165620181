"""Folding on a live engine: the steps a fold reports, and the archive in the store's summary."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from prime_memory_folding import InvalidInput, MemoryEngine
from prime_memory_folding.mcp.server import build_server
from tests.conftest import FakeClock

DAY = 86_400.0


def _foldable(engine: MemoryEngine, clock: FakeClock) -> tuple[list[str], str]:
    twins = [
        engine.store(text, subdomain="procedural", tags=["lint"], vector=vector).record_id
        for text, vector in (
            ("Run make lint before pushing; CI fails on any warning.", [1.0, 0.0, 0.0]),
            ("Run make lint before you push; CI fails on any warning.", [0.99, 0.1, 0.0]),
        )
    ]
    passing = engine.store("Scratch note", importance=0.1, vector=[0.0, 0.0, 1.0]).record_id
    clock.advance(30 * DAY)
    return twins, passing


@pytest.mark.parametrize(
    ("dry_run", "third"), [(True, "preparing folded records"), (False, "writing")]
)
def test_a_fold_reports_its_steps_in_order(
    engine: MemoryEngine, clock: FakeClock, dry_run: bool, third: str
) -> None:
    _foldable(engine, clock)
    steps: list[tuple[str, int, int]] = []
    report = engine.fold(dry_run=dry_run, progress=lambda *step: steps.append(step))
    assert steps == [
        ("reading records", 0, 5),
        ("decaying and pruning", 1, 5),
        ("finding candidates", 2, 5),
        ("checking candidates", 3, 5),
        (third, 4, 5),
        ("done", 5, 5),
    ]
    assert (report.folded, report.pruned) == (2, 1)


def test_the_summary_counts_the_archive_by_reason(engine: MemoryEngine, clock: FakeClock) -> None:
    assert (engine.stats().archived, engine.stats().archived_by_reason) == (0, {})
    _, passing = _foldable(engine, clock)
    engine.fold()
    summary = engine.stats()
    assert (summary.records, summary.archived) == (1, 3)
    assert summary.archived_by_reason == {"folded": 2, "pruned": 1}
    engine.restore(passing)
    assert engine.stats().archived_by_reason == {"folded": 2}


@pytest.mark.anyio
async def test_the_stats_tool_reports_the_archive(engine: MemoryEngine, clock: FakeClock) -> None:
    _foldable(engine, clock)
    engine.fold()
    async with Client(build_server(engine), mode="legacy") as client:
        result = await client.call_tool("prime_memory_stats", {})
    assert not result.is_error
    out: dict[str, Any] = result.structured_content or {}
    assert (out["records"], out["archived"], out["archived_by_reason"]) == (
        1,
        3,
        {"folded": 2, "pruned": 1},
    )


def test_forget_archives_and_restore_brings_it_back(engine: MemoryEngine) -> None:
    kept = engine.store("keep me")
    gone = engine.store("forget me", tags=["x"], metadata={"why": "test"})
    assert engine.forget(gone.record_id) == gone
    assert engine.match_ids(scopes=["*"]) == [kept.record_id]
    stats = engine.stats()
    assert (stats.archived, stats.archived_by_reason) == (1, {"forgotten": 1})
    assert engine.restore(gone.record_id) == gone
    assert engine.stats().archived == 0
    engine.forget(gone.record_id)
    assert engine.purge_archive(reason="pruned") == 0
    assert engine.purge_archive(reason="forgotten") == 1
    with pytest.raises(InvalidInput, match="forgotten"):
        engine.purge_archive(reason="lost")


def test_the_archive_keeps_its_entries_and_sequence_across_its_rebuild(tmp_path: Path) -> None:
    from prime_memory_folding.storage.migrations import latest_version
    from tests.old_stores import build_store

    path = tmp_path / "six.db"
    build_store(path, 6)
    db = sqlite3.connect(path, isolation_level=None)
    columns = (
        "reason, detail, folded_into, archived_at, record_id, dedupe_key, domain, subdomain, "
        "tags, tag_product, content, importance, strength, created_at, updated_at, "
        "accessed_at, access_count, metadata, scope"
    )
    for n in range(3):
        db.execute(
            f"INSERT INTO archive ({columns}) VALUES "
            "('pruned', 'faded', NULL, 1.0, ?, ?, 'memory', 'general', '[]', '1', ?, 0.5, 0.01,"
            " 0, 0, 0, 0, '{}', 'project:a')",
            (f"{n:032x}", f"key{n}", f"old {n}"),
        )
    db.execute("DELETE FROM archive WHERE seq = 3")  # the sequence must not fall back to 2
    before = db.execute("SELECT * FROM archive ORDER BY seq").fetchall()
    db.close()
    with MemoryEngine(path, embedder="none") as memory:
        assert memory.storage.schema_version() == latest_version()
        after = memory.storage.db.execute(  # type: ignore[attr-defined]
            "SELECT * FROM archive ORDER BY seq"
        ).fetchall()
        # Every entry as it was; columns added since (the session) are empty.
        width = len(before[0])
        assert [row[:width] for row in after] == before
        assert {row[width:] for row in after} == {(None,) * (len(after[0]) - width)}
        record = memory.store("new")
        memory.forget(record.record_id)
        seqs = [row[0] for row in memory.storage.db.execute("SELECT seq FROM archive")]  # type: ignore[attr-defined]
        assert seqs == [1, 2, 4]
        assert memory.restore(f"{0:032x}").scope == "project:a"


def test_recalled_memories_are_reinforced_in_few_shared_writes(
    engine: MemoryEngine, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    from prime_memory_folding.engine import facade as engine_module

    ids = [engine.store(f"note {n}", tags=["t"]).record_id for n in range(5)]
    storage = engine.storage
    commits = []
    begin = storage.transaction

    def counted() -> Any:
        commits.append(clock.now)
        return begin()

    monkeypatch.setattr(storage, "transaction", counted)
    monkeypatch.setattr(engine_module, "RECALL_FLUSH_RECORDS", 64)
    for _ in range(200):
        clock.advance(1)
        assert len(engine.query(tags=["t"], limit=5, reinforce=True)) == 5
    # 200 queries reinforced 5 records each: one write every 30 s of queries.
    assert 1 <= len(commits) <= 200 // 30 + 1
    engine.flush_recalls()
    assert all(engine.get(rid).access_count == 200 for rid in ids)
    engine.query(tags=["t"])  # reinforce is off by default: a library's reads do not write
    assert engine.flush_recalls() == 0


def test_pending_reinforcements_are_written_on_close(store_path: Path, clock: FakeClock) -> None:
    with MemoryEngine(store_path, clock=clock) as memory:
        rid = memory.store("recall me").record_id
        memory.query(reinforce=True)
    with MemoryEngine(store_path, clock=clock) as memory:
        assert memory.get(rid).access_count == 1
