"""Folding at any size: the candidate search against the exhaustive screen; incremental folds."""

from __future__ import annotations

import sqlite3
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from prime_memory_folding import FoldPolicy, MemoryEngine
from prime_memory_folding.engine import maintenance, vector_cache
from prime_memory_folding.fold import folding, links
from prime_memory_folding.fold.folding import prune_moments
from prime_memory_folding.fold.links import linked_pairs, word_set, word_table
from prime_memory_folding.storage import archive, fold_marks
from prime_memory_folding.storage.ranks import id_order
from tests.conftest import FakeClock

DAY = 86_400.0
DIM = 8
T0 = 1_700_000_000.0

# A small vocabulary with a few very common words, so that texts overlap by
# chance as well as by being near-duplicates, and some are nothing but common words.
COMMON = ["the", "a", "to", "of", "and", "is"]
RARE = [f"word{i}" for i in range(30)]
UNSEGMENTED = ["会议", "在周", "一预"]


def text_of(draws: list[int]) -> str:
    vocabulary = COMMON + RARE + UNSEGMENTED
    return " ".join(vocabulary[d % len(vocabulary)] for d in draws) + "."


_texts = st.lists(st.integers(0, 60), min_size=0, max_size=8)


@st.composite
def records(draw: st.DrawFn) -> dict[str, Any]:
    base = draw(_texts)
    # Near-duplicates of one of four base texts, or texts of their own.
    return {
        "family": draw(st.integers(0, 3)),
        "text": draw(st.one_of(st.just(base), _texts)),
        "noise": draw(st.sampled_from([0.01, 0.2, 1.0])),
        "domain": draw(st.sampled_from(["a", "b"])),
        "subdomain": draw(st.sampled_from(["s", "t"])),
        "tags": draw(st.lists(st.sampled_from(["x", "y"]), max_size=1)),
        "has_vector": draw(st.integers(0, 9)) > 0,
    }


def columns(items: list[dict[str, Any]]) -> tuple[Any, ...]:
    rng = np.random.default_rng(0)
    centres = rng.normal(size=(4, DIM))
    vectors = np.zeros((len(items), DIM), dtype=np.float32)
    for i, item in enumerate(items):
        if item["has_vector"]:
            v = centres[item["family"]] + rng.normal(scale=item["noise"], size=DIM)
            vectors[i] = v / np.linalg.norm(v)
    return (
        [item["domain"] for item in items],
        [item["subdomain"] for item in items],
        [tuple(item["tags"]) for item in items],
        vectors,
        np.array([item["has_vector"] for item in items], dtype=bool),
    )


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(records(), min_size=2, max_size=40),
    st.sampled_from([0.3, 0.5, 0.8]),
    st.sampled_from([1, 2, 64]),
    st.sampled_from([0.0, 0.1, 0.5]),
)
def test_the_candidate_search_finds_exactly_the_exhaustive_screens_links(
    items: list[dict[str, Any]], overlap: float, common_rows: int, common_share: float
) -> None:
    contents = [text_of(item["text"]) for item in items]
    args = columns(items)
    exhaustive = linked_pairs(*args, 0.85, contents=contents, word_overlap=overlap, exhaustive=True)
    with pytest.MonkeyPatch.context() as patch:
        # A low bar for "common" sends many records down the common-word path.
        patch.setattr(links, "COMMON_WORD_ROWS", common_rows)
        # A share of each group: the bar differs between groups of different sizes.
        patch.setattr(links, "COMMON_WORD_SHARE", common_share)
        searched = linked_pairs(*args, 0.85, contents=contents, word_overlap=overlap)
    assert searched.tolist() == exhaustive.tolist()


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(max_size=30), max_size=12))
def test_the_word_table_holds_each_texts_distinct_words(texts: list[str]) -> None:
    offsets, words = word_table(texts)
    sets = [word_set(t) for t in texts]
    numbers: dict[str, int] = {}
    for i, found in enumerate(sets):
        got = words[offsets[i] : offsets[i + 1]].tolist()
        assert len(got) == len(set(got)) == len(found)
        for word, number in zip(sorted(found, key=lambda w: 0), got):
            numbers.setdefault(word, number)
    # Equal words, equal numbers: records share a number exactly when they share a word.
    for i in range(len(texts)):
        for j in range(len(texts)):
            mine = set(words[offsets[i] : offsets[i + 1]].tolist())
            theirs = set(words[offsets[j] : offsets[j + 1]].tolist())
            assert len(mine & theirs) == len(sets[i] & sets[j])


