"""Time gates: what since and until read, and that they equal set semantics."""

from __future__ import annotations

import json
from datetime import date, datetime, timezone
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from prime_memory_folding import InvalidInput, MemoryEngine
from prime_memory_folding.when import parse_when
from tests.backends import emptied, examples
from tests.cli_helpers import one_line_error
from tests.conftest import FakeClock

NOW = 1_700_000_000.0  # 2023-11-14 22:13:20 UTC
DAY = 86_400.0


@pytest.fixture
def engine(backend_engine: MemoryEngine) -> MemoryEngine:
    """The engine of these tests runs on each backend."""
    return backend_engine


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("now", NOW),
        ("7d", NOW - 7 * DAY),
        ("7 days", NOW - 7 * DAY),
        ("7 days ago", NOW - 7 * DAY),
        ("2 weeks", NOW - 14 * DAY),
        ("2w", NOW - 14 * DAY),
        ("12h", NOW - 12 * 3_600),
        ("30 min", NOW - 1_800),
        ("1.5d", NOW - 1.5 * DAY),
        ("3 months", NOW - 3 * 2_629_746),
        ("1 year ago", NOW - 31_556_952),
        ("today", 1_699_920_000.0),
        ("yesterday", 1_699_920_000.0 - DAY),
        ("2024-05-01", 1_714_521_600.0),
        ("2024-05-01T12:00:00Z", 1_714_564_800.0),
        ("2024-05-01T12:00:00+02:00", 1_714_557_600.0),
        (1_600_000_000, 1_600_000_000.0),
        ("1600000000", 1_600_000_000.0),
        (datetime(2024, 5, 1, tzinfo=timezone.utc), 1_714_521_600.0),
        (datetime(2024, 5, 1), 1_714_521_600.0),
        (date(2024, 5, 1), 1_714_521_600.0),
    ],
)
def test_the_forms_since_and_until_read(given: Any, expected: float) -> None:
    assert parse_when(given, NOW) == pytest.approx(expected)


@pytest.mark.parametrize("bad", ["last tuesday", "7 fortnights", "", "-3d", True, None, [1]])
def test_what_is_not_a_time_is_a_clear_error(bad: Any) -> None:
    with pytest.raises(InvalidInput, match=r"not a time|since"):
        parse_when(bad, NOW, "since")


def test_time_gates_equal_set_semantics(backend_store: str) -> None:
    @examples(backend_store, sqlite=60, postgres=25)
    @given(
        st.lists(st.floats(0, 30), min_size=1, max_size=25),
        st.one_of(st.none(), st.integers(0, 3_000).map(lambda n: n / 100)),
        st.one_of(st.none(), st.integers(0, 3_000).map(lambda n: n / 100)),
    )
    def check(
        ages_in_days: list[float], since_days: float | None, until_days: float | None
    ) -> None:
        time_gates_equal_set_semantics(backend_store, ages_in_days, since_days, until_days)

    check()


def time_gates_equal_set_semantics(
    store: str, ages_in_days: list[float], since_days: float | None, until_days: float | None
) -> None:
    clock = FakeClock(NOW)
    with MemoryEngine(emptied(store), clock=clock, scope="global", embedder="none") as memory:
        stored = {}
        for n, age in enumerate(ages_in_days):
            clock.now = NOW - age * DAY
            stored[memory.store(f"note {n}", tags=["t"]).record_id] = clock.now
        clock.now = NOW
        since = None if since_days is None else f"{since_days}d"
        until = None if until_days is None else f"{until_days}d"
        start = None if since_days is None else NOW - since_days * DAY
        end = None if until_days is None else NOW - until_days * DAY
        expected = {
            rid
            for rid, stamp in stored.items()
            if (start is None or stamp >= start) and (end is None or stamp < end)
        }
        assert set(memory.match_ids(since=since, until=until)) == expected
        hits = memory.query(tags=["t"], since=since, until=until, limit=100)
        assert {h.record.record_id for h in hits} == expected


def test_a_bad_time_changes_nothing_and_names_the_gate(engine: MemoryEngine) -> None:
    engine.store("a note")
    with pytest.raises(InvalidInput, match="until"):
        engine.query(until="whenever")


def test_the_cli_and_mcp_take_since_and_until(run: Any, clock: FakeClock) -> None:
    assert run("store", "old decision", "-d", "decision").exit_code == 0
    clock.advance(10 * DAY)
    assert run("store", "new decision", "-d", "decision").exit_code == 0
    recent = json.loads(run("query", "-d", "decision", "--since", "7d", "--json").stdout)
    assert [hit["record"]["content"] for hit in recent] == ["new decision"]
    older = json.loads(run("query", "-d", "decision", "--until", "1 week ago", "--json").stdout)
    assert [hit["record"]["content"] for hit in older] == ["old decision"]
    one_line_error(run("query", "--since", "someday"), "not a time")
