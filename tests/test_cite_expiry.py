"""Checking memories about code on demand, and their expiry: a memory that cites code
and was neither used nor verified for ``cite_expiry_days`` decays faster, and a fold
archives it as ``stale`` once its citations are. Both backends."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import numpy as np
import pytest

from prime_memory_folding import CitationReport, CitationState, FoldPolicy, MemoryEngine
from prime_memory_folding.engine import cite_check
from prime_memory_folding.errors import InvalidInput, NotFound
from prime_memory_folding.fold import folding
from prime_memory_folding.storage import archive
from tests.conftest import FakeClock
from tests.git_repos import CLIENT, make_repo

DAY = 86_400.0


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    files = {"src/client.py": CLIENT, "src/db.py": "def connect(path):\n    return path\n"}
    return make_repo(tmp_path / "project", files)


def lines(engine: MemoryEngine, repo: Path, text: str, span: str = "10-12") -> str:
    record = engine.store(text, cites=[{"path": "src/client.py", "lines": span}], repo=repo)
    return record.record_id


def change_line(repo: Path, n: int) -> None:
    (repo / "src" / "client.py").write_text(CLIENT.replace(f"line {n}\n", f"line {n} changed\n"))


def verified_at(engine: MemoryEngine, record_id: str) -> float | None:
    found = {rid: at for rid, _, _, at in cite_check.cited_records(engine.storage)}
    return found[record_id]


# -- check --------------------------------------------------------------------------


def test_check_counts_each_state_and_lists_stale_and_moved_memories(
    backend_engine: MemoryEngine, repo: Path
) -> None:
    engine = backend_engine
    kept = lines(engine, repo, "the first lines", "1-2")
    moved = lines(engine, repo, "the middle lines", "10-12")
    stale = lines(engine, repo, "the last lines", "25-26")
    plain = engine.store("a memory about nothing in particular").record_id
    # Three lines in front push 10-12 down; line 25 changes.
    text = CLIENT.replace("line 25\n", "line 25 changed\n")
    (repo / "src" / "client.py").write_text("a\nb\nc\n" + text)
    report = engine.check_citations()
    assert isinstance(report, CitationReport)
    assert (report.memories, report.citations) == (3, 3)
    assert (report.verified, report.moved, report.stale, report.unchecked) == (0, 2, 1, 0)
    found = dict(report.findings)
    assert plain not in found and kept in found  # 1-2 moved down too
    assert found[moved][0].state == "moved" and found[moved][0].lines == "13-15"
    assert found[stale][0].state == "stale"
    assert report.stale_memories == 1
    assert [rid for rid, _ in report.findings] == sorted(found)


def test_check_notes_when_each_memory_was_verified(
    backend_engine: MemoryEngine, repo: Path, clock: FakeClock
) -> None:
    engine = backend_engine
    good = lines(engine, repo, "retries", "10-12")
    bad = lines(engine, repo, "the end", "29-30")
    change_line(repo, 30)
    assert verified_at(engine, good) is None
    clock.advance(3 * DAY)
    report = engine.check_citations()
    assert report.checked_at == clock.now and report.verified_memories == 1
    assert verified_at(engine, good) == clock.now
    assert verified_at(engine, bad) is None
    before = engine.get(good)
    clock.advance(DAY)
    engine.check_citations()
    assert verified_at(engine, good) == clock.now
    # Nothing of the record changed, and no history was written.
    assert engine.get(good) == before
    assert engine.history(good) == []


def test_check_reads_the_scopes_a_query_reads(backend_engine: MemoryEngine, repo: Path) -> None:
    engine = backend_engine
    here = lines(engine, repo, "in global")
    there = engine.store(
        "elsewhere",
        cites=[{"path": "src/db.py", "symbol": "connect"}],
        repo=repo,
        scope="project:other",
    ).record_id
    (repo / "src" / "db.py").write_text("def connect(path, mode):\n    return path\n")
    default = engine.check_citations()
    assert default.memories == 1 and default.stale == 0
    everything = engine.check_citations(scopes=["*"])
    assert everything.memories == 2 and [rid for rid, _ in everything.findings] == [there]
    only = engine.check_citations(scopes=["project:other"])
    assert only.memories == 1 and only.stale == 1
    assert here not in dict(only.findings)


def test_check_reports_progress(backend_engine: MemoryEngine, repo: Path) -> None:
    for n in range(3):
        lines(backend_engine, repo, f"memory {n}", f"{n + 1}-{n + 1}")
    seen: list[tuple[int, int]] = []
    backend_engine.check_citations(progress=lambda done, total: seen.append((done, total)))
    assert seen[0] == (0, 3) and seen[-1] == (3, 3)


def test_citations_of_one_record_live_or_archived(backend_engine: MemoryEngine, repo: Path) -> None:
    engine = backend_engine
    rid = lines(engine, repo, "retries")
    (state,) = engine.citations(rid)
    assert isinstance(state, CitationState) and state.state == "verified"
    change_line(repo, 11)
    assert engine.citations(rid)[0].state == "stale"
    engine.forget(rid)
    assert engine.citations(rid)[0].state == "stale"
    plain = engine.store("cites nothing").record_id
    assert engine.citations(plain) == ()
    with pytest.raises(NotFound):
        engine.citations("0000000b0000000200c0ffee12345678")


# -- expiry in a fold ----------------------------------------------------------------


def stale_entry(engine: MemoryEngine, rid: str) -> archive.ArchiveEntry | None:
    return archive.archived(engine.storage, rid)


def test_a_fold_archives_an_expired_stale_memory_and_restore_brings_it_back(
    backend_engine: MemoryEngine, repo: Path, clock: FakeClock
) -> None:
    engine = backend_engine
    rid = lines(engine, repo, "the client retries three times")
    plain = engine.store("a memory about nothing in particular").record_id
    change_line(repo, 11)
    early = engine.fold(now=clock.now + 27 * DAY)
    assert early.stale == 0  # stale, but not yet expired
    report = engine.fold(now=clock.now + 29 * DAY)
    assert report.stale == 1 and report.stale_ids == (rid,)
    assert "src/client.py" in report.stale_details[rid]
    assert report.records_after == report.records_before - 1
    entry = stale_entry(engine, rid)
    assert entry is not None and entry.reason == "stale"
    assert "src/client.py" in entry.detail and "changed" in entry.detail
    assert [e.record.record_id for e in engine.archive_entries(reason="stale").entries] == [rid]
    assert engine.get(plain).content == "a memory about nothing in particular"
    with pytest.raises(NotFound):
        engine.get(rid)
    back = engine.restore(rid)
    assert back.record_id == rid and engine.get(rid).metadata["cites"]


def test_a_dry_run_reports_stale_memories_and_archives_nothing(
    backend_engine: MemoryEngine, repo: Path, clock: FakeClock
) -> None:
    engine = backend_engine
    rid = lines(engine, repo, "retries")
    change_line(repo, 10)
    report = engine.fold(dry_run=True, now=clock.now + 29 * DAY)
    assert report.dry_run and report.stale == 1 and report.stale_ids == (rid,)
    assert engine.get(rid).record_id == rid
    assert stale_entry(engine, rid) is None


def test_a_memory_used_recently_is_kept(
    backend_engine: MemoryEngine, repo: Path, clock: FakeClock
) -> None:
    engine = backend_engine
    rid = lines(engine, repo, "retries")
    change_line(repo, 10)
    clock.advance(20 * DAY)
    engine.reinforce(rid)
    clock.advance(9 * DAY)
    assert engine.fold().stale == 0
    assert engine.get(rid).record_id == rid
    clock.advance(20 * DAY)  # 29 days after its last use
    assert engine.fold().stale_ids == (rid,)


def test_a_memory_verified_recently_is_kept(
    backend_engine: MemoryEngine, repo: Path, clock: FakeClock
) -> None:
    engine = backend_engine
    rid = lines(engine, repo, "retries")
    clock.advance(20 * DAY)
    assert engine.check_citations().verified_memories == 1
    change_line(repo, 10)  # stale since the check
    clock.advance(9 * DAY)
    assert engine.fold().stale == 0
    assert engine.get(rid).record_id == rid
    clock.advance(20 * DAY)
    assert engine.fold().stale_ids == (rid,)


def test_a_stale_check_does_not_count_as_verified(
    backend_engine: MemoryEngine, repo: Path, clock: FakeClock
) -> None:
    engine = backend_engine
    rid = lines(engine, repo, "retries")
    change_line(repo, 10)
    clock.advance(20 * DAY)
    assert engine.check_citations().verified_memories == 0
    clock.advance(9 * DAY)
    assert engine.fold().stale_ids == (rid,)


def test_a_memory_whose_repository_is_gone_is_never_stale(
    backend_engine: MemoryEngine, repo: Path, clock: FakeClock
) -> None:
    engine = backend_engine
    rid = lines(engine, repo, "retries")
    shutil.rmtree(repo)
    assert engine.citations(rid)[0].state == "unchecked"
    report = engine.fold(now=clock.now + 60 * DAY)
    assert report.stale == 0 and engine.get(rid).record_id == rid


def test_expiry_zero_never_expires(
    backend_engine: MemoryEngine, repo: Path, clock: FakeClock
) -> None:
    rid = lines(backend_engine, repo, "retries")
    change_line(repo, 10)
    report = backend_engine.fold(now=clock.now + 400 * DAY, policy=FoldPolicy(cite_expiry_days=0))
    assert report.stale == 0 and backend_engine.get(rid).record_id == rid


def test_an_expired_memory_decays_faster_and_is_pruned(
    backend_engine: MemoryEngine, repo: Path, clock: FakeClock
) -> None:
    """Default policy: long-term half-life 365 days, expiry after 28, then 4 times faster.

    Its strength falls below 0.05 about 415 days after storing (28 + (4.32 - 28/365)
    * 365 / 4); a memory that cites nothing keeps 2 ** (-420 / 365) = 0.45.
    """
    engine = backend_engine
    cited = lines(engine, repo, "retries")  # the code stays as cited: never stale
    plain = engine.store("a memory about nothing in particular").record_id
    first = engine.fold()
    assert first.pruned == 0
    report = engine.fold(now=clock.now + 420 * DAY)
    assert report.incremental  # found due from the prune moment kept at store time
    assert report.pruned_ids == (cited,) and report.stale == 0
    entry = stale_entry(engine, cited)
    assert entry is not None and entry.reason == "pruned"
    assert engine.get(plain).record_id == plain
    # The expected strength: 28 days at the normal rate, 392 at four times it.
    expected = 2.0 ** (-28 / 365 - 392 * 4 / 365)
    assert report.pruned_strengths[cited] == pytest.approx(expected, rel=1e-9)


def test_a_memory_citing_nothing_decays_exactly_as_before(
    store_path: Path, tmp_path: Path, repo: Path, clock: FakeClock
) -> None:
    """The same memories, folded with expiry on and off: the same strengths, to the bit."""
    reports = []
    for name, policy in (("on", FoldPolicy()), ("off", FoldPolicy(cite_expiry_days=0))):
        with MemoryEngine(
            tmp_path / f"{name}.db", clock=FakeClock(clock.now), fold_policy=policy
        ) as engine:
            engine.store("a working note", importance=0.2)
            engine.store("a short-term note", importance=0.4)
            engine.store("a long-term note")
            engine.store("cites code", cites=[{"path": "src/db.py"}], repo=repo)
            preview = engine.fold(now=clock.now + 40 * DAY, dry_run=True, full=True)
            done = engine.fold(now=clock.now + 40 * DAY, full=True)
            plain = [rid for rid in engine.match_ids() if not engine.get(rid).metadata.get("cites")]
            # What the fold wrote back: decayed strengths, and when each fades out.
            strengths = {rid: engine.get(rid).strength for rid in plain}
            marks = dict(
                engine.storage.db.execute("SELECT record_id, prune_at FROM fold_marks").fetchall()
            )
            reports.append(
                (
                    preview.pruned_strengths,
                    done.pruned_strengths,
                    strengths,
                    {rid: marks.get(rid) for rid in plain},
                )
            )
    assert reports[0] == reports[1]
    # The working and short-term notes fade out; the long-term one decayed a little.
    assert len(reports[0][0]) == 2 and len(reports[0][2]) == 1
    assert 0.9 < next(iter(reports[0][2].values())) < 1.0


def test_the_decay_of_rows_that_do_not_expire_is_untouched() -> None:
    rng = np.random.default_rng(7)
    strength = rng.uniform(0.1, 1.0, 50)
    since = rng.uniform(0, 1e6, 50)
    half = rng.uniform(1e4, 1e7, 50)
    half[3] = math.inf
    now = 2e6
    effective = strength * np.exp2(-np.maximum(now - since, 0.0) / half)
    knee = np.full(50, math.inf)
    knee[:10] = since[:10] + 100.0  # expired
    knee[10:20] = now + 1.0  # not yet
    out = folding.expired_strengths(effective, strength, since, half, knee, now, 4.0)
    assert out[10:].tobytes() == effective[10:].tobytes()
    assert np.all(out[:10][np.isfinite(half[:10])] < effective[:10][np.isfinite(half[:10])])
    assert out[3] == effective[3]  # permanent: never decays
    moments = folding.prune_moments(strength, since, half, 0.05)
    faster = folding.prune_moments_expiring(moments, strength, since, half, knee, 0.05, 4.0)
    assert faster[20:].tobytes() == moments[20:].tobytes()  # never expire
    # Those that expire later fade out earlier, once past their expiry, or as before.
    later = faster[10:20][np.isfinite(moments[10:20])]
    assert np.all(later <= moments[10:20][np.isfinite(moments[10:20])])
    # At its new moment an expired row's strength is the threshold.
    for i in range(10):
        if math.isfinite(faster[i]) and faster[i] > knee[i]:
            at = float(faster[i])
            one = folding.expired_strengths(
                effective[i : i + 1], strength[i : i + 1], since[i : i + 1],
                half[i : i + 1], knee[i : i + 1], at, 4.0,
            )  # fmt: skip
            assert one[0] == pytest.approx(0.05, rel=1e-9)


def test_the_policy_checks_its_expiry_fields() -> None:
    assert FoldPolicy().cite_expiry_days == 28.0 and FoldPolicy().cite_expiry_factor == 4.0
    for bad in (-1, math.inf, math.nan, "28", True):
        with pytest.raises(InvalidInput, match="cite_expiry_days"):
            FoldPolicy(cite_expiry_days=bad)  # type: ignore[arg-type]
    for bad in (0.5, 101, math.nan):
        with pytest.raises(InvalidInput, match="cite_expiry_factor"):
            FoldPolicy(cite_expiry_factor=bad)
    from prime_memory_folding.engine.maintenance import policy_key

    assert policy_key(FoldPolicy()) != policy_key(FoldPolicy(cite_expiry_days=7))
    assert policy_key(FoldPolicy()) != policy_key(FoldPolicy(cite_expiry_factor=2))


def test_a_memory_whose_metadata_only_mentions_cites_is_no_memory_about_code(
    backend_engine: MemoryEngine, clock: FakeClock
) -> None:
    """The index of memories about code matches the word; the metadata decides."""
    engine = backend_engine
    rid = engine.store("a plain memory", metadata={"kind": "cites"}).record_id
    assert rid in {found for found, _, _, _ in cite_check.cited_records(engine.storage)}
    report = engine.check_citations()
    assert (report.memories, report.citations) == (0, 0)
    assert engine.citations(rid) == ()
    folded = engine.fold(now=clock.now + 420 * DAY)
    assert folded.pruned == 0 and folded.stale == 0
    assert engine.get(rid).record_id == rid
