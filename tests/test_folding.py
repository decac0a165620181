"""Folding: decay, prune, cluster, merge, and their undo."""

from __future__ import annotations

import itertools
import multiprocessing
import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from prime_memory_folding import FoldPolicy, InvalidInput, MemoryEngine, NotFound, Record
from prime_memory_folding.fold.folding import (
    TIERS,
    FoldReport,
    cluster,
    decay_columns,
    decay_terms,
    half_life,
    summarise,
)
from tests.conftest import FakeClock

DAY = 86_400.0
DIM = 8


def unit(seed: int, dim: int = DIM) -> list[float]:
    return np.random.default_rng(seed).normal(size=dim).tolist()


def near(vector: list[float], seed: int, noise: float = 0.02) -> list[float]:
    jitter = np.random.default_rng(seed).normal(scale=noise, size=len(vector))
    return (np.asarray(vector) + jitter).tolist()


def strength_now(engine: MemoryEngine, record_id: str) -> float:
    hits = engine.query(limit=10_000)
    return next(h.score_parts["strength"] for h in hits if h.record.record_id == record_id)


def dump(path: Path) -> list[str]:
    db = sqlite3.connect(path)
    try:
        return list(db.iterdump())
    finally:
        db.close()


def live_ids(engine: MemoryEngine) -> set[str]:
    return set(engine.match_ids())


def archive_rows(engine: MemoryEngine) -> list[tuple[Any, ...]]:
    db = engine.storage.db  # type: ignore[attr-defined]
    return list(db.execute("SELECT record_id, reason, folded_into FROM archive ORDER BY seq"))


# -- decay ----------------------------------------------------------------------


@pytest.mark.parametrize("tier", ["working", "short_term", "long_term"])
def test_strength_halves_every_half_life_of_its_tier(
    engine: MemoryEngine, clock: FakeClock, tier: str
) -> None:
    half = engine.fold_policy.base_half_life(tier)
    rec = engine.store("a note", metadata={"tier": tier})
    clock.advance(half)
    assert strength_now(engine, rec.record_id) == pytest.approx(0.5)
    clock.advance(half)
    assert strength_now(engine, rec.record_id) == pytest.approx(0.25)


def test_each_tier_outlasts_the_one_below() -> None:
    halves = [FoldPolicy().base_half_life(tier) for tier in TIERS]
    assert halves == sorted(halves) and len(set(halves)) == len(TIERS)


@pytest.mark.parametrize(
    ("importance", "tier"),
    [(0.1, "working"), (0.4, "short_term"), (0.5, "long_term"), (0.8, "long_term")],
)
def test_tier_follows_importance_without_a_tier_label(
    engine: MemoryEngine, clock: FakeClock, importance: float, tier: str
) -> None:
    rec = engine.store("a note", importance=importance)
    clock.advance(engine.fold_policy.base_half_life(tier))
    assert strength_now(engine, rec.record_id) == pytest.approx(0.5)


@pytest.mark.parametrize(
    ("how", "kept_after_days", "pruned_by_days"),
    [
        ({"importance": 0.1}, 1, 7),  # working notes go within a week
        ({"importance": 0.4}, 7, 60),  # short-term ones within two months
        ({}, 365, 5 * 365),  # the default: a year of silence is not enough
    ],
)
def test_a_default_fold_keeps_memories_as_long_as_their_importance_asks(
    engine: MemoryEngine,
    clock: FakeClock,
    how: dict[str, Any],
    kept_after_days: int,
    pruned_by_days: int,
) -> None:
    rec = engine.store("The user's daughter is called Ada.", **how)
    clock.advance(kept_after_days * DAY)
    assert engine.fold().pruned == 0
    assert engine.get(rec.record_id).content == rec.content
    clock.advance((pruned_by_days - kept_after_days) * DAY)
    assert engine.fold().pruned_ids == (rec.record_id,)


@pytest.mark.parametrize("how", [{"importance": 0.99}, {"metadata": {"tier": "permanent"}}])
def test_permanent_records_never_decay_or_prune(
    engine: MemoryEngine, clock: FakeClock, how: dict[str, Any]
) -> None:
    rec = engine.store("pinned", **how)
    clock.advance(10_000 * DAY)
    assert strength_now(engine, rec.record_id) == 1.0
    report = engine.fold()
    assert report.pruned == 0 and report.decayed == 0
    assert engine.get(rec.record_id) == rec


