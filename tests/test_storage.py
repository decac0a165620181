from __future__ import annotations

import sqlite3
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any
from unittest.mock import patch

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from prime_memory_folding import InvalidInput, MemoryEngine, SchemaTooNew, StoreError
from prime_memory_folding.core.index import session_code
from prime_memory_folding.engine.facade import CHANGE_LOG_KEEP
from prime_memory_folding.storage import SQLiteStorage, TokenRow
from prime_memory_folding.storage.migrations import MIGRATIONS, latest_version
from tests.conftest import FakeClock
from tests.old_stores import build_store


def test_migration_numbers_are_unique_and_increasing() -> None:
    versions = [m.version for m in MIGRATIONS]
    assert not [v for v, n in Counter(versions).items() if n > 1]
    assert all(v > 0 for v in versions)


def test_empty_database_migrates_to_the_full_schema(store_path: Path) -> None:
    SQLiteStorage(store_path).close()
    db = sqlite3.connect(store_path)
    columns = [row[1] for row in db.execute("PRAGMA table_info(records)")]
    assert columns[:17] == [
        "id",
        "record_id",
        "dedupe_key",
        "domain",
        "subdomain",
        "tags",
        "tag_product",
        "content",
        "vector",
        "importance",
        "strength",
        "created_at",
        "updated_at",
        "accessed_at",
        "access_count",
        "metadata",
        "instance_key",
    ]
    triggers = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type='trigger'")}
    assert {"records_change_insert", "records_change_update", "records_change_delete"} <= triggers
    applied = [row[0] for row in db.execute("SELECT version FROM schema_migrations ORDER BY 1")]
    assert applied == [m.version for m in sorted(MIGRATIONS, key=lambda m: m.version)]
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    db.close()


def test_reopening_applies_no_migration_twice(store_path: Path) -> None:
    SQLiteStorage(store_path).close()
    storage = SQLiteStorage(store_path)
    assert storage.schema_version() == latest_version()
    count = storage.db.execute("SELECT count(*) FROM schema_migrations").fetchone()[0]
    assert count == len(MIGRATIONS)
    storage.close()


def test_store_from_a_newer_version_is_refused(store_path: Path) -> None:
    SQLiteStorage(store_path).close()
    db = sqlite3.connect(store_path)
    db.execute("INSERT INTO schema_migrations VALUES (999, 'future', 0)")
    db.commit()
    db.close()
    with pytest.raises(SchemaTooNew, match="upgrade"):
        MemoryEngine(store_path)


def test_corrupt_file_gives_a_clear_error_and_is_left_alone(store_path: Path) -> None:
    junk = bytes(range(256)) * 64
    store_path.write_bytes(junk)
    with pytest.raises(StoreError, match=str(store_path)):
        MemoryEngine(store_path)
    assert store_path.read_bytes() == junk


def test_directory_as_store_path_is_refused(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="directory"):
        MemoryEngine(tmp_path)


def test_memory_store_works_without_a_file() -> None:
    with MemoryEngine(":memory:") as memory:
        memory.store("x")
        assert memory.stats().records == 1


def test_index_catches_up_with_another_connection(store_path: Path) -> None:
    with MemoryEngine(store_path) as reader, MemoryEngine(store_path) as writer:
        kept = writer.store("kept", tags=["shared"])
        gone = writer.store("gone", tags=["shared"])
        assert set(reader.match_ids(tags=["shared"])) == {kept.record_id, gone.record_id}
        writer.forget(gone.record_id)
        writer.update(kept.record_id, tags=["moved"])
        writer.store("new label", tags=["fresh-tag"])
        assert reader.match_ids(tags=["shared"]) == []
        assert reader.match_ids(tags=["moved"]) == [kept.record_id]
        assert len(reader.match_ids(tags=["fresh-tag"])) == 1
        assert reader.stats().records == 2


def test_reader_reloads_when_the_change_log_was_trimmed(store_path: Path) -> None:
    with MemoryEngine(store_path) as reader, MemoryEngine(store_path) as writer:
        reader.store("seed")
        writer.store_many([f"bulk {i}" for i in range(50)])
        with writer.storage.transaction():
            writer.storage.trim_changes(0)  # keeps the newest entry all the same
        assert writer.storage.db.execute("SELECT count(*) FROM changes").fetchone()[0] == 1
        writer.store("after trim")
        assert reader.stats().records == 52