_hex_ids = st.integers(0, 2**128 - 1).map(lambda a: f"{a:032x}")
_other_ids = st.text(alphabet="0123456789abcdefABCDEF`:g ", min_size=0, max_size=34)


@given(st.lists(st.one_of(_hex_ids, _hex_ids.map(lambda r: r[:4] + "0" * 28), _other_ids)))
def test_record_ids_are_ranked_in_string_order_ties_as_given(ids: list[str]) -> None:
    order = id_order(ids).tolist()
    assert order == sorted(range(len(ids)), key=lambda i: (ids[i], i))


_finite = st.floats(0, 1e10, allow_nan=False)


@given(
    st.lists(st.tuples(st.floats(0, 1), _finite, st.one_of(_finite, st.just(np.inf))), max_size=40),
    st.sampled_from([0.0, 0.05, 0.3]),
)
def test_one_records_prune_moment_is_the_columns_to_the_last_bit(
    rows: list[tuple[float, float, float]], prune_below: float
) -> None:
    strength, since, half = (np.array(column, dtype=np.float64) for column in zip(*rows, [0, 0, 1]))
    columns = prune_moments(strength, since, half, prune_below)
    one = [folding.prune_moment(*row, prune_below) for row in zip(strength, since, half)]
    np.testing.assert_array_equal(np.array(one), columns)


def test_prune_moments_mark_when_the_decayed_strength_crosses_the_threshold() -> None:
    strength = np.array([1.0, 0.5, 0.01, 0.8])
    since = np.array([100.0, 100.0, 100.0, 100.0])
    half = np.array([10.0, 10.0, 10.0, np.inf])
    at = prune_moments(strength, since, half, 0.05)
    decayed = strength[:2] * np.exp2(-(at[:2] + 1e-6 - since[:2]) / half[:2])
    assert (decayed < 0.05).all()
    assert (strength[:2] * np.exp2(-(at[:2] - 1e-3 - since[:2]) / half[:2]) >= 0.05).all()
    assert at[2] == -np.inf and np.isnan(at[3])
    assert np.isnan(prune_moments(strength, since, half, 0.0)).all()


# -- incremental folds ---------------------------------------------------------------


def unit(seed: int) -> list[float]:
    return np.random.default_rng(seed).normal(size=DIM).tolist()


def near(vector: list[float], seed: int, noise: float) -> list[float]:
    jitter = np.random.default_rng(seed).normal(scale=noise, size=DIM)
    return (np.asarray(vector) + jitter).tolist()


_memory = st.fixed_dictionaries(
    {
        "family": st.integers(0, 4),
        "variant": st.integers(0, 2),
        "noise": st.sampled_from([0.01, 0.05, 0.6]),
        "importance": st.sampled_from([0.1, 0.5, 0.99]),
        "subdomain": st.sampled_from(["a", "b"]),
        "tags": st.lists(st.sampled_from(["x", "y"]), max_size=1),
        "age_days": st.integers(0, 10),
    }
)


def store_all(engine: MemoryEngine, clock: FakeClock, memories: list[dict[str, Any]]) -> None:
    for i, m in enumerate(memories):
        clock.now = T0 + 20 * DAY - m["age_days"] * DAY
        engine.store(
            f"Fact {m['family']} about the build, version {m['variant']}. Note {i % 3}.",
            subdomain=m["subdomain"],
            tags=m["tags"],
            importance=m["importance"],
            vector=near(unit(m["family"]), 1000 + i, m["noise"]),
        )