def test_spaced_reinforcement_lengthens_half_life_and_massed_does_not() -> None:
    policy = FoldPolicy()
    base = policy.short_term_half_life
    massed = half_life(policy, "short_term", 0.0, 60.0, access_count=10)
    spaced = half_life(policy, "short_term", 0.0, 2 * base, access_count=2)
    assert massed == pytest.approx(base, rel=1e-3)
    assert spaced == pytest.approx(base * policy.spacing_factor**2)
    assert half_life(FoldPolicy(spacing_factor=1.0), "short_term", 0.0, 2 * base, 2) == base


def test_reinforcing_after_a_gap_slows_later_decay(engine: MemoryEngine, clock: FakeClock) -> None:
    half = engine.fold_policy.base_half_life("short_term")
    massed = engine.store("massed", metadata={"tier": "short_term"})
    spaced = engine.store("spaced", metadata={"tier": "short_term"})
    for _ in range(3):
        clock.advance(10)
        engine.reinforce(massed.record_id)
    clock.advance(half)
    engine.reinforce(spaced.record_id)
    before = {r.record_id: strength_now(engine, r.record_id) for r in (massed, spaced)}
    clock.advance(half)
    ratio = {rid: strength_now(engine, rid) / s for rid, s in before.items()}
    assert ratio[massed.record_id] == pytest.approx(0.5, rel=1e-3)
    assert ratio[spaced.record_id] == pytest.approx(0.5**0.5, rel=1e-3)


def test_storing_again_reinforces_strength(engine: MemoryEngine, clock: FakeClock) -> None:
    rec = engine.store("note", importance=0.1)
    clock.advance(2 * DAY)
    assert strength_now(engine, rec.record_id) == pytest.approx(0.25)
    engine.store("note", importance=0.1)
    assert strength_now(engine, rec.record_id) == pytest.approx(1.0)


def test_min_strength_gate_uses_the_decayed_strength(
    engine: MemoryEngine, clock: FakeClock
) -> None:
    fast = engine.store("fades fast", importance=0.1)
    slow = engine.store("fades slowly", importance=0.8)
    assert set(engine.match_ids(min_strength=0.9)) == {fast.record_id, slow.record_id}
    clock.advance(1 * DAY)
    assert engine.match_ids(min_strength=0.9) == [slow.record_id]
    assert [h.record.record_id for h in engine.query(min_strength=0.6)] == [slow.record_id]


def test_fold_persists_decay_without_changing_effective_strength(
    engine: MemoryEngine, clock: FakeClock
) -> None:
    half = engine.fold_policy.base_half_life("long_term")
    rec = engine.store("note", importance=0.5)
    clock.advance(half)
    before = strength_now(engine, rec.record_id)
    report = engine.fold()
    assert report.decayed == 1
    assert engine.get(rec.record_id).strength == pytest.approx(0.5)
    assert strength_now(engine, rec.record_id) == pytest.approx(before)
    clock.advance(half)
    assert strength_now(engine, rec.record_id) == pytest.approx(0.25)
    with MemoryEngine(engine.path, clock=clock) as other:
        assert strength_now(other, rec.record_id) == pytest.approx(0.25)


def test_update_strength_decays_from_the_update(engine: MemoryEngine, clock: FakeClock) -> None:
    rec = engine.store("note", importance=0.1)
    clock.advance(1 * DAY)
    engine.update(rec.record_id, strength=0.8)
    assert strength_now(engine, rec.record_id) == pytest.approx(0.8)


# -- prune, restore, purge ------------------------------------------------------------


def test_faded_records_are_archived_and_restored_exactly(
    engine: MemoryEngine, clock: FakeClock
) -> None:
    weak = engine.store("faded", importance=0.1)
    kept = engine.store("kept", importance=0.8)
    clock.advance(5 * DAY)
    report = engine.fold()
    assert report.pruned == 1 and report.pruned_ids == (weak.record_id,)
    with pytest.raises(NotFound):
        engine.get(weak.record_id)
    assert archive_rows(engine) == [(weak.record_id, "pruned", None)]
    assert engine.restore(weak.record_id) == weak
    assert engine.get(weak.record_id) == weak
    assert live_ids(engine) == {weak.record_id, kept.record_id}
    assert archive_rows(engine) == []


