"""Salience reads on PostgreSQL rank as the in-memory index does, ties and decay included."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from prime_memory_folding import MemoryEngine
from prime_memory_folding.storage import pg_rows
from tests import pg_helpers
from tests.conftest import FakeClock

DAY = 86_400.0

RECORDS = st.lists(
    st.tuples(
        st.sampled_from([0.3, 0.5, 0.5, 0.9]),  # importance: many ties
        st.sampled_from(["a", "b"]),  # tag
        st.sampled_from([0.0, 0.0, 60.0]),  # seconds before the next store: ties in time too
        st.booleans(),  # stored again later (reinforced)
    ),
    min_size=1,
    max_size=60,
)


def ids(hits: list[Any]) -> list[str]:
    return [hit.record.record_id for hit in hits]


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(records=RECORDS, limit=st.sampled_from([1, 3, 5, 10]))
def test_salience_on_postgresql_equals_the_in_memory_order_with_ties(
    pg_database: str,
    tmp_path_factory: pytest.TempPathFactory,
    records: list[tuple[float, str, float, bool]],
    limit: int,
) -> None:
    clocks = [FakeClock(), FakeClock()]
    folder = tmp_path_factory.mktemp("salience")
    stores = [str(folder / "memory.db"), pg_helpers.new_schema(pg_database)]
    engines = [MemoryEngine(store, clock=clock) for store, clock in zip(stores, clocks)]
    try:
        for n, (importance, tag, pause, _) in enumerate(records):
            for engine, clock in zip(engines, clocks):
                engine.store(f"note {n}", tags=[tag], importance=importance)
                clock.advance(pause)
        for n, (importance, tag, _, again) in enumerate(records):
            if again:
                for engine, clock in zip(engines, clocks):
                    engine.store(f"note {n}", tags=[tag], importance=importance)
                    clock.advance(30.0)
        for later in (0.0, 40 * DAY):
            for clock in clocks:
                clock.advance(later)
            for gates in ({}, {"tags": ["a"]}, {"tags": ["b"]}):
                sqlite, postgres = (ids(e.query(limit=limit, **gates)) for e in engines)
                assert postgres == sqlite, gates
    finally:
        for engine in engines:
            engine.close()


#: A record: importance (each tier, many ties), a tier label or none, a tag,
#: seconds to the next store, and days until it is reinforced (None: never).
TIERED = st.lists(
    st.tuples(
        st.sampled_from([0.1, 0.3, 0.5, 0.5, 0.5, 0.97]),
        st.sampled_from([None, None, None, "working", "permanent"]),
        st.sampled_from(["a", "b"]),
        st.sampled_from([0.0, 0.0, 60.0]),
        st.sampled_from([None, None, 0.0, 2.0, 30.0]),
    ),
    min_size=1,
    max_size=50,
)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@example(records=[(0.5, None, "a", 0.0, None)] * 6, limit=1, floor=0.0, sparse_rows=1)  # all tied
@given(
    records=TIERED,
    limit=st.sampled_from([1, 3, 5]),
    floor=st.sampled_from([0.0, 0.0, 0.2]),
    sparse_rows=st.sampled_from([1, 4, 2048]),
)
def test_salience_by_decay_class_equals_the_in_memory_order(
    pg_database: str,
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
    records: list[tuple[float, str | None, str, float, float | None]],
    limit: int,
    floor: float,
    sparse_rows: int,
) -> None:
    """Every tier, tier labels and reinforcements spaced in time: each decay
    class of the database's order (its own half-life, or a bucket of them).
    Each class's first read is one more than the limit, so reads go on, and
    scans a short stretch of its class, so that classes whose gated records
    are sparser are read through the gates' indexes: at once where the gates
    pass at most ``sparse_rows`` records, or after a deeper stretch."""
    monkeypatch.setattr(pg_rows, "PREFIX", 1)
    monkeypatch.setattr(pg_rows, "DEEP_PREFIX", 3)
    monkeypatch.setattr(pg_rows, "SPARSE_ROWS", sparse_rows)
    clocks = [FakeClock(), FakeClock()]
    folder = tmp_path_factory.mktemp("decay")
    stores = [str(folder / "memory.db"), pg_helpers.new_schema(pg_database)]
    engines = [MemoryEngine(store, clock=clock) for store, clock in zip(stores, clocks)]
    try:
        stored: list[list[str]] = [[], []]
        for n, (importance, tier, tag, pause, _) in enumerate(records):
            metadata = {"tier": tier} if tier else None
            for side, (engine, clock) in enumerate(zip(engines, clocks)):
                rec = engine.store(
                    f"note {n}", tags=[tag], importance=importance, metadata=metadata
                )
                stored[side].append(rec.record_id)
                clock.advance(pause)
        for day in sorted({d for *_, d in records if d is not None}):
            for clock in clocks:
                clock.advance(day * DAY)
            for n, record in enumerate(records):
                if record[-1] == day:
                    for side, engine in enumerate(engines):
                        engine.reinforce(stored[side][n])
        for later in (0.0, 3 * DAY, 400 * DAY):
            for clock in clocks:
                clock.advance(later)
            for gates in ({}, {"tags": ["a"]}, {"exclude_tags": ["a"]}):
                sqlite, postgres = (
                    ids(e.query(limit=limit, min_strength=floor, **gates)) for e in engines
                )
                assert postgres == sqlite, gates
    finally:
        for engine in engines:
            engine.close()


def test_a_tag_query_over_many_ties_reads_each_class_once(
    pg_database: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Hundreds of records at one importance, stored in one batch: the first
    read of each decay class settles the ranking, however many tie."""
    from prime_memory_folding.storage.postgres import PostgresStorage

    clock = FakeClock()
    engine = MemoryEngine(pg_helpers.new_schema(pg_database), clock=clock)
    reads: list[dict[int, int]] = []
    heads = PostgresStorage.salience_heads

    def counted(self: Any, gates: Any, limits: Any, default: int) -> Any:
        reads.append(dict(limits))
        return heads(self, gates, limits, default)

    monkeypatch.setattr(PostgresStorage, "salience_heads", counted)
    try:
        engine.store_many([{"content": f"note {n}", "tags": ["t"]} for n in range(400)])
        clock.advance(DAY)
        hits = engine.query(tags=["t"], limit=5)
        assert len(hits) == 5
        assert reads == [{}]
        # The ties break by storage order, as the in-memory ranking breaks them.
        newest = [hit.record.content for hit in hits]
        assert newest == [f"note {n}" for n in range(5)]
    finally:
        engine.close()


