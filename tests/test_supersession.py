"""Supersession: a newer memory closes an older one, which stays in history.

Both backends: ``store(supersedes=...)`` closes, ``query`` returns current
versions, ``query(as_of=...)`` what was valid then, ``chain`` walks versions,
restore and unfold work across a chain, and bad input changes nothing.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from prime_memory_folding import MemoryEngine
from prime_memory_folding.errors import InvalidInput, InvalidRecordId, NotFound
from prime_memory_folding.storage import archive

from .conftest import FakeClock
from .old_stores import build_store

DAY = 86_400.0


def ids(hits: list) -> list[str]:  # type: ignore[type-arg]
    return [hit.record.record_id for hit in hits]


def test_a_superseded_memory_leaves_queries_and_stays_in_its_chain(
    backend_engine: MemoryEngine, clock: FakeClock
) -> None:
    engine = backend_engine
    old = engine.store("The main database runs PostgreSQL 15", domain="decision")
    clock.advance(DAY)
    new = engine.store(
        "The main database runs PostgreSQL 16", domain="decision", supersedes=old.record_id
    )
    assert ids(engine.query("main database PostgreSQL")) == [new.record_id]
    assert ids(engine.query(domain="decision")) == [new.record_id]
    with pytest.raises(NotFound):
        engine.get(old.record_id)
    entry = archive.archived(engine.storage, old.record_id)
    assert entry is not None and entry.reason == "superseded"
    assert entry.folded_into == new.record_id and entry.archived_at == clock.now

    later = engine.chain(new.record_id)
    assert [link.record.record_id for link in later.predecessors] == [old.record_id]
    closed = later.predecessors[0]
    assert (closed.state, closed.valid_from, closed.valid_to) == (
        "superseded",
        old.created_at,
        clock.now,
    )
    assert later.version.state == "live" and later.version.valid_to is None
    assert "15" in later.version.change and "16" in later.version.change
    earlier = engine.chain(old.record_id)
    assert earlier.version.state == "superseded" and earlier.predecessors == ()
    assert [link.record.record_id for link in earlier.successors] == [new.record_id]
    assert engine.stats().archived_by_reason.get("superseded") == 1


def test_as_of_returns_what_was_valid_then(backend_engine: MemoryEngine, clock: FakeClock) -> None:
    engine = backend_engine
    start = clock.now
    first = engine.store("Releases are cut from the main branch every Friday")
    clock.advance(10 * DAY)
    second = engine.store(
        "Releases are cut from the main branch every Tuesday", supersedes=first.record_id
    )
    clock.advance(10 * DAY)
    third = engine.store(
        "Releases are cut from a release branch every Tuesday", supersedes=second.record_id
    )
    clock.advance(DAY)
    query = "when are releases cut"
    assert ids(engine.query(query)) == [third.record_id]
    assert ids(engine.query(query, as_of=start - 1)) == []
    assert ids(engine.query(query, as_of=start + DAY)) == [first.record_id]
    assert ids(engine.query(query, as_of=start + 15 * DAY)) == [second.record_id]
    assert ids(engine.query(query, as_of=clock.now)) == [third.record_id]
    # an age works as a time too, and a gate-only query as well as a text one
    assert ids(engine.query(as_of="5d")) == [second.record_id]
    chain = engine.chain(first.record_id)
    assert [link.record.record_id for link in chain.successors] == [
        second.record_id,
        third.record_id,
    ]
    assert [link.state for link in chain.successors] == ["superseded", "live"]


def test_as_of_gives_the_version_an_update_replaced_later(
    backend_engine: MemoryEngine, clock: FakeClock
) -> None:
    engine = backend_engine
    record = engine.store("The API timeout is 30 seconds")
    clock.advance(DAY)
    engine.update(record.record_id, content="The API timeout is 60 seconds")
    clock.advance(DAY)
    [hit] = engine.query("API timeout", as_of=record.created_at + 1)
    assert hit.record.content == "The API timeout is 30 seconds"
    [hit] = engine.query("API timeout")
    assert hit.record.content == "The API timeout is 60 seconds"
    chain = engine.chain(record.record_id)
    assert [link.state for link in chain.predecessors] == ["replaced"]
    assert chain.predecessors[0].valid_to == record.created_at + DAY
    assert chain.version.valid_from == record.created_at + DAY


def test_bad_supersedes_is_refused_and_changes_nothing(
    backend_engine: MemoryEngine, clock: FakeClock
) -> None:
    engine = backend_engine
    old = engine.store("Builds run on Jenkins", scope="project:alpha")
    other = engine.store("Builds run on Buildkite", scope="project:beta")
    before = (engine.stats().records, engine.stats().archived)

    def unchanged() -> None:
        assert (engine.stats().records, engine.stats().archived) == before
        assert engine.get(old.record_id).content == "Builds run on Jenkins"

    with pytest.raises(InvalidRecordId):
        engine.store("Builds run on GitHub Actions", scope="project:alpha", supersedes="nope")
    unchanged()
    with pytest.raises(NotFound):
        engine.store("Builds run on GitHub Actions", scope="project:alpha", supersedes="0" * 32)
    unchanged()
    with pytest.raises(InvalidInput, match="its own scope"):
        engine.store(
            "Builds run on GitHub Actions", scope="project:alpha", supersedes=other.record_id
        )
    unchanged()
    with pytest.raises(InvalidInput, match="cannot supersede itself"):
        engine.store("Builds run on Jenkins", scope="project:alpha", supersedes=old.record_id)
    unchanged()
    with pytest.raises(InvalidInput, match="item 1"):
        engine.store_many(
            [
                {"content": "Builds run on CircleCI", "scope": "project:alpha"},
                {"content": "x", "scope": "project:alpha", "supersedes": 7},
            ]
        )
    unchanged()
    twice = {"scope": "project:alpha", "supersedes": old.record_id}
    with pytest.raises(InvalidInput, match="twice"):
        engine.store_many(
            [{"content": "Builds run on A", **twice}, {"content": "Builds run on B", **twice}]
        )
    unchanged()


def test_superseding_a_closed_version_or_making_a_cycle_is_refused(
    backend_engine: MemoryEngine, clock: FakeClock
) -> None:
    engine = backend_engine
    first = engine.store("Frontend tests run with Jest")
    clock.advance(60)
    second = engine.store("Frontend tests run with Vitest", supersedes=first.record_id)
    clock.advance(60)
    with pytest.raises(InvalidInput, match=f"archived \\(superseded by {second.record_id}\\)"):
        engine.store("Frontend tests run with Mocha", supersedes=first.record_id)
    # The first text again gets the first id back: superseding its successor with it
    # would close a loop in the chain.
    records = engine.stats().records
    with pytest.raises(InvalidInput, match="cycle"):
        engine.store("Frontend tests run with Jest", supersedes=second.record_id)
    assert engine.stats().records == records
    assert ids(engine.query("frontend tests")) == [second.record_id]


def test_restore_reopens_a_closed_version_and_unfold_keeps_the_chain(
    backend_engine: MemoryEngine, clock: FakeClock
) -> None:
    engine = backend_engine
    direction = np.ones(8, dtype=np.float32)
    old = engine.store(
        "Deploys go out with the make release target, version one",
        vector=(direction + np.arange(8) * 0.5).tolist(),
        tags=["deploy"],
    )
    clock.advance(60)
    new = engine.store(
        "Deploys go out with the make ship target",
        vector=direction.tolist(),
        tags=["deploy"],
        supersedes=old.record_id,
    )
    twin = engine.store(
        "Deploys go out with the make ship target, from main",
        vector=(direction * 1.001).tolist(),
        tags=["deploy"],
    )
    clock.advance(40 * DAY)
    report = engine.fold()
    [folded] = [rid for rid, members in report.folded_from.items() if new.record_id in members]
    assert set(report.folded_from[folded]) == {new.record_id, twin.record_id}
    chain = engine.chain(old.record_id)
    assert [(link.record.record_id, link.state) for link in chain.successors] == [
        (new.record_id, "folded")
    ]
    engine.unfold(folded)
    chain = engine.chain(old.record_id)
    assert [(link.record.record_id, link.state) for link in chain.successors] == [
        (new.record_id, "live")
    ]
    restored = engine.restore(old.record_id)
    assert restored.content == old.content
    assert old.record_id in ids(engine.query(tags=["deploy"], limit=10))
    assert engine.chain(new.record_id).predecessors == ()


def test_a_restatement_is_offered_never_applied(
    backend_engine: MemoryEngine, clock: FakeClock
) -> None:
    engine = backend_engine
    for topic in ("lint rules", "the release train", "code review", "the staging database"):
        engine.store(f"A note on {topic}", scope="project:web")
    old = engine.store("The CI pipeline uses Node 18 for every job", scope="project:web")
    clock.advance(60)
    new = engine.store("The CI pipeline uses Node 20 for every job", scope="project:web")
    [hint] = engine.possibly_supersedes(new.record_id)
    assert hint.record == old and "18" in hint.change and "20" in hint.change
    assert engine.get(old.record_id).content == old.content  # still live
    assert engine.possibly_supersedes(old.record_id) == []  # only older memories
    # Another scope's memory is never offered; nor is an unrelated one.
    elsewhere = engine.store("The CI pipeline uses Node 22 for every job", scope="project:api")
    assert engine.possibly_supersedes(elsewhere.record_id) == []
    unrelated = engine.store("Lunch is at noon on Fridays", scope="project:web")
    assert engine.possibly_supersedes(unrelated.record_id) == []
    # Confirming it closes the old one, and the offer is gone.
    engine.store(
        "The CI pipeline uses Node 20 for every job, pinned in .nvmrc",
        scope="project:web",
        supersedes=old.record_id,
    )
    with pytest.raises(NotFound):
        engine.get(old.record_id)
    assert engine.possibly_supersedes(new.record_id) == []
    with pytest.raises(NotFound):
        engine.possibly_supersedes(old.record_id)


OPS = st.lists(
    st.tuples(st.sampled_from(["store", "supersede", "update", "restore"]), st.integers(0, 50)),
    min_size=1,
    max_size=25,
)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(ops=OPS)
def test_a_query_without_as_of_never_returns_a_closed_version(
    tmp_path_factory: pytest.TempPathFactory, ops: list[tuple[str, int]]
) -> None:
    clock = FakeClock()
    path = tmp_path_factory.mktemp("closed") / "memory.db"
    with MemoryEngine(path, clock=clock) as engine:
        live: list[str] = []
        closed: list[str] = []
        for step, (op, pick) in enumerate(ops):
            clock.advance(60)
            text = f"note {step} about the build, value {pick}"
            if op == "store" or (op in ("supersede", "update") and not live):
                live.append(engine.store(text, tags=["t"]).record_id)
            elif op == "supersede":
                target = live[pick % len(live)]
                rid = engine.store(text, tags=["t"], supersedes=target).record_id
                live.remove(target)
                closed.append(target)
                live.append(rid)
            elif op == "update":
                engine.update(live[pick % len(live)], content=text)
            elif closed:
                back = closed.pop(pick % len(closed))
                engine.restore(back)
                live.append(back)
            hits = engine.query(tags=["t"], limit=100) + engine.query("build value", limit=100)
            for hit in hits:
                assert hit.record.record_id in live
                current = engine.get(hit.record.record_id)
                assert hit.record.content == current.content  # never an older version
            assert sorted(set(ids(engine.query(tags=["t"], limit=100)))) == sorted(live)


def test_a_long_memory_is_compared_by_its_head(engine: MemoryEngine, clock: FakeClock) -> None:
    tail = " ".join(f"detail{n}" for n in range(300))  # past a query's 100 words
    old = engine.store(f"The service listens on port 8080 behind the proxy. {tail}")
    clock.advance(60)
    new = engine.store(f"The service listens on port 9090 behind the proxy. {tail}")
    [hint] = engine.possibly_supersedes(new.record_id)
    assert hint.record.record_id == old.record_id and "8080" in hint.change


def test_migration_13_keeps_every_archive_entry_and_widens_its_reasons(
    tmp_path: Path, clock: FakeClock
) -> None:
    path = tmp_path / "old.db"
    build_store(path, 12)
    db = sqlite3.connect(path)
    row = (
        "pruned", "faded", None, 5.0, "0" * 31 + "1", "k", "memory", "general", "[]", "1",
        "An old note", None, 0.5, 0.1, 1.0, 1.0, 1.0, 0, "{}", None, None, "global", "s1",
    )  # fmt: skip
    db.execute(
        "INSERT INTO archive (reason, detail, folded_into, archived_at, record_id, dedupe_key, "
        "domain, subdomain, tags, tag_product, content, vector, importance, strength, "
        "created_at, updated_at, accessed_at, access_count, metadata, instance_key, "
        f"strength_at, scope, session) VALUES ({', '.join('?' * len(row))})",
        row,
    )
    db.commit()
    [(seq,)] = db.execute("SELECT seq FROM archive").fetchall()
    db.close()
    with MemoryEngine(path, clock=clock) as engine:
        [entry] = engine.archive_entries().entries
        assert (entry.reason, entry.detail, entry.record.content) == (
            "pruned",
            "faded",
            "An old note",
        )
        assert entry.record.session == "s1" and entry.archived_at == 5.0
        [(kept,)] = engine.storage.db.execute("SELECT seq FROM archive").fetchall()  # type: ignore[attr-defined]
        assert kept == seq
        old = engine.store("Port 8080")
        engine.store("Port 9090", supersedes=old.record_id)
        assert engine.stats().archived_by_reason == {"pruned": 1, "superseded": 1}
