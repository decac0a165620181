"""The soft priors text recall adds to the fused score."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from prime_memory_folding.recall.priors import MIN_TIME_SCALE, time_closeness

DAY = 86_400.0
START, END = 1_700_000_000.0, 1_700_000_000.0 + 30 * DAY


@pytest.mark.parametrize(
    ("stamp", "expected"),
    [
        (START, 1.0),
        (END - 1, 1.0),
        (END + 15 * DAY, np.exp(-1.0)),  # half the window's length past its end
        (START - 30 * DAY, np.exp(-2.0)),
    ],
)
def test_closeness_is_one_inside_and_falls_off_outside(stamp: float, expected: float) -> None:
    closeness = time_closeness(np.array([stamp]), (START, END), tail=0.5)
    assert closeness[0] == pytest.approx(expected)


def test_a_short_window_falls_off_as_slowly_as_a_week() -> None:
    day = (START, START + DAY)
    later = np.array([START + DAY + MIN_TIME_SCALE])
    assert time_closeness(later, day, tail=1.0)[0] == pytest.approx(np.exp(-1.0))


@given(
    st.lists(st.floats(START - 400 * DAY, END + 400 * DAY), min_size=2, max_size=20),
    st.floats(0.1, 4.0),
)
def test_closeness_never_grows_with_distance_from_the_window(
    stamps: list[float], tail: float
) -> None:
    times = np.array(sorted(stamps))
    closeness = time_closeness(times, (START, END), tail)
    assert ((closeness > 0) & (closeness <= 1)).all()
    after = times >= END
    before = times < START
    assert (np.diff(closeness[after]) <= 1e-12).all()
    assert (np.diff(closeness[before]) >= -1e-12).all()
