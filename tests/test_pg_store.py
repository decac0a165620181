"""Edges of the PostgreSQL store that the shared contract tests do not reach."""

from __future__ import annotations

import math
import threading
from pathlib import Path

import psycopg
import pytest
from hypothesis import given
from hypothesis import strategies as st

from prime_memory_folding import MemoryEngine
from prime_memory_folding.engine import pushdown
from prime_memory_folding.storage.postgres import DEDUPE_BUCKETS
from tests.conftest import FakeClock


def test_bulk_stores_at_once_never_fill_the_lock_table(pg_url: str) -> None:
    """Two engines storing thousands of memories at once both finish, with every one kept.

    Writers of the same memory take turns on advisory locks; one lock per
    memory would exceed PostgreSQL's lock table (64 x max_connections slots by
    default) with batches this size.
    """
    count = 5_000
    assert count > DEDUPE_BUCKETS
    MemoryEngine(pg_url).close()
    errors: list[BaseException] = []

    def store(batch: int) -> None:
        try:
            with MemoryEngine(pg_url, scope="global") as memory:
                memory.store_many([f"bulk memory {batch}-{i}" for i in range(count)])
        except BaseException as exc:  # every failure is reported below
            errors.append(exc)

    threads = [threading.Thread(target=store, args=(batch,)) for batch in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    with MemoryEngine(pg_url) as memory:
        assert memory.storage.count() == 3 * count


def test_a_bulk_load_leaves_the_planner_statistics_it_needs(pg_url: str) -> None:
    """A large batch updates the table's statistics, so a tag query uses the tag index."""
    with MemoryEngine(pg_url, scope="global") as memory:
        memory.store_many([{"content": f"note {i}", "tags": [f"t{i % 100}"]} for i in range(3_000)])
    with psycopg.connect(pg_url) as conn:
        analysed = conn.execute(
            "SELECT last_analyze IS NOT NULL OR last_autoanalyze IS NOT NULL "
            "FROM pg_stat_user_tables WHERE relid = 'records'::regclass"
        ).fetchone()
        assert analysed == (True,)


@pytest.mark.parametrize("window", [16, 1])
def test_salience_with_vanishing_strengths_matches_sqlite(
    pg_url: str, tmp_path: Path, window: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Strengths near the smallest double neither fail in SQL nor change the order."""
    monkeypatch.setattr(pushdown, "SALIENCE_FIRST", window)
    clock = FakeClock()
    with (
        MemoryEngine(pg_url, clock=clock, scope="global") as pg,
        MemoryEngine(tmp_path / "m.db", clock=clock, scope="global") as lite,
    ):
        for i, strength in enumerate([5e-324, 1e-200, 1e-160, 0.0, 0.3, 1e-310]):
            for memory in (pg, lite):
                rid = memory.store(f"memory {i}", importance=1e-170 if i % 2 else 0.4).record_id
                memory.update(rid, strength=strength)
        for limit in (1, 3, 6):
            got = [h.record.record_id for h in pg.query(limit=limit)]
            assert got == [h.record.record_id for h in lite.query(limit=limit)]


@given(
    tf=st.integers(1, 50),
    df=st.integers(0, 10_000),
    total=st.integers(0, 10_000),
    dl=st.floats(1.0, 1_000.0),
)
def test_bm25_takes_a_word_count_past_a_lagging_store_size(
    tf: int, df: int, total: int, dl: float
) -> None:
    from prime_memory_folding.storage.pg_text import bm25

    score = bm25(float(tf), df, dl, 20.0, total)
    assert math.isfinite(score) and score > 0.0
    if df >= total:  # a word in every record, or counted after the size was read
        assert score <= bm25(float(tf), total, dl, 20.0, total) + 1e-12
