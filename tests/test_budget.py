"""Token budgets: the count errs high, a budget is never exceeded, and bad budgets are refused."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from prime_memory_folding import InvalidInput, MemoryEngine
from prime_memory_folding.core.records import Hit, Record
from prime_memory_folding.engine.budget import (
    CUT_MARK,
    MAX_BUDGET,
    MIN_BUDGET,
    count_tokens,
    fit,
    hit_cost,
)


@pytest.fixture
def engine(backend_engine: MemoryEngine) -> MemoryEngine:
    """The engine of these tests runs on each backend."""
    return backend_engine


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", 0),
        ("hello", 1),
        ("hello world", 2),
        ("internationalization", 1 + 3),  # 20 letters: 1 + ceil(13 / 5)
        ("2026", 2),  # digits go in runs of up to three
        ("a, b.", 4),
        ("  ", 1),
        ("東京タワー", 5),
    ],
)
def test_the_count_prices_each_piece(text: str, expected: int) -> None:
    assert count_tokens(text) == expected


def _hit(n: int, content: str) -> Hit:
    record = Record(
        record_id=f"{n:032x}",
        address=n,
        domain="memory",
        subdomain="general",
        tags=("note",),
        tag_product=2,
        content=content,
        importance=0.5,
        strength=1.0,
        created_at=0.0,
        updated_at=0.0,
        accessed_at=0.0,
        access_count=0,
    )
    return Hit(record=record, score=1.0 / (n + 1), score_parts={"salience": 0.5})


words = st.text(alphabet="abcdefghij klmnopqrstuvwxyz,.東", min_size=1, max_size=600)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(words.filter(str.strip), max_size=12), st.integers(MIN_BUDGET, 2_000))
def test_a_budget_is_never_exceeded_and_never_empty(contents: list[str], budget: int) -> None:
    hits = [_hit(n, text) for n, text in enumerate(contents)]
    fitted = fit(hits, budget)
    assert fitted.tokens_used == sum(hit_cost(hit) for hit in fitted) <= budget
    assert bool(fitted) == bool(hits)
    assert fitted.left_out == len(hits) - len(fitted)
    # Best first: whole hits are a prefix, and only a lone first hit may be cut.
    whole = [h for h in fitted if not h.record.content.endswith(CUT_MARK)]
    assert [h.record.record_id for h in whole] == [h.record.record_id for h in hits[: len(whole)]]
    assert fitted.cut == (len(whole) < len(fitted))
    if fitted.cut:
        assert len(fitted) == 1 and hit_cost(hits[0]) > budget
    if fitted.left_out and not fitted.cut:
        assert fitted.tokens_used + hit_cost(hits[len(fitted)]) > budget


def test_a_first_hit_over_the_budget_is_cut_with_a_mark(engine: MemoryEngine) -> None:
    engine.store(" ".join(f"word{n}" for n in range(2_000)), importance=0.9)
    engine.store("a short note")
    hits = engine.query(max_tokens=MIN_BUDGET)
    assert len(hits) == 1 and hits[0].record.content.endswith(CUT_MARK)
    assert hits.tokens_used <= MIN_BUDGET and hits.left_out == 1 and hits.cut  # type: ignore[attr-defined]
    assert engine.query(max_tokens=MAX_BUDGET)[0].record.content.startswith("word0 word1")


@pytest.mark.parametrize("bad", [0, -5, MIN_BUDGET - 1, MAX_BUDGET + 1, 2.5, "100", True])
def test_a_bad_budget_is_a_clear_error(engine: MemoryEngine, bad: object) -> None:
    engine.store("a note")
    with pytest.raises(InvalidInput, match="max_tokens"):
        engine.query(max_tokens=bad)  # type: ignore[arg-type]


def test_without_a_budget_a_query_is_unchanged(engine: MemoryEngine) -> None:
    for n in range(5):
        engine.store(f"note {n} " + "padding " * 50)
    everything = engine.query(limit=5)
    budgeted = engine.query(limit=5, max_tokens=200)
    assert type(everything) is list and len(everything) == 5
    assert [h.record.record_id for h in budgeted] == [
        h.record.record_id for h in everything[: len(budgeted)]
    ]
    assert budgeted.left_out == 5 - len(budgeted) > 0  # type: ignore[attr-defined]