def test_every_thousandth_write_of_an_engine_trims_the_change_log() -> None:
    trims: list[int] = []

    class Trims(SQLiteStorage):
        def trim_changes(self, keep: int) -> None:
            trims.append(keep)
            super().trim_changes(keep)

    with MemoryEngine(storage=Trims(":memory:")) as engine:
        for i in range(998):
            engine.store(f"note {i}")
        engine.store_many(["one of two", "two of two"])  # one write
        assert trims == []
        engine.fold()  # a write too
        assert trims == [CHANGE_LOG_KEEP]
        assert engine.stats().records == 1_000


def test_reader_reloads_when_the_change_log_restarted_below_it(store_path: Path) -> None:
    with MemoryEngine(store_path) as reader, MemoryEngine(store_path) as writer:
        writer.store_many([f"bulk {i}" for i in range(50)])
        assert reader.stats().records == 50
        writer.storage.db.execute("DELETE FROM changes")  # emptied by hand
        writer.forget(writer.query(limit=1)[0].record.record_id)
        writer.store("after the restart")
        assert reader.stats().records == 50
        assert reader.query(text="restart", limit=1)[0].record.content == "after the restart"


def _insert_raw(db: sqlite3.Connection, n: int) -> None:
    for i in range(n):
        db.execute(
            "INSERT INTO records (record_id, dedupe_key, domain, subdomain, tags, tag_product, "
            "content, importance, strength, created_at, updated_at, accessed_at) "
            "VALUES (?, ?, 'memory', 'general', '[]', '1', ?, 0.5, 1.0, 0, 0, 0)",
            (f"{i:032x}", f"key{i}", f"old record {i}"),
        )


@pytest.mark.parametrize("emptied", [False, True])
def test_the_change_log_keeps_counting_across_its_migration(
    store_path: Path, emptied: bool
) -> None:
    build_store(store_path, 3)
    db = sqlite3.connect(store_path, isolation_level=None)
    _insert_raw(db, 5)
    db.execute("DELETE FROM records WHERE record_id = ?", (f"{4:032x}",))
    if emptied:
        db.execute("DELETE FROM changes")
    newest = db.execute("SELECT seq FROM sqlite_sequence WHERE name = 'changes'").fetchone()[0]
    assert newest == 6
    db.close()
    with MemoryEngine(store_path, embedder="none") as memory:
        storage = memory.storage
        assert storage.schema_version() == latest_version()
        assert storage.newest_change() == newest
        memory.store("after the migration")
        assert storage.newest_change() == newest + 1
        indexes = {row[0] for row in storage.db.execute("SELECT name FROM sqlite_master")}
        assert "records_domain" not in indexes
        assert sorted(hit.record.content for hit in memory.query(limit=10)) == [
            "after the migration",
            *(f"old record {i}" for i in range(4)),
        ]


def test_index_table_holds_what_index_rows_gives(store_path: Path) -> None:
    with MemoryEngine(store_path, embedder="none") as memory:
        memory.store("a", tags=["x", "y"], vector=[1.0, 2.0], metadata={"tier": "permanent"})
        memory.store("b", tags=["y"], importance=0.9, session="chat")
        memory.store("c", domain="project", vector=[0.5, 0.5])
        storage = memory.storage
        rows = list(storage.index_rows())
        table = storage.index_table()
    assert len(table) == 3
    fields = [
        ("record_ids", "record_id"), ("domains", "domain"), ("subdomains", "subdomain"),
        ("tags", "tags"), ("tag_products", "tag_product"), ("importance", "importance"),
        ("strength", "strength"), ("updated_at", "updated_at"), ("created_at", "created_at"),
        ("accessed_at", "accessed_at"), ("access_count", "access_count"),
        ("strength_at", "strength_at"), ("tiers", "tier"), ("scopes", "scope"),
        ("sessions", "session"),
    ]  # fmt: skip
    for column, field in fields:
        # Numbers may come as an array, where a missing one is NaN.
        got = [None if isinstance(v, float) and v != v else v for v in getattr(table, column)]
        assert got == [getattr(row, field) for row in rows], column
    # Vectors come as one matrix, a row per record (zero where none), with spare rows after.
    assert table.vector_matrix is not None and table.vector_present is not None
    assert len(table.vector_matrix) > len(rows)
    assert table.vector_present.tolist() == [row.vector_blob is not None for row in rows]
    for i, row in enumerate(rows):
        expected = np.zeros(2) if row.vector_blob is None else np.frombuffer(row.vector_blob, "<f4")
        assert table.vector_matrix[i].tolist() == expected.tolist()


