"""The ranking settings: one frozen value, checked on the way in, that queries read."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from prime_memory_folding import InvalidInput, MemoryEngine, RankingSettings
from tests.conftest import FakeClock

DEFAULTS = RankingSettings()


@pytest.mark.parametrize(
    "changes",
    [
        {"cosine_weight": 1.5},
        {"cosine_weight": -0.1},
        {"context_reach": 1.5},
        {"lend_docs": "5"},
        {"ask_penalty": True},
        {"time_weight": float("nan")},
        {"exact_store": 0},
        {"long_query_shift": 2.0},
    ],
)
def test_a_bad_setting_is_a_clear_error(changes: dict[str, Any]) -> None:
    with pytest.raises(InvalidInput, match=next(iter(changes))):
        RankingSettings(**changes)


def test_settings_are_frozen_and_changed_by_copy() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        DEFAULTS.cosine_weight = 0.1  # type: ignore[misc]
    changed = DEFAULTS.but(cosine_weight=0.5)
    assert changed.cosine_weight == 0.5 and DEFAULTS.cosine_weight == 0.7
    with pytest.raises(InvalidInput, match="cosine_wieght"):
        DEFAULTS.but(cosine_wieght=0.5)


def test_parts_off_keeps_only_the_fusion() -> None:
    off = DEFAULTS.parts_off()
    assert off.cosine_weight == DEFAULTS.cosine_weight
    for name in (
        "long_query_shift",
        "context_weight",
        "context_pool",
        "time_weight",
        "query_idf",
        "ask_penalty",
        "lend_weight",
    ):
        assert getattr(off, name) == 0


@given(
    words=st.integers(0, 200),
    more=st.integers(0, 50),
    cosine=st.floats(0.0, 1.0),
    shift=st.floats(0.0, 1.0),
    start=st.integers(0, 40),
)
def test_a_longer_query_never_leans_more_on_cosine(
    words: int, more: int, cosine: float, shift: float, start: int
) -> None:
    settings = RankingSettings(cosine_weight=cosine, long_query_shift=shift, long_query_words=start)
    short, longer = settings.for_query(words), settings.for_query(words + more)
    assert longer.cosine_weight <= short.cosine_weight <= cosine
    assert short.cosine_weight >= max(cosine - shift, 0.0) - 1e-12
    if words <= start:
        assert short == settings


def test_the_engine_takes_settings_and_refuses_anything_else(clock: FakeClock) -> None:
    with MemoryEngine(":memory:", clock=clock, ranking=DEFAULTS.but(lend_weight=0)) as memory:
        assert memory.ranking.lend_weight == 0
        memory.ranking = DEFAULTS
        assert memory.ranking == DEFAULTS
        with pytest.raises(InvalidInput, match="RankingSettings"):
            memory.ranking = {"cosine_weight": 0.5}  # type: ignore[assignment]
    with pytest.raises(InvalidInput, match="RankingSettings"):
        MemoryEngine(":memory:", ranking="fast")  # type: ignore[arg-type]


LONG = (
    "the deploy pipeline keeps failing because the staging database migration "
    "times out while the release job waits for health checks on every service, "
    "and the rollback script never restores the previous container image"
)


@pytest.mark.parametrize(("query", "long"), [("deploy pipeline", False), (LONG, True)])
def test_a_long_query_weighs_its_words_more_than_its_vector(
    backend_store: str, clock: FakeClock, query: str, long: bool
) -> None:
    notes = [
        "The deploy pipeline runs the staging migration before the release job.",
        "Health checks on every service gate the release.",
        "We keep the database small.",
    ]
    settings = DEFAULTS.but(lend_weight=0)
    with MemoryEngine(backend_store, clock=clock, embedder="builtin", ranking=settings) as memory:
        memory.store_many(notes)
        hits = memory.query(query)
    cosine = DEFAULTS.cosine_weight - (DEFAULTS.long_query_shift if long else 0.0)
    assert hits
    for hit in hits:
        parts = hit.score_parts
        expected = (1 - cosine) * parts["bm25_norm"] + cosine * max(parts["cosine"], 0.0)
        assert parts["fused"] == pytest.approx(expected)