def test_restore_refuses_ids_that_are_not_archived(engine: MemoryEngine) -> None:
    live = engine.store("live")
    with pytest.raises(InvalidInput, match="live, not archived"):
        engine.restore(live.record_id)
    with pytest.raises(NotFound, match="no archived record"):
        engine.restore("0" * 32)


def test_purge_archive_deletes_for_good(engine: MemoryEngine, clock: FakeClock) -> None:
    weak = engine.store("faded " * 2000, importance=0.1)
    clock.advance(5 * DAY)
    engine.fold()
    assert engine.purge_archive(reason="folded") == 0
    assert engine.purge_archive(before=clock.now - 1) == 0
    assert engine.purge_archive() == 1
    with pytest.raises(NotFound):
        engine.restore(weak.record_id)
    with pytest.raises(InvalidInput, match="reason"):
        engine.purge_archive(reason="everything")


# -- cluster and merge --------------------------------------------------------------


def family(engine: MemoryEngine, seed: int, n: int, **labels: Any) -> list[Record]:
    centre = unit(seed)
    return [
        engine.store(
            f"Fact {seed} variant {i}. Shared sentence {seed}.",
            vector=near(centre, i + 100 * seed),
            **labels,
        )
        for i in range(n)
    ]


def test_near_duplicates_fold_into_one_record(engine: MemoryEngine, clock: FakeClock) -> None:
    members = family(engine, 1, 3, tags=["db", "sqlite"])
    loner = engine.store("unrelated", vector=unit(99), tags=["db"])
    report = engine.fold()
    assert (report.clustered, report.folded, report.created) == (1, 3, 1)
    folded = engine.get(report.created_ids[0])
    assert sorted(folded.metadata["folded_from"]) == sorted(m.record_id for m in members)
    assert folded.tags == ("db", "folded", "sqlite")
    assert folded.content.count("Shared sentence 1.") == 1
    for m in members:
        assert m.content.split(". ")[0] in folded.content
    assert folded.importance == pytest.approx(0.6)
    assert folded.metadata["tier"] == "long_term"
    weights = np.asarray([m.vector for m in members])
    mean = (weights / np.linalg.norm(weights, axis=1, keepdims=True)).sum(axis=0)
    assert np.allclose(folded.vector, mean / np.linalg.norm(mean), atol=1e-5)
    assert live_ids(engine) == {folded.record_id, loner.record_id}
    assert engine.query(tags=["folded"])[0].record.record_id == folded.record_id


def test_records_only_fold_within_a_domain_and_shared_subdomain_or_tag(
    engine: MemoryEngine,
) -> None:
    v = unit(5)
    labels: dict[str, dict[str, Any]] = {
        "a": {"domain": "project", "subdomain": "code"},
        "b": {"domain": "task", "subdomain": "code"},
        "c": {"domain": "project", "subdomain": "test"},
        "d": {"domain": "project", "subdomain": "test", "tags": ["x"]},
        "e": {"domain": "project", "subdomain": "document", "tags": ["x"]},
    }
    ids = {
        name: engine.store(f"The build runs on Fridays, note {name}.", vector=near(v, i), **kw)
        for i, (name, kw) in enumerate(labels.items())
    }
    engine.store("The build runs on Fridays, note f.", domain="project", subdomain="test")
    report = engine.fold(dry_run=True)
    # d may fold with c (same subdomain) or e (shared tag), but c and e share
    # neither, so not all three. a shares only the domain with them, b only a
    # subdomain with a.
    assert report.clustered == 1
    (members,) = report.folded_from.values()
    assert ids["d"].record_id in members and len(members) == 2
    assert set(members) <= {ids[name].record_id for name in "cde"}


def test_similar_vectors_with_different_words_do_not_fold(engine: MemoryEngine) -> None:
    v = unit(6)
    engine.store("Joanna adopted a dog named Max.", vector=near(v, 1))
    engine.store("Nate entered a video game tournament.", vector=near(v, 2))
    assert engine.fold(dry_run=True).created == 0
    assert engine.fold(dry_run=True, policy=FoldPolicy(word_overlap=0.0)).created == 1