def test_tag_texts_parse_alike_one_by_one_and_together() -> None:
    from prime_memory_folding.storage.sqlite import _parse_many_tags, _parse_tags

    texts = ['["a","b"]', "[]", '["\\u00fc", "c"]', '["a","b"]']
    assert _parse_many_tags(texts) == {text: _parse_tags(text) for text in texts}
    # Texts that are not one array each must not be parsed by joining them,
    # where two halves could pass for whole arrays.
    halves = ['["a"], ["b"', '"c"]']
    with pytest.raises(ValueError):
        _parse_many_tags(halves)


def test_the_write_ahead_log_is_checkpointed_every_few_thousand_pages(store_path: Path) -> None:
    from prime_memory_folding.storage.sqlite import WAL_AUTOCHECKPOINT_PAGES

    with MemoryEngine(store_path, embedder="none") as memory:
        db = memory.storage.db
        assert db.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == WAL_AUTOCHECKPOINT_PAGES
        for i in range(200):
            memory.store(f"note {i}", tags=[f"t{i % 7}"])
        # Past SQLite's default of 1,000 pages the log is still growing, not restarted.
        busy, frames, _ = db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        assert busy == 0 and 1_000 < frames < WAL_AUTOCHECKPOINT_PAGES


def test_catching_up_reads_the_change_log_by_its_key(store_path: Path) -> None:
    with MemoryEngine(store_path, embedder="none") as memory:
        memory.store("one change")
        plans: list[str] = []
        memory.storage.db.set_trace_callback(plans.append)
        memory.storage.changes_since(0)
        memory.storage.db.set_trace_callback(None)
        reads = [sql for sql in plans if "FROM changes" in sql]
        assert len(reads) == 2
        for sql in reads:
            plan = memory.storage.db.execute(
                "EXPLAIN QUERY PLAN " + sql.replace("?", "0")
            ).fetchall()
            assert not [row for row in plan if row[3].startswith("SCAN changes")], sql


def test_stats_count_the_archive_from_its_reason_index(store_path: Path) -> None:
    with MemoryEngine(store_path, embedder="none") as memory:
        memory.store("to be folded away")
        plans: list[str] = []
        with memory.storage.reading():  # the connection the engine's reads then use
            memory.storage.db.set_trace_callback(plans.append)
            memory.stats()
            memory.storage.db.set_trace_callback(None)
        [count] = [sql for sql in plans if "FROM archive" in sql]
        plan = memory.storage.db.execute("EXPLAIN QUERY PLAN " + count).fetchall()
        assert [row[3] for row in plan if "archive" in row[3]] == [
            "SCAN archive USING COVERING INDEX archive_reason"
        ]


# -- staged writes ---------------------------------------------------------------

_staged_memory = st.fixed_dictionaries(
    {
        "word": st.sampled_from(["alpha", "beta", "gamma"]),
        "family": st.integers(0, 2),
        "subdomain": st.sampled_from(["a", "b"]),
        "tags": st.lists(st.sampled_from(["x", "y", "z"]), max_size=2),
        "age_days": st.integers(0, 400),
    }
)


def _tables(memory: MemoryEngine) -> dict[str, list[tuple[object, ...]]]:
    db = memory.storage.db
    return {
        table: db.execute(f"SELECT * FROM {table} ORDER BY 1").fetchall()
        for table in ("records", "archive", "changes", "primes")
    }


def _text_matches(memory: MemoryEngine) -> dict[str, list[int]]:
    db = memory.storage.db
    sql = "SELECT rowid FROM records_fts WHERE records_fts MATCH ? ORDER BY rowid"
    return {
        word: [row[0] for row in db.execute(sql, (word,))]
        for word in ("alpha", "beta", "gamma", "family", "memory")
    }


