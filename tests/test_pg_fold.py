"""Folding and the archive on PostgreSQL: the same results as on SQLite, and safe across servers.

Each comparison runs the same steps, under the same clock, on an SQLite file
and on a PostgreSQL store, and compares what each store then holds: its live
records (a pack export, vectors included) and its archive, entry by entry.
"""

from __future__ import annotations

import io
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from prime_memory_folding import InvalidInput, MemoryEngine, NotFound
from prime_memory_folding.fold.folding import FoldPolicy
from prime_memory_folding.transfer.packs import export_pack
from tests.conftest import FakeClock
from tests.pg_helpers import new_schema

DAY = 86_400.0
Snapshot = tuple[list[str], list[tuple[Any, ...]]]


def state(engine: MemoryEngine) -> Snapshot:
    """Every live record (as exported, vectors too) and every archive entry, in order."""
    out = io.StringIO()
    export_pack(engine, out, vectors=True)
    lines = out.getvalue().splitlines()
    listing = engine.archive_entries(limit=1_000)
    entries = [
        (e.record.record_id, e.reason, e.detail, e.folded_into, e.archived_at, e.record)
        for e in reversed(listing.entries)
    ]
    assert listing.total == len(entries)
    return lines[1:], entries


def live_ids(engine: MemoryEngine) -> set[str]:
    return set(engine.match_ids(scopes=["*"]))


def populate(engine: MemoryEngine, clock: FakeClock, salt: int = 0) -> None:
    """Near-duplicate groups, loners, faint records, two scopes and two domains."""
    rng = np.random.default_rng(7 + salt)
    base = rng.normal(size=(6, 8))
    for group in range(6):
        for twin in range(3):
            vector = base[group] + rng.normal(scale=0.02, size=8)
            engine.store(
                f"Group {group} fact: run the {group} deploy step with care, variant {twin}",
                domain="ops" if group % 2 else "memory",
                subdomain="procedural",
                tags=["deploy", f"g{group}"],
                vector=vector.tolist(),
                importance=0.4 + 0.1 * twin,
                scope="global" if group < 4 else "project:alpha",
            )
            clock.advance(60)
    for i in range(5):
        engine.store(
            f"Scratch note number {i} about lunch plans",
            importance=0.05,
            vector=rng.normal(size=8).tolist(),
        )
    engine.store("A permanent rule: never force-push main", importance=0.95, tags=["git"])


class Clocks:
    """One clock per store, all at the same time."""

    def __init__(self, count: int) -> None:
        self.clocks = [FakeClock() for _ in range(count)]

    def advance(self, seconds: float) -> None:
        for clock in self.clocks:
            clock.advance(seconds)


@pytest.fixture
def clocks() -> Clocks:
    return Clocks(2)


@pytest.fixture
def pair(tmp_path: Path, pg_url: str, clocks: Clocks) -> Iterator[list[MemoryEngine]]:
    """An SQLite store and a PostgreSQL store, each on its clock."""
    engines = [
        MemoryEngine(tmp_path / "fold.db", clock=clocks.clocks[0]),
        MemoryEngine(pg_url, clock=clocks.clocks[1]),
    ]
    yield engines
    for engine in engines:
        engine.close()


def populate_both(engines: list[MemoryEngine], clocks: Clocks) -> None:
    for engine, clock in zip(engines, clocks.clocks):
        populate(engine, clock)


def both(engines: list[MemoryEngine], act: Callable[[MemoryEngine], Any]) -> list[Any]:
    return [act(engine) for engine in engines]


def same_state(engines: list[MemoryEngine]) -> Snapshot:
    sqlite, postgres = (state(engine) for engine in engines)
    assert sqlite[0] == postgres[0]
    assert sqlite[1] == postgres[1]
    return sqlite