def test_a_cluster_holds_only_records_that_are_near_each_other() -> None:
    # Both sides are 30 degrees from the middle (cosine 0.87) but 60 apart (0.5).
    angles = np.radians([0.0, 30.0, -30.0, 31.0])
    vectors = np.stack([np.cos(angles), np.sin(angles)], axis=1).astype(np.float32)
    found = cluster(["d"] * 4, ["s"] * 4, [()] * 4, vectors, np.ones(4, dtype=bool), 0.85)
    assert sorted(sorted(group) for group in found) == [[0, 1, 3]]
    for group in found:
        for a, b in itertools.combinations(group, 2):
            assert float(vectors[a] @ vectors[b]) >= 0.85


def test_clusters_need_shared_words_when_given_contents() -> None:
    contents = [
        "See you later, Nate!",
        "See you later Nate.",
        "I finished my first screenplay.",
        "我们每周五发布新版本",  # written without spaces: words are character pairs
        "我们每周五发布新的版本",
    ]
    n = len(contents)
    vectors = np.tile(np.float32([1.0, 0.0]), (n, 1))
    labels = (["d"] * n, ["s"] * n, [()] * n, vectors, np.ones(n, dtype=bool), 0.85)
    found = cluster(*labels, contents=contents, word_overlap=0.5)
    assert sorted(sorted(group) for group in found) == [[0, 1], [3, 4]]
    assert [sorted(group) for group in cluster(*labels)] == [list(range(n))]


def test_unfold_and_restore_read_only_their_own_archive_entries(engine: MemoryEngine) -> None:
    family(engine, 2, 3)
    [folded] = engine.fold().created_ids
    statements: list[str] = []
    db = engine.storage.db  # type: ignore[attr-defined]
    db.set_trace_callback(statements.append)
    members = engine.unfold(folded)
    db.set_trace_callback(None)
    engine.fold(merge_again=[members[0].record_id])  # an unfold keeps them apart until then
    db.set_trace_callback(statements.append)
    engine.restore(members[0].record_id)
    db.set_trace_callback(None)
    reads = [sql for sql in statements if "FROM archive WHERE" in sql and "seq IN" not in sql]
    assert any("folded_into = " in sql for sql in reads)
    assert any("record_id = " in sql for sql in reads)
    for sql in reads:
        plan = " ".join(row[3] for row in db.execute("EXPLAIN QUERY PLAN " + sql))
        assert "SCAN" not in plan, (sql, plan)
        if "folded_into = " in sql:
            assert "folded_into=?" in plan, (sql, plan)


def test_unfold_restores_members_exactly(engine: MemoryEngine) -> None:
    members = family(engine, 2, 4, metadata={"source": "chat"})
    report = engine.fold()
    restored = engine.unfold(report.created_ids[0])
    assert sorted(restored, key=lambda r: r.record_id) == sorted(members, key=lambda r: r.record_id)
    # In the fold's order, most representative first.
    assert [r.record_id for r in restored] == list(report.folded_from[report.created_ids[0]])
    for m in members:
        assert engine.get(m.record_id) == m
    assert live_ids(engine) == {m.record_id for m in members}
    with pytest.raises(NotFound):
        engine.get(report.created_ids[0])


def test_unfold_refuses_records_that_are_not_folded(engine: MemoryEngine, clock: FakeClock) -> None:
    plain = engine.store("plain")
    with pytest.raises(InvalidInput, match="not a folded record"):
        engine.unfold(plain.record_id)
    with pytest.raises(NotFound):
        engine.unfold("0" * 32)
    family(engine, 3, 2, importance=0.1)
    folded = engine.fold().created_ids[0]
    clock.advance(60 * DAY)
    assert folded in engine.fold().pruned_ids
    with pytest.raises(InvalidInput, match="restore it first"):
        engine.unfold(folded)
    engine.restore(folded)
    assert len(engine.unfold(folded)) == 2


def test_unfold_refuses_when_a_member_was_stored_again(engine: MemoryEngine) -> None:
    members = family(engine, 4, 2)
    folded = engine.fold().created_ids[0]
    engine.store(members[0].content, vector=members[0].vector)
    with pytest.raises(InvalidInput, match="forget them first"):
        engine.unfold(folded)