def _staged_run(memories: list[dict[str, Any]], staged: bool) -> list[object]:
    """What a store_many, a fold and unfolding every folded record leave behind."""
    from prime_memory_folding.storage import sqlite as sqlite_storage

    clock = FakeClock()
    snapshots: list[object] = []
    with (
        patch.object(sqlite_storage, "STAGED_MIN", 1 if staged else 10**9),
        patch.object(sqlite_storage, "STAGED_CHUNK", 3),
        MemoryEngine(":memory:", clock=clock, embedder="none") as memory,
    ):
        items = []
        for i, m in enumerate(memories):
            vector = np.random.default_rng(m["family"]).normal(size=4)
            vector += np.random.default_rng(100 + i).normal(scale=0.01, size=4)
            items.append(
                {
                    "content": f"memory {i} about {m['word']}, family {m['family']}.",
                    "subdomain": m["subdomain"],
                    "tags": m["tags"],
                    "vector": vector.tolist(),
                }
            )
        memory.store_many(items)
        snapshots += [_tables(memory), _text_matches(memory)]
        clock.advance(max(m["age_days"] for m in memories) * 86_400.0)
        report = memory.fold()
        snapshots += [report.created_ids, _tables(memory), _text_matches(memory)]
        for rid in report.created_ids:
            memory.unfold(rid)
        snapshots += [_tables(memory), _text_matches(memory)]
        temp = memory.storage.db.execute("SELECT name FROM temp.sqlite_master WHERE type = 'table'")
        staging = [row[0] for row in temp]
        assert ("staged_records" in staging) == staged
        for name in staging:
            assert memory.storage.db.execute(f"SELECT count(*) FROM temp.{name}").fetchone() == (0,)
    return snapshots


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_staged_memory, min_size=1, max_size=12))
def test_staged_writes_leave_the_store_that_one_statement_per_row_leaves(
    memories: list[dict[str, Any]],
) -> None:
    assert _staged_run(memories, staged=True) == _staged_run(memories, staged=False)


def test_a_large_store_many_writes_records_through_the_staging_table(store_path: Path) -> None:
    from prime_memory_folding.storage.sqlite import STAGED_CHUNK, STAGED_MIN

    count = STAGED_CHUNK + STAGED_MIN
    with MemoryEngine(store_path, embedder="none") as memory:
        statements: list[str] = []
        memory.storage.db.set_trace_callback(statements.append)
        stored = memory.store_many([f"bulk note {i}" for i in range(count)])
        memory.storage.db.set_trace_callback(None)
        # Trace lines repeat a statement for each trigger it fires; count distinct ones.
        writes = {sql for sql in statements if sql.startswith("INSERT INTO records (")}
        assert len(writes) == 1 and "FROM temp.staged_records" in writes.pop()
        loads = [sql for sql in statements if sql.startswith("INSERT INTO temp.staged_records")]
        assert len(loads) == count
        in_order = memory.storage.db.execute("SELECT record_id FROM records ORDER BY id")
        assert [row[0] for row in in_order] == [r.record_id for r in stored]
        [[matched]] = memory.storage.db.execute(
            "SELECT count(*) FROM records_fts WHERE records_fts MATCH 'bulk'"
        )
        assert matched == count


def test_a_staged_insert_that_fails_in_a_later_chunk_leaves_nothing(store_path: Path) -> None:
    from prime_memory_folding.storage import sqlite as sqlite_storage

    with MemoryEngine(store_path, embedder="none") as memory:
        memory.store("already here")
        rows = list(memory.storage.fetch(memory.match_ids()).values())
        fresh = [
            replace(rows[0], record=replace(rows[0].record, record_id=f"{i:032x}", content=f"n{i}"))
            for i in range(1, 8)
        ]
        fresh = [replace(row, dedupe_key=f"key {i}") for i, row in enumerate(fresh)]
        with (
            patch.object(sqlite_storage, "STAGED_MIN", 2),
            patch.object(sqlite_storage, "STAGED_CHUNK", 3),
        ):
            with pytest.raises(sqlite3.IntegrityError), memory.storage.transaction():
                memory.storage.insert([*fresh, rows[0]])  # the last chunk repeats an id
            assert memory.storage.count() == 1
            assert memory.storage.db.execute("SELECT count(*) FROM changes").fetchone() == (1,)
            with memory.storage.transaction():
                memory.storage.insert(fresh[:4])
        ids = [
            row[0] for row in memory.storage.db.execute("SELECT record_id FROM records ORDER BY id")
        ]
        assert ids == [rows[0].record.record_id] + [row.record.record_id for row in fresh[:4]]
        [[matched]] = memory.storage.db.execute(
            "SELECT count(*) FROM records_fts WHERE records_fts MATCH 'n1 OR n2 OR n3 OR n4 OR n5'"
        )
        assert matched == 4