def outcome(engine: MemoryEngine) -> tuple[Any, ...]:
    db = engine.storage.db  # type: ignore[attr-defined]
    live = sorted(db.execute("SELECT record_id, content, strength > 0 FROM records"))
    archived = sorted(db.execute("SELECT record_id, reason FROM archive"))
    return live, archived


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(_memory, min_size=1, max_size=15),
    st.lists(_memory, min_size=0, max_size=15),
    st.integers(0, 3),
)
def test_an_incremental_fold_folds_like_a_full_fold_of_the_same_store(
    before: list[dict[str, Any]], after: list[dict[str, Any]], reinforce: int
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        engines = []
        for name in ("incremental", "full"):
            clock = FakeClock(T0)
            engine = MemoryEngine(Path(tmp) / f"{name}.db", clock=clock)
            store_all(engine, clock, before)
            clock.now = T0 + 20 * DAY
            engine.fold(full=True)
            store_all(engine, clock, after)
            for rid in sorted(engine.match_ids())[:reinforce]:
                engine.reinforce(rid)
            clock.now = T0 + 28 * DAY
            engines.append(engine)
        incremental, full = engines
        try:
            a = incremental.fold()
            b = full.fold(full=True)
            assert a.incremental and not b.incremental
            assert a.screened <= b.screened
            assert (a.pruned_ids, a.folded_from, a.created_ids) == (
                b.pruned_ids,
                b.folded_from,
                b.created_ids,
            )
            assert outcome(incremental)[1] == outcome(full)[1]
            assert [r[:2] for r in outcome(incremental)[0]] == [r[:2] for r in outcome(full)[0]]
            # Both leave the same state behind: the next folds agree again.
            later = T0 + 400 * DAY
            assert incremental.fold(now=later).pruned_ids == full.fold(now=later).pruned_ids
        finally:
            for engine in engines:
                engine.close()


def dump(path: Path) -> list[str]:
    db = sqlite3.connect(path)
    try:
        return list(db.iterdump())
    finally:
        db.close()


def test_an_incremental_fold_with_nothing_new_writes_nothing(
    store_path: Path, clock: FakeClock
) -> None:
    with MemoryEngine(store_path, clock=clock) as engine:
        for i in range(5):
            engine.store(f"note {i} about nothing in particular", vector=unit(i))
        first = engine.fold()
        assert not first.incremental and first.screened == 5
        before = dump(store_path)
        again = engine.fold()
        assert again.incremental and again.screened == 0 and again.records_after == 5
        assert dump(store_path) == before


def test_an_incremental_fold_screens_only_what_changed(store_path: Path, clock: FakeClock) -> None:
    with MemoryEngine(store_path, clock=clock) as engine:
        old = engine.store("The deploy runs every Friday at noon.", vector=unit(1))
        for i in range(20):
            engine.store(f"unrelated note number {i}", vector=unit(100 + i))
        engine.fold()
        twin = engine.store("The deploy runs every Friday at noon!", vector=near(unit(1), 2, 0.01))
        report = engine.fold()
        assert report.incremental and report.screened == 1
        assert report.folded_from == {
            report.created_ids[0]: report.folded_from[report.created_ids[0]]
        }
        assert set(report.folded_from[report.created_ids[0]]) == {old.record_id, twin.record_id}


def test_records_fading_out_are_found_by_their_prune_moment(
    store_path: Path, clock: FakeClock
) -> None:
    with MemoryEngine(store_path, clock=clock) as engine:
        faint = engine.store("a scratch note", importance=0.1, vector=unit(1))
        engine.store("a lasting note", importance=0.9, vector=unit(2))
        assert engine.fold().pruned == 0
        clock.advance(3 * DAY)
        assert engine.fold().pruned == 0
        statements: list[str] = []
        engine.storage.db.set_trace_callback(statements.append)  # type: ignore[attr-defined]
        clock.advance(2 * DAY)
        report = engine.fold()
        engine.storage.db.set_trace_callback(None)  # type: ignore[attr-defined]
        assert report.incremental and report.pruned_ids == (faint.record_id,)
        # No read of the whole table: the records due come from the prune moments.
        assert not any("FROM records" in sql and "WHERE" not in sql for sql in statements)


def test_a_full_fold_drops_the_prune_moments_of_the_records_it_archives(
    backend_store: str, clock: FakeClock
) -> None:
    with MemoryEngine(backend_store, clock=clock) as engine:
        faint = engine.store("a scratch note", importance=0.1, vector=unit(1))
        twin = [
            engine.store("the deploy runs at noon", vector=unit(2)).record_id,
            engine.store("the deploy runs at noon daily", vector=unit(2)).record_id,
        ]
        engine.store("a lasting note", importance=0.6, vector=unit(3))
        clock.advance(5 * DAY)
        report = engine.fold(full=True)
        assert report.pruned_ids == (faint.record_id,) and report.folded == 2
        kept = marks_of(engine)
        # The pruned record's moment was due and would stay due: it goes with the
        # record, and so do the merged ones'. The live records' stay; the folded
        # record is new to the next fold, which marks it.
        assert {faint.record_id, *twin}.isdisjoint(rid for rid, _ in kept)
        expected = expected_marks(engine, engine.fold_policy)
        assert kept == [m for m in expected if m[0] not in report.created_ids]
        engine.fold()
        assert marks_of(engine) == expected


def test_the_records_due_come_from_a_range_of_the_prune_moment_index(store_path: Path) -> None:
    with MemoryEngine(store_path) as engine:
        db = engine.storage.db  # type: ignore[attr-defined]
        statements: list[str] = []
        db.set_trace_callback(statements.append)
        assert fold_marks.due_for_pruning(engine.storage, 0.0) == []  # type: ignore[arg-type]
        db.set_trace_callback(None)
        (sql,) = [s for s in statements if "fold_marks" in s]
        steps = [row[-1] for row in db.execute(f"EXPLAIN QUERY PLAN {sql}")]
        # Not a scan of every moment in id order: a range of the index on prune_at.
        assert any("fold_marks_prune_at (prune_at<?)" in step for step in steps), steps


@pytest.mark.parametrize("rebuild_from", [1, 10_000])
def test_a_full_fold_keeps_the_prune_moments_indexed_however_it_writes_them(
    backend_store: str, clock: FakeClock, rebuild_from: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # From few changed marks on, a full fold rebuilds the index on prune moments.
    # Its policy is not the one the store marked records with, so every mark changes.
    monkeypatch.setattr(fold_marks, "_REBUILD_MARKS", rebuild_from)
    policy = FoldPolicy(prune_below=0.1)
    with MemoryEngine(backend_store, clock=clock) as engine:
        faint = engine.store("a scratch note", importance=0.1, vector=unit(1))
        engine.store("a lasting note", importance=0.9, vector=unit(2))
        with engine.storage.transaction():  # type: ignore[attr-defined]
            engine.storage.db.execute(  # type: ignore[attr-defined]
                "INSERT INTO fold_marks VALUES ('not a record', 5)"
            )
        assert engine.fold(full=True, policy=policy).pruned == 0
        # Written anew, the table loses the orphan; row by row, it stays.
        orphan = [] if rebuild_from == 1 else [("not a record", 5.0)]
        assert marks_of(engine) == sorted([*expected_marks(engine, policy), *orphan])
        catalog = (
            "SELECT indexname FROM pg_indexes WHERE indexname = 'fold_marks_prune_at' "
            "AND schemaname = current_schema()"
            if backend_store.startswith("postgresql")
            else "SELECT name FROM sqlite_master WHERE name = 'fold_marks_prune_at'"
        )
        indexes = engine.storage.db.execute(catalog).fetchall()  # type: ignore[attr-defined]
        assert [tuple(row) for row in indexes] == [("fold_marks_prune_at",)]
        clock.advance(5 * DAY)
        report = engine.fold(policy=policy)
        assert report.incremental and report.pruned_ids == (faint.record_id,)


def marks_of(engine: MemoryEngine) -> list[tuple[str, float]]:
    sql = "SELECT record_id, prune_at FROM fold_marks ORDER BY record_id"
    return [tuple(row) for row in engine.storage.db.execute(sql)]  # type: ignore[attr-defined, misc]


def expected_marks(engine: MemoryEngine, policy: FoldPolicy) -> list[tuple[str, float]]:
    """The prune moments a fold computes for every live record, from its stored columns."""
    snapshot = archive.read_snapshot_columns(engine.storage)  # type: ignore[arg-type]
    _, since, half = folding.effective_columns(snapshot, policy, 0.0)
    moments = prune_moments(snapshot.strength, since, half, policy.prune_below)
    return sorted(
        (rid, at) for rid, at in zip(snapshot.record_ids, moments.tolist()) if not np.isnan(at)
    )


def test_a_store_keeps_each_records_prune_moment_from_the_start(
    backend_store: str, clock: FakeClock
) -> None:
    with MemoryEngine(backend_store, clock=clock) as engine:
        engine.store("a scratch note", importance=0.1, vector=unit(1))
        engine.store("a lasting note", importance=0.95, vector=unit(2))
        engine.store_many([{"content": f"note {i}", "importance": 0.5} for i in range(5)])
        clock.advance(DAY)
        engine.store("note 3", importance=0.5)  # reinforced: a later, longer-lived moment
        kept = marks_of(engine)
        assert kept == expected_marks(engine, engine.fold_policy)
        assert len(kept) == 6  # the permanent note never fades


def test_a_full_fold_writes_only_the_prune_moments_that_differ(
    backend_store: str, clock: FakeClock
) -> None:
    with MemoryEngine(backend_store, clock=clock) as engine:
        ids = [engine.store(f"note number {i}", vector=unit(i)).record_id for i in range(6)]
        db = engine.storage.db  # type: ignore[attr-defined]
        # As a store written before moments were kept: one missing, one wrong, one orphan.
        with engine.storage.transaction():  # type: ignore[attr-defined]
            db.execute("DELETE FROM fold_marks WHERE record_id = ?", (ids[0],))
            db.execute("UPDATE fold_marks SET prune_at = 1 WHERE record_id = ?", (ids[1],))
            db.execute("INSERT INTO fold_marks VALUES ('not a record', 5)")
        traced = not backend_store.startswith("postgresql")  # SQLite tells each statement
        statements: list[str] = []
        if traced:
            db.set_trace_callback(statements.append)
        engine.fold(full=True)
        if traced:
            db.set_trace_callback(None)
            inserted = [sql for sql in statements if sql.startswith("INSERT INTO fold_marks")]
            assert len(inserted) == 2  # the missing and the wrong moment, nothing else
        expected = expected_marks(engine, engine.fold_policy)
        # The orphan stays (no live record, never due) until the table is written anew.
        assert marks_of(engine) == sorted([*expected, ("not a record", 5.0)])
        assert engine.fold().pruned == 0


def test_a_different_policy_or_full_true_screens_everything(
    store_path: Path, clock: FakeClock
) -> None:
    with MemoryEngine(store_path, clock=clock) as engine:
        for i in range(3):
            engine.store(f"note {i}", vector=unit(i))
        assert not engine.fold().incremental
        assert engine.fold().incremental
        assert not engine.fold(full=True).incremental
        assert not engine.fold(policy=FoldPolicy(exhaustive=True)).incremental
        assert engine.fold().incremental  # the same rules as the exhaustive fold's
        assert not engine.fold(policy=FoldPolicy(similarity=0.9)).incremental
        assert not engine.fold().incremental  # the last fold had other rules


def test_an_exhaustive_fold_makes_the_same_merges(tmp_path: Path) -> None:
    reports = []
    for exhaustive in (False, True):
        clock = FakeClock(T0)
        with MemoryEngine(tmp_path / f"{exhaustive}.db", clock=clock) as engine:
            store_all(
                engine,
                clock,
                [
                    {"family": f % 3, "variant": v, "noise": 0.02, "importance": 0.5,
                     "subdomain": "a", "tags": [], "age_days": 0}
                    for f in range(6) for v in range(3)
                ],
            )  # fmt: skip
            clock.now = T0 + 20 * DAY
            reports.append(engine.fold(policy=FoldPolicy(exhaustive=exhaustive)))
    assert reports[0].created > 0
    assert reports[0].folded_from == reports[1].folded_from


def test_fold_refuses_a_bad_full_flag(engine: MemoryEngine) -> None:
    with pytest.raises(folding.InvalidInput, match="full"):
        engine.fold(full="yes")  # type: ignore[arg-type]
    with pytest.raises(folding.InvalidInput, match="exhaustive"):
        FoldPolicy(exhaustive=1)  # type: ignore[arg-type]


def test_an_incremental_fold_maps_the_file_into_memory_while_it_looks_words_up(
    store_path: Path, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    with MemoryEngine(store_path, clock=clock) as engine:
        engine.store("a note about the harbour", vector=unit(1))
        db = engine.storage.db  # type: ignore[attr-defined]

        def mapped() -> int:
            return int(db.execute("PRAGMA mmap_size").fetchone()[0])

        before = mapped()
        during: list[int] = []
        look_up = fold_marks.rows_with_word

        def spy(*args: Any) -> Any:
            during.append(mapped())
            return look_up(*args)

        monkeypatch.setattr(fold_marks, "rows_with_word", spy)
        # A full fold reads in order: no mapping, so its memory stays its own.
        engine.fold(full=True, progress=lambda *_: during.append(mapped()))
        assert during and set(during) == {before}
        during.clear()
        engine.store("another note about the harbour", vector=unit(2))
        assert engine.fold().incremental
        assert during and all(size > before for size in during)
        assert mapped() == before


# -- what an incremental fold asks the full-text index ------------------------------------


@settings(max_examples=200, deadline=None)
@given(
    st.lists(_texts, min_size=2, max_size=30),
    st.integers(0, 29),
    st.integers(1, 12),
    st.sampled_from([0.2, 0.5, 0.8]),
)
def test_the_words_an_incremental_fold_looks_up_lead_to_every_record_it_may_fold_with(
    texts: list[list[int]], at: int, limit: int, overlap: float
) -> None:
    sets = [word_set(text_of(t)) for t in texts]
    x = sets[at % len(sets)]
    asked: list[str] = []

    def posting(word: str) -> np.ndarray | None:
        asked.append(word)
        rows = [i for i, s in enumerate(sets) if word in s]
        # Words held by more than ``limit`` records are common: not listed.
        return None if len(rows) > limit else np.array(rows, dtype=np.int64)

    probe = links.probe_rows(x, overlap, posting)
    assert len(asked) == len(set(asked)) <= len(x)
    if probe is None:
        return  # a pass over every vector compares it instead
    lead, need = probe
    found, times = np.unique(np.concatenate(lead), return_counts=True)
    reached = set(found[times >= need].tolist())
    for i, other in enumerate(sets):
        if x and links.jaccard(x, other) >= overlap:
            assert i in reached


def store_notes(engine: MemoryEngine, texts: list[str], seed: int = 0) -> None:
    """Each text stored on its own (one commit each), with a vector of its own."""
    for i, text in enumerate(texts):
        engine.store(text, vector=unit(seed + i))


def fts_segments(engine: MemoryEngine) -> int:
    db = engine.storage.db  # type: ignore[attr-defined]
    return int(db.execute("SELECT count(DISTINCT segid) FROM records_fts_idx").fetchone()[0])


def test_an_incremental_fold_first_merges_the_small_segments_of_the_text_index(
    store_path: Path, clock: FakeClock
) -> None:
    with MemoryEngine(store_path, clock=clock) as engine:
        older = [f"note {i} on harbour tide {i % 7} and crane {i % 5}" for i in range(40)]
        store_notes(engine, older)
        engine.fold()
        # One commit, and one small segment, each.
        store_notes(engine, [f"later note {i} on harbour crane {i % 3}" for i in range(12)], 100)
        storage = engine.storage
        words = sorted({w for i in range(12) for w in word_set(f"later note {i} on harbour")})
        before = [fold_marks.rows_with_word(storage, w, 1_000).tolist() for w in words]  # type: ignore[arg-type,union-attr]
        segments = fts_segments(engine)
        assert segments >= 4
        report = engine.fold()
        assert report.incremental and report.screened == 12
        assert fts_segments(engine) < segments
        after = [fold_marks.rows_with_word(storage, w, 1_000).tolist() for w in words]  # type: ignore[arg-type,union-attr]
        assert after == before


def test_a_fold_that_archives_a_tenth_of_the_store_leaves_one_text_segment(
    store_path: Path, clock: FakeClock
) -> None:
    with MemoryEngine(store_path, clock=clock, embedder="none") as engine:
        for batch in range(20):  # one commit, and one segment, each
            engine.store_many(
                [
                    {"content": f"scratch note {batch} {i}", "importance": 0.1 if i % 2 else 0.9}
                    for i in range(120)
                ]
            )
        assert fts_segments(engine) > 1
        clock.advance(60 * DAY)
        report = engine.fold()
        assert report.pruned == 1_200
        assert fts_segments(engine) == 1
        hits = engine.query(text="scratch", limit=2_000)
        assert sorted(h.record.record_id for h in hits) == sorted(engine.match_ids())


def test_an_incremental_fold_writes_only_the_prune_moments_that_differ(
    store_path: Path, clock: FakeClock
) -> None:
    with MemoryEngine(store_path, clock=clock) as engine:
        store_notes(engine, [f"the tide table for pier {i} and the crane rota" for i in range(8)])
        engine.fold()
        twin = engine.store("the tide table for pier 3 and the crane rota!", vector=unit(50))
        db = engine.storage.db  # type: ignore[attr-defined]
        statements: list[str] = []
        db.set_trace_callback(statements.append)
        report = engine.fold()
        db.set_trace_callback(None)
        assert report.incremental and report.records_before == 9
        written = [sql for sql in statements if sql.startswith("INSERT INTO fold_marks")]
        # It planned over the records sharing words with the new one, whose
        # moments a store wrote: none of them is written again.
        assert len(written) == 0
        assert marks_of(engine) == expected_marks(engine, engine.fold_policy)
        assert twin.record_id in dict(marks_of(engine))


@settings(max_examples=200, deadline=None)
@given(
    st.sets(st.integers(0, 12), max_size=10),
    st.sets(st.integers(0, 12), max_size=10),
    st.sets(st.integers(0, 12), max_size=10),
    st.sampled_from([0.3, 0.5, 0.6, 0.7, 0.9, 1.0]),
)
def test_a_partner_sharing_only_unlisted_words_has_a_size_in_the_bounds(
    x: set[int], y: set[int], listed: set[int], overlap: float
) -> None:
    listed &= x
    y -= listed
    if links.jaccard(frozenset(x), frozenset(y)) < overlap:
        return
    low, high = links.unlisted_partner_sizes(len(x), len(x) - len(listed), overlap)
    assert low <= len(y) <= high


def items_of(count: int, away_from: list[float]) -> list[dict[str, Any]]:
    """Labels such as ``item 12``: one word every record holds and a number of its own,
    with vectors far from ``away_from`` (and near each other: they share too few words)."""
    return [
        {"content": f"item {i}", "vector": near([-v for v in away_from], i, 0.1)}
        for i in range(count)
    ]


@pytest.mark.parametrize(
    ("single", "labels", "merges"),
    [
        (True, ("a", ["x"]), True),  # the same subdomain and tag
        (True, ("b", ["x", "z"]), True),  # a tag only
        (True, ("a", ["y"]), True),  # the subdomain only
        (True, ("b", ["y"]), False),  # neither: no link
        (False, ("a", ["x"]), False),  # no record of one word to fold with
    ],
)
@pytest.mark.parametrize("by_label", [True, False])
def test_an_incremental_fold_finds_a_partner_that_shares_only_a_common_word(
    backend_store: str,
    another_store: str,
    single: bool,
    labels: tuple[str, list[str]],
    merges: bool,
    by_label: bool,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # 300 records hold "item": it is common, and a new "item 9000" leads nowhere
    # through the full-text index. Its partner, if any, holds "item" alone. Its
    # vector is compared label by label, or with its whole group's (on the
    # engine's index, or on PostgreSQL in the engine's vector cache).
    for module in (maintenance, vector_cache):
        monkeypatch.setattr(module, "LABEL_PAIRS", 0 if by_label else 10**12)
    outcomes = []
    for path, full in ((backend_store, False), (another_store, True)):
        with MemoryEngine(path, clock=FakeClock(T0)) as engine:
            engine.store_many(items_of(300, unit(5_000)))
            lone = (
                engine.store("item", subdomain="a", tags=["x"], vector=unit(5_000))
                if single
                else None
            )
            engine.fold(full=True)
            twin = engine.store(
                "item 9000", subdomain=labels[0], tags=labels[1], vector=near(unit(5_000), 1, 0.01)
            )
            report = engine.fold(full=full)
            assert report.incremental != full
            merged = {frozenset(members) for members in report.folded_from.values()}
            pair = {frozenset({lone.record_id, twin.record_id})} if lone else set()
            assert merged == (pair if merges else set())
            outcomes.append((report.created_ids, sorted(engine.match_ids())))
    assert outcomes[0] == outcomes[1]


def test_the_sizes_a_fold_leaves_cover_every_live_record(
    store_path: Path, clock: FakeClock
) -> None:
    with MemoryEngine(store_path, clock=clock) as engine:
        engine.store_many(items_of(50, unit(900)))
        engine.fold()
        engine.store("a note of five words", vector=unit(900))
        engine.store("item", domain="other", vector=unit(901))
        engine.fold()
        state = fold_marks.fold_state(engine.storage)
        assert state is not None
        sizes = maintenance._word_sizes(engine.storage, state[0])
        assert sizes is not None
        db = engine.storage.db  # type: ignore[attr-defined]
        for scope, domain, content in db.execute("SELECT scope, domain, content FROM records"):
            assert len(word_set(content)) in sizes[f"{scope}\x00{domain}"].tolist()
        # A fold that counts no words leaves no sizes to rely on.
        engine.fold(full=True, policy=FoldPolicy(exhaustive=True))
        state = fold_marks.fold_state(engine.storage)
        assert state is not None and maintenance._word_sizes(engine.storage, state[0]) is None


def test_a_record_changed_to_a_near_duplicate_after_a_fold_is_screened_again(
    backend_store: str,
) -> None:
    with MemoryEngine(backend_store, clock=FakeClock(T0)) as engine:
        engine.store_many(items_of(300, unit(7_000)))
        kept = engine.store("the crane rota for pier four", vector=unit(7_000))
        other = engine.store("item", vector=unit(7_001))
        engine.fold(full=True)
        engine.fold()  # screens what the full fold left, and notes what it screened
        engine.store("item 9000", vector=unit(7_002))
        engine.fold()
        # Unchanged since two folds screened it, then changed to fold with ``kept``.
        engine.update(other.record_id, content="the crane rota for pier four!", vector=unit(7_000))
        report = engine.fold()
        assert report.incremental
        assert [set(m) for m in report.folded_from.values()] == [{kept.record_id, other.record_id}]