def test_cluster_is_the_same_whatever_the_input_order() -> None:
    rng = np.random.default_rng(7)
    centres = rng.normal(size=(20, 16))
    vectors = np.repeat(centres, 5, axis=0) + rng.normal(scale=0.05, size=(100, 16))
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    domains = ["d"] * 100
    subs = [f"s{i % 3}" for i in range(100)]
    tags = [("t",) if i % 2 else () for i in range(100)]
    eligible = np.ones(100, dtype=bool)

    def groups(order: np.ndarray) -> set[frozenset[int]]:
        found = cluster(
            [domains[i] for i in order],
            [subs[i] for i in order],
            [tags[i] for i in order],
            vectors[order].astype(np.float32),
            eligible,
            0.85,
        )
        return {frozenset(int(order[i]) for i in c) for c in found}

    first = groups(np.arange(100))
    assert first == groups(np.arange(100))
    assert all(len(c) >= 2 for c in first)


def test_summary_drops_repeated_sentences_and_respects_the_cap() -> None:
    text = summarise(["We use SQLite. It is fast.", "We use SQLite. Readers never block"], 200)
    assert text == "We use SQLite. It is fast. Readers never block."
    assert len(summarise(["x" * 50 + ". " + "y" * 50 + "."] * 3, 80)) <= 80


def test_summary_splits_chinese_and_japanese_sentences_at_full_width_stops() -> None:
    bang, ask = "\uff01", "\uff1f"  # full-width ! and ?
    # No space follows a full-width stop, so each of these contents is several sentences.
    assert summarise(["会议在周一。", f"会议在周一。预算已批准{bang}"], 200) == (
        f"会议在周一。预算已批准{bang}"
    )
    assert summarise([f"会議は月曜日です。予算は承認されました{ask}", "次の会議は金曜日"], 200) == (
        f"会議は月曜日です。予算は承認されました{ask}次の会議は金曜日."
    )
    assert (
        summarise(["Plan agreed. 会议在周一。", "Plan agreed."], 200) == "Plan agreed. 会议在周一。"
    )
    capped = summarise(["会议在周一。预算已批准。下周再议。"], 12)
    assert capped == "会议在周一。预算已批准。" and len(capped) <= 12


# -- dry run, policy ----------------------------------------------------------------


def test_dry_run_changes_nothing(engine: MemoryEngine, clock: FakeClock, store_path: Path) -> None:
    family(engine, 6, 3)
    engine.store("faded", importance=0.1)
    engine.store("decays", importance=0.5)
    clock.advance(6 * DAY)
    before = dump(store_path)
    report = engine.fold(dry_run=True)
    assert report.dry_run and report.pruned == 1 and report.created == 1 and report.decayed >= 1
    assert dump(store_path) == before
    real = engine.fold()
    assert (real.pruned, real.created, real.created_ids) == (1, 1, report.created_ids)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("prune_below", 1.5, "prune_below"),
        ("similarity", -0.1, "similarity"),
        ("similarity", 0.0, "similarity"),
        ("word_overlap", 1.5, "word_overlap"),
        ("working_half_life", -1.0, "working_half_life"),
        ("long_term_half_life", 0, "long_term_half_life"),
        ("short_term_half_life", float("inf"), "short_term_half_life"),
        ("short_term_from", 0.8, "thresholds must rise"),
        ("spacing_factor", 0.5, "spacing_factor"),
        ("summary_max_chars", 10, "summary_max_chars"),
        ("auto_fold_every", -3, "auto_fold_every"),
        ("importance_boost", float("nan"), "importance_boost"),
    ],
)
def test_policy_out_of_range_is_refused(field: str, value: Any, message: str) -> None:
    with pytest.raises(InvalidInput, match=message):
        FoldPolicy(**{field: value})


def test_fold_refuses_a_bad_policy_or_time(engine: MemoryEngine) -> None:
    with pytest.raises(InvalidInput, match="FoldPolicy"):
        engine.fold(policy={"prune_below": 0.1})  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match="now"):
        engine.fold(now=float("nan"))


