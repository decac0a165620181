"""Salience reads on PostgreSQL rank as the in-memory index does, ties and decay included."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from prime_memory_folding import MemoryEngine
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