def test_folds_leave_the_same_store_on_sqlite_and_postgresql(
    pair: list[MemoryEngine], clocks: Clocks
) -> None:
    populate_both(pair, clocks)
    clocks.advance(40 * DAY)
    previews = both(pair, lambda e: e.fold(dry_run=True))
    reports = both(pair, lambda e: e.fold())
    for preview, report in zip(previews, reports):
        assert (report.clustered, report.pruned) == (preview.clustered, preview.pruned)
        assert report.created_ids == preview.created_ids
    assert reports[0].created_ids == reports[1].created_ids
    assert reports[0].pruned_ids == reports[1].pruned_ids
    assert reports[0].clustered >= 4 and reports[0].pruned >= 5
    _, entries = same_state(pair)
    assert {reason for _, reason, *_ in entries} == {"folded", "pruned"}

    # An incremental fold, after new near-duplicates of a folded record arrive.
    for engine in pair:
        merged = engine.get(reports[0].created_ids[0])
        engine.store(
            merged.content + " (again)",
            domain=merged.domain,
            subdomain=merged.subdomain,
            tags=list(merged.tags),
            vector=list(merged.vector or ()),
            scope=merged.scope,
        )
    clocks.advance(DAY)
    again = both(pair, lambda e: e.fold())
    assert again[0].incremental and again[1].incremental
    assert again[0].created_ids == again[1].created_ids
    assert again[0].clustered == 1
    same_state(pair)

    # A full fold decays every record and writes the strengths back.
    clocks.advance(10 * DAY)
    full = both(pair, lambda e: e.fold(full=True))
    assert not full[0].incremental and not full[1].incremental
    assert full[0].decayed == full[1].decayed > 0
    same_state(pair)


def test_keep_apart_leaves_the_same_groups_unmerged_on_both(
    pair: list[MemoryEngine], clocks: Clocks
) -> None:
    populate_both(pair, clocks)
    preview = pair[0].fold(dry_run=True)
    spared = next(iter(preview.folded_from.values()))[0]
    reports = both(pair, lambda e: e.fold(keep_apart=[spared]))
    assert reports[0].created_ids == reports[1].created_ids
    assert reports[0].clustered == preview.clustered - 1
    assert all(spared in live_ids(engine) for engine in pair)
    same_state(pair)


def test_unfold_restore_forget_history_and_purge_round_trip_on_both(
    pair: list[MemoryEngine], clocks: Clocks
) -> None:
    populate_both(pair, clocks)
    before = [live_ids(engine) for engine in pair]
    clocks.advance(40 * DAY)
    reports = both(pair, lambda e: e.fold())
    folded = reports[0].created_ids[0]
    faint = reports[0].pruned_ids[0]

    members = both(pair, lambda e: [r.record_id for r in e.unfold(folded)])
    assert members[0] == members[1] == list(reports[0].folded_from[folded])
    both(pair, lambda e: e.restore(faint))
    for engine in pair:
        with pytest.raises(InvalidInput, match="live, not archived"):
            engine.restore(faint)
        with pytest.raises(NotFound):
            engine.unfold(folded)
    same_state(pair)

    # forget moves a record to the archive (reason forgotten); restore brings it back.
    target = members[0][0]
    both(pair, lambda e: e.forget(target))
    listings = both(pair, lambda e: e.archive_entries(reason="forgotten"))
    assert [x.record.record_id for x in listings[0].entries] == [target]
    assert listings[0] == listings[1]
    both(pair, lambda e: e.restore(target))

    # update keeps the version it replaced; history lists it.
    clocks.advance(60)
    both(pair, lambda e: e.update(target, content="Group fact, corrected: deploy on Fridays"))
    histories = both(pair, lambda e: e.history(target))
    assert histories[0] == histories[1]
    assert len(histories[0]) == 1 and "variant" in histories[0][0].record.content

    # Filters: content (ASCII letters fold their case alike), record id, reason.
    for query in ({"contains": "SCRATCH NOTE"}, {"record_id": target}, {"reason": "replaced"}):
        listings = both(pair, lambda e, q=query: e.archive_entries(**q))  # type: ignore[misc]
        assert listings[0] == listings[1] and listings[0].total > 0
    sizes = both(pair, lambda e: e.stats().archived_by_reason)
    assert sizes[0] == sizes[1] and sizes[0]["replaced"] == 1
    same_state(pair)

    purged = both(pair, lambda e: e.purge_archive(reason="pruned"))
    assert purged[0] == purged[1] > 0
    assert both(pair, lambda e: e.stats().archived_by_reason.get("pruned")) == [None, None]
    assert both(pair, lambda e: e.purge_archive()) == [sum(sizes[0].values()) - purged[0]] * 2
    assert before[0] == before[1]
    same_state(pair)