def test_auto_fold_runs_after_n_stores(store_path: Path, clock: FakeClock) -> None:
    with MemoryEngine(store_path, clock=clock, fold_policy=FoldPolicy(auto_fold_every=3)) as mem:
        v = unit(8)
        mem.store("The same note, copy one.", vector=near(v, 1))
        mem.store("The same note, copy two.", vector=near(v, 2))
        assert mem.stats().records == 2
        mem.store("The same note, copy three.", vector=near(v, 3))
        assert mem.stats().records == 1


def test_a_fold_restarts_the_count_towards_the_next_automatic_one(
    store_path: Path, clock: FakeClock
) -> None:
    with MemoryEngine(store_path, clock=clock, fold_policy=FoldPolicy(auto_fold_every=3)) as mem:
        v = unit(8)
        mem.store("The same note, copy one.", vector=near(v, 1))
        mem.store("The same note, copy two.", vector=near(v, 2))
        assert mem.fold(dry_run=True).created == 1  # a preview leaves the count as it was
        assert mem.fold().created == 1
        mem.store("The same note, copy three.", vector=near(v, 3))
        mem.store("The same note, copy four.", vector=near(v, 4))
        assert mem.stats().records == 3
        mem.store("The same note, copy five.", vector=near(v, 5))
        assert mem.stats().records == 1


def test_auto_fold_is_off_by_default(engine: MemoryEngine) -> None:
    v = unit(9)
    for i in range(20):
        engine.store(f"The same note, copy {i}.", vector=near(v, i))
    assert engine.stats().records == 20
    assert engine.fold(dry_run=True).created == 1


# -- properties ---------------------------------------------------------------------

_labels = st.sampled_from(["a", "b", "c"])
_memory = st.fixed_dictionaries(
    {
        "family": st.integers(0, 3),
        "noise": st.sampled_from([0.01, 0.05, 0.5]),
        "importance": st.sampled_from([0.1, 0.5, 0.8, 0.99]),
        "subdomain": _labels,
        "tags": st.lists(_labels, max_size=2),
        "has_vector": st.booleans(),
        "age_days": st.integers(0, 20),
    }
)


def build(
    memories: list[dict[str, Any]], order: list[int] | None = None
) -> tuple[MemoryEngine, FakeClock, list[Record]]:
    """A store of ``memories``, stored in ``order`` (their list order by default).

    A memory's content and vector depend on its place in ``memories``, not on
    when it is stored, so any order stores the same records.
    """
    clock = FakeClock()
    engine = MemoryEngine(":memory:", clock=clock)
    records = []
    for i in range(len(memories)) if order is None else order:
        m = memories[i]
        clock.now = 1_700_000_000.0 - m["age_days"] * DAY
        vector = near(unit(m["family"]), 1000 + i, m["noise"]) if m["has_vector"] else None
        records.append(
            engine.store(
                f"memory {i} of family {m['family']}.",
                subdomain=m["subdomain"],
                tags=m["tags"],
                importance=m["importance"],
                vector=vector,
            )
        )
    clock.now = 1_700_000_000.0
    return engine, clock, records


def provenance(engine: MemoryEngine) -> set[str]:
    """Every id reachable from live records and the archive."""
    db = engine.storage.db  # type: ignore[attr-defined]
    ids = {row[0] for row in db.execute("SELECT record_id FROM records")}
    ids |= {row[0] for row in db.execute("SELECT record_id FROM archive")}
    return ids


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_memory, min_size=1, max_size=25), st.sampled_from([0.5, 0.85, 0.99]))
def test_a_fold_never_loses_a_record_without_a_trace(
    memories: list[dict[str, Any]], similarity: float
) -> None:
    engine, _, records = build(memories)
    with engine:
        before = {r.record_id for r in records}
        report = engine.fold(policy=FoldPolicy(similarity=similarity))
        live = live_ids(engine)
        archived = {row[0]: row for row in archive_rows(engine)}
        assert before <= live | set(archived)
        for rid, reason, into in archived.values():
            if reason == "folded":
                assert rid in engine.get(into).metadata["folded_from"]
        assert len(live) == report.records_after
        assert before <= provenance(engine)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_memory, min_size=2, max_size=20))
