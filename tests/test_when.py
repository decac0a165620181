"""Time gates: what since and until read, and that they equal set semantics."""

from __future__ import annotations

import json
from datetime import date, datetime, timezone
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from prime_memory_folding import InvalidInput, MemoryEngine
from prime_memory_folding.core.when import parse_when, time_window
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


# -- time expressions in a query's text ---------------------------------------------

TUESDAY = "2023-11-14T22:13:20"  # NOW
SATURDAY = "2024-03-02T09:00:00"  # in a leap year


def at(moment: str) -> float:
    return datetime.fromisoformat(moment).replace(tzinfo=timezone.utc).timestamp()


@pytest.mark.parametrize(
    ("text", "asked", "start", "end"),
    [
        ("what did we decide yesterday?", TUESDAY, "2023-11-13", "2023-11-14"),
        ("today", TUESDAY, "2023-11-14", "2023-11-15"),
        ("the day before yesterday", TUESDAY, "2023-11-12", "2023-11-13"),
        ("notes from last week", TUESDAY, "2023-11-06", "2023-11-13"),
        ("this week", TUESDAY, "2023-11-13", "2023-11-20"),
        ("last weekend", TUESDAY, "2023-11-11", "2023-11-13"),
        ("last month", TUESDAY, "2023-10-01", "2023-11-01"),
        ("the bug we fixed in May", TUESDAY, "2023-05-01", "2023-06-01"),
        ("in December", TUESDAY, "2022-12-01", "2023-01-01"),
        ("in November", TUESDAY, "2023-11-01", "2023-12-01"),
        ("last November", TUESDAY, "2022-11-01", "2022-12-01"),
        ("early May", TUESDAY, "2023-05-01", "2023-05-11T08:00:00"),
        ("two years ago", TUESDAY, "2021-01-01", "2022-01-01"),
        ("3 days ago", TUESDAY, "2023-11-11", "2023-11-12"),
        ("a couple of weeks ago", TUESDAY, "2023-10-30", "2023-11-06"),
        ("a few days ago", TUESDAY, "2023-11-10", "2023-11-13"),
        ("3 hours ago", TUESDAY, "2023-11-14T18:43:20", "2023-11-14T19:43:20"),
        ("the past 3 days", TUESDAY, "2023-11-11T22:13:20", TUESDAY),
        ("2023", TUESDAY, "2023-01-01", "2024-01-01"),
        ("in 2021 and 2022", TUESDAY, "2021-01-01", "2023-01-01"),
        ("May 2022", TUESDAY, "2022-05-01", "2022-06-01"),
        ("8 May 2023", TUESDAY, "2023-05-08", "2023-05-09"),
        ("May 8th", TUESDAY, "2023-05-08", "2023-05-09"),
        ("December 25", TUESDAY, "2022-12-25", "2022-12-26"),
        ("December 1,2023", TUESDAY, "2023-12-01", "2023-12-02"),
        ("February 30, 2023", TUESDAY, "2023-01-01", "2024-01-01"),  # no such day: its year
        ("2023-05-08", TUESDAY, "2023-05-08", "2023-05-09"),
        ("last Friday", TUESDAY, "2023-11-10", "2023-11-11"),
        ("on Tuesday", TUESDAY, "2023-11-14", "2023-11-15"),
        ("last Tuesday", TUESDAY, "2023-11-07", "2023-11-08"),
        ("last summer", TUESDAY, "2023-06-01", "2023-09-01"),
        ("in the winter", TUESDAY, "2022-12-01", "2023-03-01"),
        ("since March", TUESDAY, "2023-03-01", TUESDAY),
        ("before May 2023", TUESDAY, "2023-03-31", "2023-05-01"),
        ("last Friday, as mentioned on 23 May 2022", TUESDAY, "2022-05-23", "2022-05-24"),
        ("yesterday", SATURDAY, "2024-03-01", "2024-03-02"),
        ("last week", SATURDAY, "2024-02-19", "2024-02-26"),
        ("last weekend", SATURDAY, "2024-02-24", "2024-02-26"),
        ("this weekend", SATURDAY, "2024-03-02", "2024-03-04"),
        ("in May", SATURDAY, "2023-05-01", "2023-06-01"),
        ("last month", SATURDAY, "2024-02-01", "2024-03-01"),
        ("two years ago", SATURDAY, "2022-01-01", "2023-01-01"),
        ("a month ago", SATURDAY, "2024-02-01", "2024-03-01"),
        ("last winter", SATURDAY, "2023-12-01", "2024-03-01"),
        ("last Saturday", SATURDAY, "2024-02-24", "2024-02-25"),
        ("next week", SATURDAY, "2024-03-04", "2024-03-11"),
    ],
)
def test_time_expressions_name_their_window(text: str, asked: str, start: str, end: str) -> None:
    window = time_window(text, at(asked))
    assert window is not None
    assert (window.start, window.end) == (at(start), at(end))