def test_a_write_while_a_fold_plans_is_kept_on_both(tmp_path: Path, pg_url: str) -> None:
    """A record changed after the fold read the store: the fold plans again, nothing is lost."""
    results = []
    for path in (str(tmp_path / "race.db"), pg_url):
        clock = FakeClock()
        folder = MemoryEngine(path, clock=clock)
        writer = MemoryEngine(path, clock=clock)
        populate(folder, clock)
        clock.advance(40 * DAY)
        member = folder.fold(dry_run=True).folded_from
        first = next(iter(member.values()))[0]
        content = folder.get(first)

        def write_now(
            step: str, done: int, total: int, rec: Any = content, writer: Any = writer
        ) -> None:
            if step == "writing":  # planned, not yet written: another server stores again
                writer.store(
                    rec.content,
                    domain=rec.domain,
                    subdomain=rec.subdomain,
                    tags=list(rec.tags),
                    scope=rec.scope,
                    vector=list(rec.vector or ()),
                )

        folder.fold(progress=write_now)
        archived = folder.archive_entries(record_id=first).entries
        mine = [e for e in archived if e.record.record_id == first]
        assert len(mine) == 1 and mine[0].record.access_count == 1
        results.append(state(folder))
        folder.close()
        writer.close()
    assert results[0] == results[1]


def test_two_servers_folding_at_once_apply_the_merges_once(
    tmp_path: Path, pg_url: str, clocks: Clocks
) -> None:
    single = MemoryEngine(tmp_path / "single.db", clock=clocks.clocks[0])
    engines = [MemoryEngine(pg_url, clock=clocks.clocks[1]) for _ in range(2)]
    populate(single, clocks.clocks[0])
    populate(engines[0], clocks.clocks[1])
    clocks.advance(40 * DAY)
    expected = single.fold(dry_run=True)
    planned = threading.Barrier(2, timeout=60)
    reports: list[Any] = [None, None]
    errors: list[BaseException] = []

    def fold(i: int) -> None:
        def at(step: str, done: int, total: int) -> None:
            if step == "writing":  # both planned from the same store: now both write
                planned.wait()

        try:
            reports[i] = engines[i].fold(progress=at)
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=fold, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not errors
    assert sorted(r.clustered for r in reports) == [0, expected.clustered]
    assert sorted(r.pruned for r in reports) == [0, expected.pruned]
    entries = engines[0].archive_entries(limit=1_000).entries
    assert len({e.record.record_id for e in entries}) == len(entries)
    assert len(entries) == expected.folded + expected.pruned
    single.fold()
    assert state(single) == state(engines[1])
    for engine in (single, *engines):
        engine.close()


class _Letters:
    """A tiny deterministic embedder: letter counts, as a unit vector."""

    name = "test:letters"
    dim = 26

    def embed(self, texts: Any) -> Any:
        rows = np.zeros((len(texts), 26), dtype=np.float32)
        for i, text in enumerate(texts):
            for ch in text.lower():
                if "a" <= ch <= "z":
                    rows[i, ord(ch) - 97] += 1
        norms = np.linalg.norm(rows, axis=1, keepdims=True)
        return rows / np.where(norms > 0, norms, 1)