def test_a_bulk_insert_that_makes_most_of_the_store_leaves_its_text_index_merged(
    store_path: Path,
) -> None:
    from prime_memory_folding.storage import sqlite as sqlite_storage

    def segments(memory: MemoryEngine) -> int:
        [[count]] = memory.storage.db.execute("SELECT count(DISTINCT segid) FROM records_fts_idx")
        return int(count)

    with (
        patch.object(sqlite_storage, "STAGED_CHUNK", 4),
        MemoryEngine(store_path, embedder="none") as memory,
    ):
        memory.store_many([f"first batch note {i}" for i in range(100)])
        assert segments(memory) == 1
        # A smaller batch into a larger store leaves merging to the index itself.
        memory.store_many([f"second batch note {i}" for i in range(40)])
        assert segments(memory) > 1
        [[matched]] = memory.storage.db.execute(
            "SELECT count(*) FROM records_fts WHERE records_fts MATCH 'batch'"
        )
        assert matched == 140


# -- access tokens ---------------------------------------------------------------------


def _token(name: str, digest: str, created: float = 1.0) -> TokenRow:
    return TokenRow(
        name=name,
        token_hash=digest,
        scopes=("project:*", f"user:{name}"),
        read_only=False,
        created_at=created,
    )


def test_tokens_are_kept_listed_found_and_revoked(store_path: Path) -> None:
    storage = SQLiteStorage(store_path)
    with storage.transaction():
        storage.add_token(_token("bob", "b" * 64, created=2.0))
        storage.add_token(replace(_token("alice", "a" * 64, created=1.0), read_only=True))
    assert [row.name for row in storage.tokens()] == ["alice", "bob"]
    found = storage.token_by_hash("a" * 64)
    assert found is not None and found.read_only and found.scopes == ("project:*", "user:alice")
    assert storage.token_by_hash("c" * 64) is None
    with storage.transaction():
        assert storage.revoke_token("alice", 5.0)
        assert not storage.revoke_token("alice", 6.0)  # no live token left by that name
        assert not storage.revoke_token("carol", 6.0)
    assert storage.token_by_hash("a" * 64) == replace(found, revoked_at=5.0)
    storage.close()


def test_a_name_is_unique_among_live_tokens_only(store_path: Path) -> None:
    storage = SQLiteStorage(store_path)
    with storage.transaction():
        storage.add_token(_token("alice", "a" * 64))
    with pytest.raises(InvalidInput, match="revoke it first"), storage.transaction():
        storage.add_token(_token("alice", "d" * 64))
    assert [row.token_hash for row in storage.tokens()] == ["a" * 64]
    with storage.transaction():
        storage.revoke_token("alice", 2.0)
        storage.add_token(_token("alice", "d" * 64, created=3.0))
    assert [(row.token_hash, row.revoked_at) for row in storage.tokens()] == [
        ("a" * 64, 2.0),
        ("d" * 64, None),
    ]
    with pytest.raises(InvalidInput, match="secret"), storage.transaction():
        storage.add_token(_token("bob", "d" * 64))
    storage.close()


@pytest.mark.parametrize("version", [m.version for m in MIGRATIONS if m.version < 9])
def test_every_older_schema_gains_the_token_table(store_path: Path, version: int) -> None:
    build_store(store_path, version)
    with MemoryEngine(store_path, embedder="none") as memory:
        storage = memory.storage
        assert storage.schema_version() == latest_version()
        assert storage.tokens() == []
        with storage.transaction():
            storage.add_token(_token("alice", "a" * 64))
        record = memory.store("still writable after the migration")
    with MemoryEngine(store_path, embedder="none") as memory:
        assert [row.name for row in memory.storage.tokens()] == ["alice"]
        assert memory.get(record.record_id).content == record.content


@pytest.mark.parametrize("version", [m.version for m in MIGRATIONS if m.version < 10])
def test_every_older_schema_gains_sessions_and_its_records_have_none(
    store_path: Path, version: int
) -> None:
    build_store(store_path, version)
    db = sqlite3.connect(store_path, isolation_level=None)
    _insert_raw(db, 2)
    db.close()
    with MemoryEngine(store_path, embedder="none") as memory:
        assert memory.storage.schema_version() == latest_version()
        assert [memory.get(f"{i:032x}").session for i in range(2)] == [None, None]
        named = memory.store("after the migration", session="chat")
        rows = memory._index.alive_rows()
        assert memory._index.session_codes(rows).tolist() == [0, 0, session_code("chat")]
        memory.forget(named.record_id)
        assert memory.restore(named.record_id).session == "chat"
    with MemoryEngine(store_path, embedder="none") as memory:
        assert memory.get(named.record_id).session == "chat"