def test_unfolding_every_folded_record_restores_the_exact_records(
    memories: list[dict[str, Any]],
) -> None:
    for m in memories:
        m["age_days"] = 0
    engine, _, records = build(memories)
    with engine:
        report = engine.fold(policy=FoldPolicy(prune_below=0.0))
        for rid in report.created_ids:
            engine.unfold(rid)
        by_id = {r.record_id: r for r in records}
        assert live_ids(engine) == set(by_id)
        for rid, rec in by_id.items():
            assert engine.get(rid) == rec


def fold_by_content(
    engine: MemoryEngine, stored: list[Record], report: FoldReport
) -> dict[str, Any]:
    """A fold's outcome told by contents, not ids.

    Labels take primes in the order they are first stored, so the same records
    stored in another order get other addresses and ids.
    """
    content = {r.record_id: r.content for r in stored}

    def kept(rid: str) -> tuple[Any, ...]:
        r = engine.get(rid)
        return (r.content, r.domain, r.subdomain, r.tags, r.importance, r.strength, r.created_at)

    return {
        "pruned": sorted(content[rid] for rid in report.pruned_ids),
        "folded": sorted(
            (kept(into), sorted(content[m] for m in members))
            for into, members in report.folded_from.items()
        ),
        "live": sorted(kept(rid) for rid in live_ids(engine)),
    }


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_memory, min_size=1, max_size=20), st.randoms(use_true_random=False))
def test_same_records_policy_and_time_give_the_same_fold_in_any_store_order(
    memories: list[dict[str, Any]], random: Any
) -> None:
    order = list(range(len(memories)))
    random.shuffle(order)
    first, _, stored = build(memories)
    again, _, _ = build(memories)
    shuffled, _, restored = build(memories, order)
    with first, again, shuffled:
        now = 1_700_000_000.0 + DAY
        a, b, c = first.fold(now=now), again.fold(now=now), shuffled.fold(now=now)
        # The same order: the very same fold, ids and all.
        assert (a.pruned_ids, a.created_ids, a.folded_from) == (
            b.pruned_ids,
            b.created_ids,
            b.folded_from,
        )
        assert live_ids(first) == live_ids(again)
        for rid in a.created_ids:
            assert first.get(rid) == again.get(rid)
        # Another order: the same fold of the same contents.
        assert fold_by_content(first, stored, a) == fold_by_content(shuffled, restored, c)


# -- concurrency ---------------------------------------------------------------------


def _writer(path: str, start: int, count: int, ready: Any) -> None:
    with MemoryEngine(path) as memory:
        ready.set()
        for i in range(start, start + count):
            memory.store(f"writer note {i}", tags=["writer"], importance=0.99)


def test_writes_from_another_process_survive_a_fold(store_path: Path, clock: FakeClock) -> None:
    with MemoryEngine(store_path, clock=clock) as engine:
        for seed in range(30):
            family(engine, seed + 10, 3)
        ctx = multiprocessing.get_context("spawn")
        ready = ctx.Event()
        writer = ctx.Process(target=_writer, args=(str(store_path), 0, 200, ready))
        writer.start()
        assert ready.wait(60)
        reports = [engine.fold() for _ in range(5)]
        writer.join(120)
        assert writer.exitcode == 0
        assert sum(r.created for r in reports) == 30
        assert len(engine.match_ids(tags=["writer"])) == 200
    with MemoryEngine(store_path) as fresh:
        assert len(fresh.match_ids(tags=["writer"])) == 200


decay_inputs = st.lists(
    st.tuples(
        st.floats(0, 1),
        st.sampled_from([None, *TIERS, "unknown", 3]),
        st.floats(0, 1e6),
        st.floats(0, 1e6),
        st.integers(0, 50),
        st.none() | st.floats(0, 2e6),
    ),
    max_size=40,
)


@settings(max_examples=80, deadline=None)
@given(decay_inputs)
def test_decay_columns_equal_decay_terms_row_by_row(
    rows: list[tuple[float, object, float, float, int, float | None]],
) -> None:
    policy = FoldPolicy()
    columns = [[row[k] for row in rows] for k in range(6)]
    since, half = decay_columns(policy, *columns)  # type: ignore[arg-type]
    expected = [decay_terms(policy, *row) for row in rows]
    assert since.tolist() == [s for s, _ in expected]
    assert half.tolist() == [h for _, h in expected]
