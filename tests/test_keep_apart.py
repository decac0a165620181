"""Folding as a user expects: an unfold is remembered, a summary says each thing once,
and restoring an updated record says what happened."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from prime_memory_folding import InvalidInput, MemoryEngine, Record
from prime_memory_folding.fold.folding import SAME_SENTENCE, plan_fold, summarise
from prime_memory_folding.storage import archive, fold_marks
from prime_memory_folding.storage.migrations import MIGRATIONS
from prime_memory_folding.storage.pg_schema import PG_MIGRATIONS
from tests.conftest import FakeClock

DIM = 8


def unit(seed: int) -> list[float]:
    return np.random.default_rng(seed).normal(size=DIM).tolist()


def near(vector: list[float], seed: int, noise: float = 0.02) -> list[float]:
    jitter = np.random.default_rng(seed).normal(scale=noise, size=len(vector))
    return (np.asarray(vector) + jitter).tolist()


def family(engine: MemoryEngine, seed: int, n: int) -> list[Record]:
    """``n`` near-duplicates: one fold merges them all."""
    centre = unit(seed)
    return [
        engine.store(
            f"Fact {seed} variant {i}. Shared sentence {seed}.",
            vector=near(centre, i + 100 * seed),
            tags=["db"],
        )
        for i in range(n)
    ]


def ids(records: list[Record]) -> set[str]:
    return {r.record_id for r in records}


def folded_groups(engine: MemoryEngine) -> list[set[str]]:
    """The member sets of the live folded records."""
    return [
        set(hit.record.metadata["folded_from"])
        for hit in engine.query(tags=["folded"], limit=1_000)
    ]


def unfold_once(engine: MemoryEngine, members: list[Record]) -> list[Record]:
    report = engine.fold()
    assert report.clustered == 1
    (folded,) = report.created_ids
    return engine.unfold(folded)


# -- an unfold is remembered --------------------------------------------------------


def test_fold_after_unfold_leaves_the_group_apart(backend_engine: MemoryEngine) -> None:
    members = family(backend_engine, 1, 3)
    back = unfold_once(backend_engine, members)
    assert ids(back) == ids(members)
    for full in (False, True):
        report = backend_engine.fold(full=full)
        assert report.clustered == 0
        assert set(backend_engine.match_ids()) == ids(members)


def test_each_record_kept_apart_may_still_merge_with_others(
    backend_engine: MemoryEngine,
) -> None:
    a, b = family(backend_engine, 1, 2)
    unfold_once(backend_engine, [a, b])
    c = family(backend_engine, 1, 3)[2]  # a third near-duplicate of both
    report = backend_engine.fold()
    assert report.clustered == 1
    (group,) = report.folded_from.values()
    assert c.record_id in group and len(group) == 2
    # The folded record stands for its member: the other one never joins it.
    assert backend_engine.fold(full=True).clustered == 0
    assert len(backend_engine.match_ids()) == 2


def test_a_keep_apart_survives_reopening_the_store(store_path: Path, clock: FakeClock) -> None:
    with MemoryEngine(store_path, clock=clock) as memory:
        members = family(memory, 2, 2)
        unfold_once(memory, members)
    with MemoryEngine(store_path, clock=clock) as memory:
        assert memory.fold(full=True).clustered == 0
        assert set(memory.match_ids()) == ids(members)


def test_merge_again_lets_them_merge(backend_engine: MemoryEngine) -> None:
    members = family(backend_engine, 3, 3)
    unfold_once(backend_engine, members)
    first = sorted(ids(members))[0]
    preview = backend_engine.fold(dry_run=True, merge_again=[first])
    assert preview.clustered == 1
    assert backend_engine.fold().clustered == 0  # the preview forgot nothing
    report = backend_engine.fold(merge_again=[first])
    assert report.clustered == 1
    assert set(next(iter(report.folded_from.values()))) == ids(members)


def test_merge_again_of_a_record_kept_apart_from_nothing_changes_nothing(
    engine: MemoryEngine,
) -> None:
    members = family(engine, 4, 2)
    with pytest.raises(InvalidInput, match="kept apart from nothing") as raised:
        engine.fold(merge_again=[members[0].record_id])
    assert "\n" not in str(raised.value)
    with pytest.raises(InvalidInput, match="not one string"):
        engine.fold(merge_again=members[0].record_id)
    assert set(engine.match_ids()) == ids(members)
    assert engine.stats().records == 2


def test_forget_restore_and_purge_leave_the_groups_consistent(
    backend_engine: MemoryEngine, clock: FakeClock
) -> None:
    a, b, c = family(backend_engine, 5, 3)
    unfold_once(backend_engine, [a, b, c])
    backend_engine.forget(a.record_id)
    assert backend_engine.fold().clustered == 0  # b and c stay apart without a
    backend_engine.restore(a.record_id)
    assert backend_engine.fold(full=True).clustered == 0
    backend_engine.forget(a.record_id)
    clock.advance(10)
    assert backend_engine.purge_archive() >= 1
    groups = fold_marks.kept_apart(backend_engine.storage)  # type: ignore[arg-type]
    assert groups == [frozenset({b.record_id, c.record_id})]
    backend_engine.forget(b.record_id)
    backend_engine.purge_archive()
    assert fold_marks.kept_apart(backend_engine.storage) == []  # type: ignore[arg-type]
    assert backend_engine.fold(full=True).clustered == 0
    assert set(backend_engine.match_ids()) == {c.record_id}


def test_unfolding_a_fold_of_a_kept_record_keeps_both_groups(engine: MemoryEngine) -> None:
    a, b = family(engine, 6, 2)
    unfold_once(engine, [a, b])
    c = family(engine, 6, 3)[2]
    report = engine.fold()
    (folded,) = report.created_ids
    engine.unfold(folded)
    assert engine.fold(full=True).clustered == 0
    assert set(engine.match_ids()) == ids([a, b, c])


# -- the plan honours every group kept apart ----------------------------------------


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    families=st.lists(st.integers(2, 5), min_size=1, max_size=4),
    picks=st.lists(st.lists(st.integers(0, 19), min_size=2, max_size=4), max_size=4),
)
def test_no_fold_merges_two_records_of_a_group_kept_apart(
    tmp_path_factory: pytest.TempPathFactory, families: list[int], picks: list[list[int]]
) -> None:
    path = tmp_path_factory.mktemp("apart") / "memory.db"
    with MemoryEngine(path, clock=FakeClock()) as memory:
        stored = [r for seed, n in enumerate(families) for r in family(memory, seed + 10, n)]
        record_ids = [r.record_id for r in stored]
        groups = [frozenset(record_ids[i % len(record_ids)] for i in pick) for pick in picks]
        groups = [g for g in groups if len(g) > 1]
        storage = memory.storage
        snapshot = archive.read_snapshot_columns(storage, None)  # type: ignore[arg-type]
        plan = plan_fold(snapshot, memory.fold_policy, memory.now(), kept_apart=groups)
        for merge in plan.merges:
            for group in groups:
                assert len(group.intersection(merge.member_ids)) <= 1
        with storage.exclusive():  # type: ignore[attr-defined]
            for group in groups:
                fold_marks.add_kept_apart(storage, sorted(group))  # type: ignore[arg-type]
        report = memory.fold()
        for members in report.folded_from.values():
            for group in groups:
                assert len(group.intersection(members)) <= 1
        # Nothing is lost: every record is live or in the archive.
        archived = {e.record.record_id for e in memory.archive_entries(limit=1_000).entries}
        assert set(record_ids) <= set(memory.match_ids()) | archived


# -- a merged summary says each thing once ------------------------------------------


def test_a_summary_keeps_the_first_of_sentences_that_say_the_same() -> None:
    text = summarise(
        [
            "Run pytest with -n 0 when debugging the flaky sync test.",
            "When debugging the flaky sync test, run pytest with -n 0 so output stays in order.",
            "Run pytest with -n 0.",
        ],
        500,
    )
    assert text == "Run pytest with -n 0 when debugging the flaky sync test."


@pytest.mark.parametrize(
    "contents",
    [
        ["Deploys run on Fridays.", "Deploys run on Thursdays."],
        ["It is fast.", "It is not fast."],
        ["We use SQLite.", "We use Postgres."],
        ["Fact 1 variant 0.", "Fact 1 variant 1."],
    ],
)
def test_a_summary_keeps_sentences_that_say_different_things(contents: list[str]) -> None:
    assert summarise(contents, 500) == " ".join(contents)
    assert 0.5 < SAME_SENTENCE < 1


def test_unfold_after_a_trimmed_summary_restores_the_members_exactly(
    backend_engine: MemoryEngine,
) -> None:
    centre = unit(7)
    texts = [
        "Run pytest with -n 0 when debugging the flaky sync test.",
        "When debugging the flaky sync test, run pytest with -n 0 so output stays in order.",
    ]
    members = [
        backend_engine.store(text, vector=near(centre, i), tags=["tests"])
        for i, text in enumerate(texts)
    ]
    report = backend_engine.fold()
    (folded,) = report.created_ids
    assert backend_engine.get(folded).content == texts[0]
    back = backend_engine.unfold(folded)
    assert sorted(r.content for r in back) == sorted(texts)
    assert {r.record_id: r for r in back} == {r.record_id: r for r in members}


# -- restore on an updated record ---------------------------------------------------


def test_restore_of_an_updated_record_says_it_is_history(engine: MemoryEngine) -> None:
    rec = engine.store("Deploys run on Fridays")
    engine.update(rec.record_id, content="Deploys run on Thursdays")
    with pytest.raises(InvalidInput) as raised:
        engine.restore(rec.record_id)
    message = str(raised.value)
    assert "updated" in message and "history" in message and "\n" not in message
    assert "stored again" not in message
    assert engine.get(rec.record_id).content == "Deploys run on Thursdays"
    assert [v.record.content for v in engine.history(rec.record_id)] == ["Deploys run on Fridays"]
    # Forgotten after the update, it comes back as it was last.
    engine.forget(rec.record_id)
    assert engine.restore(rec.record_id).content == "Deploys run on Thursdays"


def test_keep_apart_for_one_fold_lets_the_next_fold_merge(backend_engine: MemoryEngine) -> None:
    members = family(backend_engine, 8, 2)
    report = backend_engine.fold(keep_apart=[members[0].record_id])
    assert report.clustered == 0
    assert fold_marks.kept_apart(backend_engine.storage) == []  # type: ignore[arg-type]
    assert backend_engine.fold().clustered == 1  # incremental, yet it screens them again


def test_migration_12_creates_the_table_of_groups_kept_apart(engine: MemoryEngine) -> None:
    db = engine.storage.db  # type: ignore[attr-defined]
    columns = [row[1] for row in db.execute("PRAGMA table_info(fold_apart)")]
    assert columns == ["set_id", "record_id"]
    indexes = {row[1] for row in db.execute("PRAGMA index_list(fold_apart)")}
    assert "fold_apart_record" in indexes
    versions = [m.version for m in MIGRATIONS]
    assert len(versions) == len(set(versions)) and 12 in versions
    assert {m.version: m.name for m in PG_MIGRATIONS}[4] == "create_fold_apart"