@pytest.mark.parametrize("sparse_rows", [2048, 4])
def test_a_rare_tag_in_a_large_class_is_read_through_the_tag_index(
    pg_database: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sparse_rows: int
) -> None:
    """The best of a class's stretch all lack the tag: the class's records that
    have it are found by the tag and sorted, as SQLite ranks them; at once when
    the tag has few records, after a deeper stretch when it has more than
    ``sparse_rows``."""
    from prime_memory_folding.storage.postgres import PostgresStorage

    monkeypatch.setattr(pg_rows, "PREFIX", 5)
    monkeypatch.setattr(pg_rows, "DEEP_PREFIX", 10)
    monkeypatch.setattr(pg_rows, "SPARSE_ROWS", sparse_rows)
    stretches: list[int] = []
    heads = PostgresStorage._heads

    def counted(self: Any, gates: Any, limits: Any, default: int, *more: Any) -> Any:
        stretches.append(more[0])
        return heads(self, gates, limits, default, *more)

    monkeypatch.setattr(PostgresStorage, "_heads", counted)
    clocks = [FakeClock(), FakeClock()]
    stores = [str(tmp_path / "memory.db"), pg_helpers.new_schema(pg_database)]
    engines = [MemoryEngine(store, clock=clock) for store, clock in zip(stores, clocks)]
    try:
        for n in range(40):  # older: the rare tag; newer: the common one
            tag = "rare" if n < 12 else "common"
            for engine, clock in zip(engines, clocks):
                engine.store(f"note {n}", tags=[tag])
                clock.advance(60.0)
        for clock in clocks:
            clock.advance(DAY)
        sqlite, postgres = (ids(e.query(tags=["rare"], limit=3)) for e in engines)
        assert postgres == sqlite
        assert [engines[1].get(rid).content for rid in postgres] == [
            "note 11",
            "note 10",
            "note 9",
        ]
        # Twelve records hold the tag: the deeper stretch only past that many.
        assert stretches == ([5] if sparse_rows > 12 else [5, 10])
    finally:
        for engine in engines:
            engine.close()


def test_metadata_with_a_nul_is_stored_and_ranked(pg_url: str) -> None:
    """PostgreSQL's jsonb holds no NUL: such metadata has no tier label there,
    and the record is stored and found as any other."""
    with MemoryEngine(pg_url) as engine:
        rec = engine.store("odd metadata", tags=["t"], metadata={"\x00": "x"})
        assert ids(engine.query(tags=["t"])) == [rec.record_id]


def test_the_store_columns_compute_the_default_decay() -> None:
    """The generated columns' constants are the default policy's, and the most
    spaced reinforcements they count are the ones the engine counts."""
    from prime_memory_folding.engine.pushdown import decay_matches
    from prime_memory_folding.fold.folding import FoldPolicy, half_life
    from prime_memory_folding.storage.pg_decay import STORE_DECAY

    policy = FoldPolicy()
    assert decay_matches(policy, STORE_DECAY)
    assert not decay_matches(FoldPolicy(long_term_half_life=30 * DAY), STORE_DECAY)
    base = policy.base_half_life("working")
    most = half_life(policy, "working", 0.0, 1e9 * base, 10**9)
    assert most == base * STORE_DECAY.spacing_factor**STORE_DECAY.max_spaced
