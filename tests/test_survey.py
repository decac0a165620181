"""The read-only views the inspector draws from: browse, decay, the archive listing, the profile,
and a fold that keeps chosen groups apart."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prime_memory_folding import MemoryEngine
from prime_memory_folding.errors import InvalidInput, NotFound
from tests.conftest import FakeClock

DAY = 86_400.0


def _two_groups(engine: MemoryEngine, clock: FakeClock) -> tuple[list[str], list[str], str]:
    lint = [
        engine.store(text, subdomain="procedural", tags=["lint"], vector=vector).record_id
        for text, vector in (
            ("Run make lint before pushing; CI fails on any warning.", [1.0, 0.0, 0.0]),
            ("Run make lint before you push; CI fails on any warning.", [0.99, 0.1, 0.0]),
        )
    ]
    deploy = [
        engine.store(text, subdomain="procedural", tags=["deploy"], vector=vector).record_id
        for text, vector in (
            ("Deploy with make release after the tag is pushed.", [0.0, 1.0, 0.0]),
            ("Deploy with make release once the tag is pushed.", [0.1, 0.99, 0.0]),
        )
    ]
    scratch = engine.store("Scratch note", importance=0.1, vector=[0.0, 0.0, 1.0]).record_id
    clock.advance(30 * DAY)
    return lint, deploy, scratch


def test_browse_orders_pages_and_counts(engine: MemoryEngine, clock: FakeClock) -> None:
    ids = []
    for n in range(7):
        ids.append(engine.store(f"note {n}", importance=0.1 + n / 10, tags=["t"]).record_id)
        clock.advance(60)
    page = engine.browse(order="newest", limit=3)
    assert page.total == 7
    assert [h.record.record_id for h in page.hits] == ids[::-1][:3]
    second = engine.browse(order="newest", offset=3, limit=3)
    assert [h.record.record_id for h in second.hits] == ids[::-1][3:6]
    oldest = engine.browse(order="oldest", limit=2)
    assert [h.record.record_id for h in oldest.hits] == ids[:2]
    by_importance = engine.browse(order="importance", limit=7)
    importances = [h.score_parts["importance"] for h in by_importance.hits]
    assert importances == sorted(importances, reverse=True)


def test_browse_gates_on_strength_and_time(engine: MemoryEngine, clock: FakeClock) -> None:
    old = engine.store("old and weak", importance=0.1).record_id
    clock.advance(3 * DAY)  # a working memory halves each day
    fresh = engine.store("fresh", importance=0.1).record_id
    weak = engine.browse(max_strength=0.5)
    assert [h.record.record_id for h in weak.hits] == [old]
    assert weak.hits[0].score_parts["strength"] == pytest.approx(0.125)
    recent = engine.browse(updated_after=clock.now - DAY)
    assert [h.record.record_id for h in recent.hits] == [fresh]
    before = engine.browse(updated_before=clock.now - DAY)
    assert [h.record.record_id for h in before.hits] == [old]


def test_browse_among_keeps_the_given_order_and_the_gates(engine: MemoryEngine) -> None:
    a = engine.store("a", tags=["x"]).record_id
    b = engine.store("b", tags=["y"]).record_id
    c = engine.store("c", tags=["x"]).record_id
    page = engine.browse(among=[c, "0" * 32, b, a], order="given", tags=["x"])
    assert [h.record.record_id for h in page.hits] == [c, a]


@pytest.mark.parametrize(
    "bad",
    [
        {"order": "sideways"},
        {"order": "given"},
        {"limit": -1},
        {"offset": 1.5},
        {"max_strength": 2.0},
        {"updated_after": float("nan")},
        {"among": "mem_x"},
    ],
)
def test_browse_refuses_bad_arguments(engine: MemoryEngine, bad: dict[str, object]) -> None:
    with pytest.raises(InvalidInput):
        engine.browse(**bad)  # type: ignore[arg-type]


@settings(max_examples=20, deadline=None)
@given(st.lists(st.floats(0.0, 1.0), min_size=1, max_size=12), st.integers(1, 5))
def test_browse_pages_partition_the_matches(importances: list[float], size: int) -> None:
    with MemoryEngine(":memory:", clock=FakeClock()) as engine:
        for n, weight in enumerate(importances):
            engine.store(f"note {n}", importance=weight)
        seen: list[str] = []
        offset = 0
        while True:
            page = engine.browse(order="salience", offset=offset, limit=size)
            if not page.hits:
                break
            seen.extend(h.record.record_id for h in page.hits)
            offset += size
        assert sorted(seen) == sorted(engine.match_ids())
        assert len(seen) == len(set(seen)) == page.total


def test_decay_matches_the_strength_queries_see(engine: MemoryEngine, clock: FakeClock) -> None:
    rid = engine.store("decaying", importance=0.1).record_id
    clock.advance(DAY)
    state = engine.decay(rid)
    assert state.tier == "working"
    assert state.half_life == pytest.approx(DAY)
    assert state.strength_now == pytest.approx(0.5)
    assert state.at(state.since + 2 * DAY) == pytest.approx(0.25)
    hit = engine.query(limit=1)[0]
    assert hit.score_parts["strength"] == pytest.approx(state.strength_now)
    with pytest.raises(NotFound):
        engine.decay("0" * 32)


def test_archive_entries_filter_and_page(engine: MemoryEngine, clock: FakeClock) -> None:
    lint, deploy, scratch = _two_groups(engine, clock)
    report = engine.fold()
    listing = engine.archive_entries()
    assert listing.total == 5
    assert {e.record.record_id for e in listing.entries} == {*lint, *deploy, scratch}
    pruned = engine.archive_entries(reason="pruned")
    assert [(e.record.record_id, e.reason) for e in pruned.entries] == [(scratch, "pruned")]
    assert "fell below" in pruned.entries[0].detail
    lint_fold = next(rid for rid, members in report.folded_from.items() if lint[0] in members)
    members = engine.archive_entries(record_id=lint_fold)
    assert {e.record.record_id for e in members.entries} == set(lint)
    assert all(e.folded_into == lint_fold for e in members.entries)
    found = engine.archive_entries(contains="DEPLOY WITH")
    assert {e.record.record_id for e in found.entries} == set(deploy)
    paged = engine.archive_entries(limit=2, offset=4)
    assert (paged.total, len(paged.entries)) == (5, 1)
    with pytest.raises(InvalidInput):
        engine.archive_entries(reason="lost")


def test_profile_lists_every_live_record(engine: MemoryEngine, clock: FakeClock) -> None:
    a = engine.store("a", importance=0.1).record_id
    b = engine.store("b", importance=0.9).record_id
    engine.reinforce(b)
    clock.advance(DAY)
    found = engine.profile()
    columns = dict(zip(found.record_ids, zip(found.access_count, found.strength_now)))
    assert columns[a] == (0, pytest.approx(0.5))
    assert columns[b][0] == 1
    assert found.created_at == (clock.now - DAY, clock.now - DAY)
    assert found.last_fold_at is None
    engine.fold(dry_run=True)
    assert engine.profile().last_fold_at is None
    engine.fold()
    assert engine.profile().last_fold_at == clock.now


def test_a_fold_keeps_chosen_groups_apart(engine: MemoryEngine, clock: FakeClock) -> None:
    lint, deploy, scratch = _two_groups(engine, clock)
    preview = engine.fold(dry_run=True)
    assert preview.clustered == 2
    assert set(preview.summaries) == set(preview.folded_from)
    assert all(preview.summaries[rid] for rid in preview.summaries)
    assert list(preview.pruned_strengths) == [scratch]
    assert preview.pruned_strengths[scratch] < engine.fold_policy.prune_below
    report = engine.fold(keep_apart=[deploy[1]], now=preview.now)
    assert report.clustered == 1
    assert [set(m) for m in report.folded_from.values()] == [set(lint)]
    assert set(engine.match_ids()) == {*deploy, *report.created_ids}
    with pytest.raises(InvalidInput):
        engine.fold(keep_apart=deploy[0])


def test_retag_adds_and_removes_tags_all_or_nothing(engine: MemoryEngine) -> None:
    a = engine.store("a", tags=["old", "keep"]).record_id
    b = engine.store("b", tags=["keep"]).record_id
    changed = engine.retag([a, b], add=["new"], remove=["old"])
    assert {r.record_id for r in changed} == {a, b}
    assert engine.get(a).tags == ("keep", "new")
    assert set(engine.match_ids(tags=["new", "keep"])) == {a, b}
    assert engine.match_ids(tags=["old"]) == []
    assert engine.retag([a], add=["new"]) == []
    before = engine.get(b)
    with pytest.raises(NotFound):
        engine.retag([b, "0" * 32], add=["other"])
    with pytest.raises(InvalidInput):
        engine.retag([b], add=["x"], remove=["x"])
    with pytest.raises(InvalidInput):
        engine.retag([b])
    assert engine.get(b) == before


def test_retag_refuses_to_make_two_records_identical(engine: MemoryEngine) -> None:
    a = engine.store("same", tags=["x"]).record_id
    b = engine.store("same", tags=["y"]).record_id
    with pytest.raises(InvalidInput, match="same content"):
        engine.retag([a, b], remove=["x", "y"])
    assert (engine.get(a).tags, engine.get(b).tags) == (("x",), ("y",))


def test_archive_by_hand_moves_records_and_restore_brings_them_back(
    engine: MemoryEngine,
) -> None:
    a = engine.store("a").record_id
    b = engine.store("b").record_id
    with pytest.raises(NotFound):
        engine.archive([a, "0" * 32])
    assert set(engine.match_ids()) == {a, b}
    assert engine.archive([a, b], detail="forgotten in a review") == 2
    assert engine.match_ids() == []
    listing = engine.archive_entries()
    assert {(e.record.record_id, e.detail) for e in listing.entries} == {
        (a, "forgotten in a review"),
        (b, "forgotten in a review"),
    }
    assert engine.restore(a).content == "a"
    assert engine.match_ids() == [a]
    with pytest.raises(InvalidInput):
        engine.archive([b], detail=" ")


def test_browsing_reads_only_the_gated_records_where_the_store_gates(
    backend_store: str, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    with MemoryEngine(backend_store, clock=clock, embedder="none") as memory:
        alpha = [
            memory.store(f"alpha {i}", domain="a", importance=0.1 * (i + 1)).record_id
            for i in range(5)
        ]
        memory.store("beta", domain="b", importance=1.0)
        if backend_store.startswith("postgresql"):
            # PostgreSQL gates in its database: a page reads a window, never the whole index.
            def whole_index() -> None:
                raise AssertionError("browsing read the whole index")

            monkeypatch.setattr(memory.storage, "index_table", whole_index)
        page = memory.browse(domain="a", order="importance", limit=3)
        assert page.total == 5
        assert [h.record.content for h in page.hits] == ["alpha 4", "alpha 3", "alpha 2"]
        given = memory.browse(among=[alpha[1], alpha[0], "0" * 32], order="given")
        assert [h.record.record_id for h in given.hits] == [alpha[1], alpha[0]]
        assert memory.browse(domain="nowhere").total == 0