@pytest.mark.parametrize(
    "text",
    [
        "May I ask what you think?",
        "this may be wrong",
        "the Spring Fling Market",
        "Summer Sounds played",
        "how long ago was it",
        "a march through town",
        "the 1990s",
        "due by June",
        "",
        # Four digits that are not years: lines, codes, ports, versions, counts.
        "the retry logic is around line 2024 of client.py",
        "what does error 1999 mean?",
        "we run postgres 2019 edition",
        "the dev server listens on port 2020",
        "bump the schema to version 2015",
        "ticket 2021 is still open",
        "the 2019 release notes",
        "a batch of 2000 records",
        "the cache holds 2048 bytes",
        "in 2048 bytes or less",
        "HTTP 2000 handler",
        "python 3.9 or 3.12?",
    ],
)
def test_words_that_only_look_like_times_name_no_window(text: str) -> None:
    assert time_window(text, NOW) is None


@pytest.mark.parametrize(
    ("text", "phrases"),
    [
        ("2023", ("2023",)),
        ("what did we decide in 2023?", ("2023",)),
        ("changes since 2021", ("since 2021",)),
        ("the outage during 2020", ("2020",)),
        ("from 2019 to 2021", ("2019", "2021")),
        ("in 2021 and 2022", ("2021", "2022")),
        ("by the end of 2019", ("2019",)),
        ("the year 2018", ("2018",)),
        ("ticket 2021 was fixed in 2022", ("2022",)),
        ("8 May 2023", ("8 May 2023",)),
        ("summer 2023", ("summer 2023",)),
    ],
)
def test_a_bare_number_is_a_year_only_where_it_names_a_time(
    text: str, phrases: tuple[str, ...]
) -> None:
    window = time_window(text, NOW)
    assert window is not None and window.phrases == phrases


def test_a_window_says_which_words_it_read() -> None:
    window = time_window("what changed since March, and last Friday?", NOW)
    assert window is not None
    assert window.phrases == ("since March", "last Friday")


_SPANS = st.sampled_from(
    ["yesterday", "today", "last week", "3 days ago", "last Friday", "the past 2 weeks"]
)
_MOMENTS = st.floats(86_400 * 400, 4_000_000_000)


@given(_SPANS, _MOMENTS, st.integers(-500, 500))
def test_day_and_week_windows_move_with_the_query_time(text: str, now: float, weeks: int) -> None:
    moved = now + weeks * 7 * DAY
    here, there = time_window(text, now), time_window(text, moved)
    assert here is not None and there is not None
    assert there.start - here.start == pytest.approx(weeks * 7 * DAY)
    assert there.end - here.end == pytest.approx(weeks * 7 * DAY)


@given(
    st.sampled_from(
        ["in May", "last summer", "two years ago", "a few weeks ago", "last month", "8 May"]
    ),
    _MOMENTS,
)
def test_a_past_window_begins_by_the_query_time(text: str, now: float) -> None:
    window = time_window(text, now)
    assert window is not None
    assert window.start < window.end
    assert window.start <= now


@given(st.text(max_size=60), _MOMENTS)
def test_any_text_reads_without_error(text: str, now: float) -> None:
    window = time_window(text, now)
    assert window is None or window.start < window.end