def test_reembed_and_flushed_recalls_match_on_both(
    pair: list[MemoryEngine], clocks: Clocks
) -> None:
    populate_both(pair, clocks)
    assert both(pair, lambda e: e.reembed(_Letters())) == [24, 24]
    probe = _Letters().embed(["deploy step"])[0].tolist()
    hits = both(pair, lambda e: [h.record.record_id for h in e.query(vector=probe, limit=3)])
    assert hits[0] == hits[1]
    clocks.advance(60)
    both(pair, lambda e: e.query(vector=probe, limit=3, reinforce=True))
    both(pair, lambda e: e.flush_recalls())
    assert [pair[1].get(rid).access_count for rid in hits[0]] == [1, 1, 1]
    same_state(pair)


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    groups=st.lists(st.integers(min_value=1, max_value=4), min_size=1, max_size=4),
    jitter=st.floats(min_value=0.0, max_value=0.05),
    seed=st.integers(min_value=0, max_value=1_000),
)
def test_fold_then_unfold_gives_back_the_same_live_set_on_both_backends(
    tmp_path_factory: pytest.TempPathFactory,
    pg_database: str,
    groups: list[int],
    jitter: float,
    seed: int,
) -> None:
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(len(groups), 6))
    outcomes = []
    for path in (str(tmp_path_factory.mktemp("prop") / "p.db"), new_schema(pg_database)):
        clock = FakeClock()
        engine = MemoryEngine(path, clock=clock, fold_policy=FoldPolicy(word_overlap=0.0))
        for g, size in enumerate(groups):
            for k in range(size):
                vector = centres[g] + np.random.default_rng(seed + g * 10 + k).normal(
                    scale=jitter, size=6
                )
                engine.store(f"memory {g} copy {k}", tags=[f"t{g}"], vector=vector.tolist())
        before = state(engine)[0]
        report = engine.fold()
        for created in report.created_ids:
            engine.unfold(created)
        after = state(engine)[0]
        assert sorted(after) == sorted(before)
        assert engine.archive_entries().total == 0
        outcomes.append((report.created_ids, report.folded_from, after))
        engine.close()
    assert outcomes[0] == outcomes[1]


def store_notes(engine: MemoryEngine, vectors: np.ndarray) -> None:
    """A note of four words of its own for each of ``vectors``."""
    for i, vector in enumerate(vectors):
        engine.store(f"zephyr{i} quokka{i} marimba{i} tundra{i}", vector=list(vector))


@pytest.mark.parametrize("text_cache_setting", ["on", "off"])
def test_an_incremental_fold_pairs_new_records_through_their_words(
    pg_url: str, monkeypatch: pytest.MonkeyPatch, text_cache_setting: str
) -> None:
    """On PostgreSQL an incremental fold looks a new record's rare words up in its
    text cache, as SQLite's own index answers them: no vector is compared for it.
    With the cache off, vectors are compared instead, and the fold merges the same."""
    from prime_memory_folding.engine import maintenance, text_cache

    monkeypatch.setenv(text_cache.SETTING, text_cache_setting)
    compared: list[int] = []
    similar = maintenance._similar

    def counted(engine: Any, fresh: Any, scan: Any, threshold: float) -> list[str]:
        compared.extend(scan)
        return similar(engine, fresh, scan, threshold)

    monkeypatch.setattr(maintenance, "_similar", counted)
    rng = np.random.default_rng(3)
    vectors = rng.normal(size=(30, 16))
    clock = FakeClock()
    with MemoryEngine(pg_url, clock=clock) as engine:
        store_notes(engine, vectors)
        clock.advance(DAY)
        assert engine.fold(full=True).clustered == 0
        twin = engine.store(
            "zephyr7 quokka7 marimba7 tundra7 again",
            vector=list(vectors[7] + rng.normal(scale=0.01, size=16)),
        )
        clock.advance(DAY)
        report = engine.fold()
        assert report.incremental and report.clustered == 1
        assert any(twin.record_id in ids for ids in report.folded_from.values())
        assert (compared == []) == (text_cache_setting == "on")


def test_a_fold_after_a_text_query_reads_the_store_s_text_no_more(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The engine's text queries and its folds share one text cache: a text query
    reads every record's text once, and an incremental fold after it looks its
    words up in that cache, caught up through the change log, not read again."""
    from prime_memory_folding.storage.postgres import PostgresStorage

    reads: list[int] = []
    batches = PostgresStorage.text_batches

    def counted(self: Any) -> Any:
        reads.append(1)
        return batches(self)

    monkeypatch.setattr(PostgresStorage, "text_batches", counted)
    rng = np.random.default_rng(5)
    vectors = rng.normal(size=(12, 16))
    clock = FakeClock()
    with MemoryEngine(pg_url, clock=clock) as engine:
        store_notes(engine, vectors)
        clock.advance(DAY)
        engine.fold(full=True)
        assert engine.query(text="quokka3", limit=3)
        assert len(reads) == 1
        engine.store(
            "zephyr3 quokka3 marimba3 tundra3 again",
            vector=list(vectors[3] + rng.normal(scale=0.01, size=16)),
        )
        clock.advance(DAY)
        report = engine.fold()
        assert report.incremental and report.clustered == 1
        assert len(reads) == 1
