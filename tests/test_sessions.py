"""Sessions: a memory belongs to a conversation only when its writer says so.

The session is stored with the record on both backends, kept through
reinforcement, updates, the archive, packs and copies, and held by the index
as a stable code (:func:`~prime_memory_folding.core.index.session_code`).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mcp import Client

from prime_memory_folding import InvalidInput, MemoryEngine
from prime_memory_folding.core.index import (
    IndexColumns,
    IndexEntry,
    StructuralIndex,
    TagQuery,
    session_code,
    session_code_column,
)
from prime_memory_folding.core.records import MAX_SESSION_CHARS, check_session
from prime_memory_folding.mcp.server import build_server
from prime_memory_folding.storage.base import GatedRead
from prime_memory_folding.storage.copy import copy_store
from prime_memory_folding.transfer.packs import export_pack, import_pack
from tests.backends import dump
from tests.conftest import FakeClock

# -- the value -----------------------------------------------------------------------------


def test_a_session_is_stripped_and_a_blank_one_is_none() -> None:
    assert check_session("  chat-1\u00a0") == "chat-1"
    assert check_session("   ") is None
    assert check_session("") is None
    assert check_session(None) is None
    assert check_session("é" * MAX_SESSION_CHARS) == "é" * MAX_SESSION_CHARS


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        (5, "must be a string"),
        (b"chat", "must be a string"),
        ("x" * (MAX_SESSION_CHARS + 1), "over the limit of 200"),
        ("chat\n2", "control character"),
        ("chat\t2", "control character"),
        ("chat\x00", "control character"),
        ("ch\x85at", "control character"),
    ],
)
def test_a_bad_session_is_refused_and_nothing_is_stored(
    backend_store: str, value: object, fragment: str
) -> None:
    with MemoryEngine(backend_store, embedder="none") as memory:
        memory.store("already here")
        before = dump(backend_store)
        with pytest.raises(InvalidInput, match=fragment):
            memory.store("the deploy runs on Fridays", session=value)  # type: ignore[arg-type]
        with pytest.raises(InvalidInput, match=f"item 1: .*{fragment}"):
            memory.store_many(["fine", {"content": "not fine", "session": value}])
        assert dump(backend_store) == before


@settings(max_examples=200, deadline=None)
@given(st.one_of(st.none(), st.text(max_size=260)))
def test_a_session_is_kept_as_given_or_refused(value: str | None) -> None:
    try:
        checked = check_session(value)
    except InvalidInput as exc:
        assert value is not None
        name = value.strip()
        too_long = len(name) > MAX_SESSION_CHARS
        assert too_long or any(ord(ch) < 32 or 127 <= ord(ch) <= 159 for ch in name), exc
        return
    if value is None or not value.strip():
        assert checked is None
    else:
        assert checked == value.strip() and len(checked) <= MAX_SESSION_CHARS


# -- stored on both backends ---------------------------------------------------------------


def test_a_session_round_trips_through_get_query_and_history(
    backend_store: str, clock: FakeClock
) -> None:
    with MemoryEngine(backend_store, clock=clock, embedder="none") as memory:
        first = memory.store("the deploy runs on Fridays", session=" chat-1 ")
        other = memory.store("the linter runs on save")
        assert first.session == "chat-1" and other.session is None
        assert memory.get(first.record_id).session == "chat-1"
        hits = memory.query(text="deploy Fridays")
        assert [(hit.record.record_id, hit.record.session) for hit in hits] == [
            (first.record_id, "chat-1")
        ]
        clock.advance(60)
        updated = memory.update(first.record_id, content="the deploy runs on Mondays")
        assert updated.session == "chat-1"
        assert [version.record.session for version in memory.history(first.record_id)] == ["chat-1"]
        with pytest.raises(InvalidInput, match="keeps the session it was first stored in"):
            memory.update(first.record_id, session="chat-2")
    with MemoryEngine(backend_store, embedder="none") as reopened:
        assert reopened.get(first.record_id).session == "chat-1"
        assert reopened.get(other.record_id).session is None


def test_store_many_takes_a_session_per_item(backend_store: str) -> None:
    with MemoryEngine(backend_store, embedder="none") as memory:
        records = memory.store_many(
            [
                {"content": "one", "session": "a"},
                {"content": "two", "session": "b"},
                {"content": "three", "session": "  "},
                "four",
            ]
        )
        assert [r.session for r in records] == ["a", "b", None, None]
        assert [memory.get(r.record_id).session for r in records] == ["a", "b", None, None]


def test_storing_the_same_memory_again_keeps_its_first_session(
    backend_store: str, clock: FakeClock
) -> None:
    with MemoryEngine(backend_store, clock=clock, embedder="none") as memory:
        first = memory.store("the cache is warmed at start-up", session="morning")
        clock.advance(3_600)
        again = memory.store("the cache is warmed at start-up", session="evening")
        none = memory.store("the cache is warmed at start-up")
        assert again.record_id == none.record_id == first.record_id
        assert again.access_count == first.access_count + 1
        assert again.session == none.session == "morning"
        assert memory.get(first.record_id).session == "morning"
        # Within one batch too: the first of a key's items names the session.
        batch = memory.store_many(
            [{"content": "new twice", "session": "x"}, {"content": "new twice", "session": "y"}]
        )
        assert [r.session for r in batch] == ["x", "x"]


def test_a_forgotten_memory_comes_back_from_the_archive_with_its_session(
    backend_store: str,
) -> None:
    with MemoryEngine(backend_store, embedder="none") as memory:
        record = memory.store("the staging database is reset nightly", session="ops")
        memory.forget(record.record_id)
        [entry] = memory.archive_entries().entries
        assert entry.record.session == "ops"
        assert memory.restore(record.record_id).session == "ops"
        assert memory.get(record.record_id) == record


# -- packs and copies ----------------------------------------------------------------------


def test_export_and_import_keep_sessions(tmp_path: Path) -> None:
    pack = tmp_path / "pack.jsonl"
    with MemoryEngine(tmp_path / "from.db", embedder="none") as source:
        kept = source.store("the release train leaves on Tuesdays", session="planning")
        plain = source.store("tabs, not spaces")
        with pack.open("w", encoding="utf-8") as out:
            export_pack(source, out)
    lines = [json.loads(line) for line in pack.read_text(encoding="utf-8").splitlines()[1:]]
    assert {line["content"]: line.get("session") for line in lines} == {
        kept.content: "planning",
        plain.content: None,
    }
    with MemoryEngine(tmp_path / "to.db", embedder="none") as target:
        import_pack(target, pack)
        assert target.get(kept.record_id).session == "planning"
        assert target.get(plain.record_id).session is None


def test_a_pack_line_without_a_session_imports_as_none_and_a_bad_one_is_reported(
    tmp_path: Path,
) -> None:
    pack = tmp_path / "old.jsonl"
    header = {"format": "prime-memory-pack", "version": 1}
    lines = [
        header,
        {"content": "from before sessions"},
        {"content": "named", "session": "chat"},
        {"content": "bad", "session": "a\nb"},
    ]
    pack.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    with MemoryEngine(tmp_path / "to.db", embedder="none") as target:
        report = import_pack(target, pack, skip_bad=True)
        assert [bad.line for bad in report.skipped] == [4]
        assert "control character" in report.skipped[0].message
        got = {r.content: r.session for r in (hit.record for hit in target.query(limit=10))}
        assert got == {"from before sessions": None, "named": "chat"}


def test_a_copy_between_backends_keeps_sessions(tmp_path: Path, pg_url: str) -> None:
    source = tmp_path / "source.db"
    with MemoryEngine(source, embedder="none") as memory:
        named = memory.store("the API key rotates monthly", session="security review")
        archived = memory.store("the old API key", session="security review")
        memory.forget(archived.record_id)
    copy_store(source, pg_url)
    back = tmp_path / "back.db"
    copy_store(pg_url, back)
    for location in (pg_url, str(back)):
        with MemoryEngine(location, embedder="none") as copied:
            assert copied.get(named.record_id).session == "security review"
            assert copied.restore(archived.record_id).session == "security review"


# -- schema --------------------------------------------------------------------------------


def test_an_older_postgres_schema_gains_sessions_and_its_records_have_none(
    pg_url: str,
) -> None:
    import psycopg

    from prime_memory_folding.storage.pg_schema import PG_MIGRATIONS, latest_pg_version

    with psycopg.connect(pg_url, autocommit=True) as conn, conn.transaction():
        conn.execute(
            "CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, "
            "name TEXT NOT NULL, applied_at DOUBLE PRECISION NOT NULL)"
        )
        with conn.cursor() as cur:
            for step in PG_MIGRATIONS:
                if step.version > 2:
                    continue
                for statement in step.statements:
                    cur.execute(statement)
                if step.then is not None:
                    step.then(cur)
                cur.execute(
                    "INSERT INTO schema_migrations VALUES (%s, %s, 0)", (step.version, step.name)
                )
            cur.execute(
                "INSERT INTO records (record_id, dedupe_key, domain, subdomain, tags, "
                "tag_product, content, importance, strength, created_at, updated_at, "
                "accessed_at) VALUES (%s, 'key', 'memory', 'general', '[]', '1', "
                "'stored before sessions', 0.5, 1.0, 0, 0, 0)",
                (f"{7:032x}",),
            )
    with MemoryEngine(pg_url, embedder="none") as memory:
        assert memory.storage.schema_version() == latest_pg_version()
        assert memory.get(f"{7:032x}").session is None
        assert memory.store("after", session="s").session == "s"
    with psycopg.connect(pg_url, autocommit=True) as conn:
        indexes = {row[0] for row in conn.execute("SELECT indexname FROM pg_indexes")}
        assert "records_session" in indexes


# -- PostgreSQL's context neighbours -------------------------------------------------------


def test_a_gated_read_brings_only_neighbours_of_the_same_session(pg_url: str) -> None:
    with MemoryEngine(pg_url, embedder="none") as memory:
        plan = ["a", "b", None, "a", "b", "a", None, "b", "a", "a"]
        ids = [
            memory.store(f"memory {i} of {session}", session=session).record_id
            for i, session in enumerate(plan)
        ]
        store: Any = memory.storage

        def around(rid: str, reach: int) -> set[str]:
            read = GatedRead(newest=0, around=[rid], reach=reach)
            return set(store.gated(TagQuery(), read).record_ids)

        a = [rid for rid, s in zip(ids, plan) if s == "a"]  # positions 0, 3, 5, 8, 9
        b = [rid for rid, s in zip(ids, plan) if s == "b"]  # positions 1, 4, 7
        # The neighbours alone: the record itself comes with ``also`` when wanted.
        assert around(a[2], 1) == {a[1], a[3]}
        assert around(a[2], 2) == {a[0], a[1], a[3], a[4]}
        assert around(a[0], 1) == {a[1]}
        assert around(b[1], 5) == {b[0], b[2]}
        assert around(ids[2], 2) == set()  # no session: no neighbours
        table = store.gated(TagQuery(), GatedRead(records=True))
        assert list(table.sessions) == plan


# -- the index -----------------------------------------------------------------------------


def test_a_session_code_is_a_stable_nonzero_63_bit_hash() -> None:
    expected = int.from_bytes(hashlib.blake2b(b"chat-1", digest_size=8).digest(), "little")
    assert session_code("chat-1") == expected & (2**63 - 1)
    assert session_code(None) == 0
    assert session_code_column(["chat-1", None, "chat-1"]).tolist() == [
        session_code("chat-1"),
        0,
        session_code("chat-1"),
    ]
    assert session_code_column([None, None]).tolist() == [0, 0]
    assert session_code_column([]).dtype == np.int64


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=50))
def test_every_session_has_a_code_in_the_int64_column(name: str) -> None:
    code = session_code(name)
    assert 0 < code < 2**63
    assert session_code_column([name]).tolist() == [code]


def _codes(memory: MemoryEngine, *record_ids: str) -> tuple[list[int], list[float]]:
    index = memory._index
    rows = np.array([index.row_of(rid) for rid in record_ids], dtype=np.int64)
    return index.session_codes(rows).tolist(), index.created_at(rows).tolist()


def test_the_index_holds_sessions_and_first_store_times_through_every_change(
    store_path: Path, clock: FakeClock
) -> None:
    with MemoryEngine(store_path, clock=clock, embedder="none") as memory:
        start = clock()
        named = memory.store("the nightly job", session="ops")
        clock.advance(100)
        plain = memory.store("the office closes at six")
        assert _codes(memory, named.record_id, plain.record_id) == (
            [session_code("ops"), 0],
            [start, start + 100],
        )
        clock.advance(100)
        memory.update(named.record_id, content="the nightly job runs at two")
        memory.store("the office closes at six", session="late")  # reinforced
        memory.reinforce(plain.record_id)
        assert _codes(memory, named.record_id, plain.record_id) == (
            [session_code("ops"), 0],
            [start, start + 100],
        )
    with MemoryEngine(store_path, clock=clock, embedder="none") as reloaded:
        assert _codes(reloaded, named.record_id, plain.record_id) == (
            [session_code("ops"), 0],
            [start, start + 100],
        )


def test_the_index_takes_in_another_process_s_sessions(store_path: Path, clock: FakeClock) -> None:
    with (
        MemoryEngine(store_path, clock=clock, embedder="none") as reader,
        MemoryEngine(store_path, clock=clock, embedder="none") as writer,
    ):
        reader.store("seed")
        generation = reader._index.generation
        clock.advance(5)
        written = writer.store("written elsewhere", session="other window")
        reader.stats()  # catches up
        assert reader._index.generation > generation
        assert _codes(reader, written.record_id) == ([session_code("other window")], [clock()])
        generation = reader._index.generation
        writer.forget(written.record_id)
        reader.stats()
        assert reader._index.generation > generation
        assert written.record_id not in reader._index


def test_the_generation_moves_on_with_every_load_upsert_and_removal() -> None:
    index = StructuralIndex()
    seen = [index.generation]

    def entry(rid: str, session: int) -> IndexEntry:
        return IndexEntry(rid, 2, 3, (), 1, 0.5, 1.0, 0.0, None, session=session, created_at=9.0)

    index.upsert(entry("a" * 32, 7))
    seen.append(index.generation)
    index.upsert(entry("a" * 32, 8))
    seen.append(index.generation)
    index.load(
        IndexColumns(
            record_ids=["b" * 32, "c" * 32],
            domain_primes=[2, 2],
            subdomain_primes=[3, 3],
            tag_primes=[(), ()],
            tag_products=[1, 1],
            importance=[0.5, 0.5],
            strength=[1.0, 1.0],
            updated_at=[0.0, 0.0],
            reinforced_at=[0.0, 0.0],
            half_life=[math.inf, math.inf],
            sessions=[5, 0],
            created_at=[9.0, 9.0],
        )
    )
    seen.append(index.generation)
    assert index.session_codes(index.alive_rows()).tolist() == [5, 0]
    assert index.created_at(index.alive_rows()).tolist() == [9.0, 9.0]
    index.remove("b" * 32)
    seen.append(index.generation)
    index.remove("b" * 32)  # unknown now: nothing changes
    assert index.generation == seen[-1]
    index.remove_many(["c" * 32])
    seen.append(index.generation)
    assert seen == sorted(set(seen))


# -- the MCP tool and the command line -----------------------------------------------------


@pytest.fixture
async def client(engine: MemoryEngine) -> AsyncIterator[Client]:
    async with Client(build_server(engine), mode="legacy") as connected:
        yield connected


@pytest.mark.anyio
async def test_the_store_tool_takes_a_session_and_the_query_tool_shows_it(
    client: Client, engine: MemoryEngine
) -> None:
    stored = await client.call_tool(
        "prime_memory_store", {"content": "the build cache lives in /tmp", "session": "chat-9"}
    )
    assert not stored.is_error and stored.structured_content is not None
    record = stored.structured_content["record"]
    assert record["session"] == "chat-9"
    assert engine.get(record["record_id"]).session == "chat-9"
    found = await client.call_tool("prime_memory_query", {"text": "build cache"})
    assert found.structured_content is not None
    assert [hit["session"] for hit in found.structured_content["hits"]] == ["chat-9"]
    refused = await client.call_tool(
        "prime_memory_store", {"content": "two lines", "session": "a\nb"}
    )
    assert refused.is_error and "control character" in str(refused.content)
    assert engine.stats().records == 1


def test_the_store_command_takes_a_session(run: Any) -> None:
    stored = run("store", "the flaky test is test_sync", "--session", "debugging", "--json")
    assert stored.exit_code == 0, stored.output
    record = json.loads(stored.stdout)["record"]
    assert record["session"] == "debugging"
    got = run("get", record["record_id"])
    assert "session    debugging" in got.stdout
    hits = json.loads(run("query", "flaky", "--json").stdout)
    assert [hit["record"]["session"] for hit in hits] == ["debugging"]
    refused = run("store", "x", "--session", "y" * 201)
    assert refused.exit_code != 0 and "over the limit of 200" in refused.stderr


# -- the query's text ----------------------------------------------------------------------


def test_a_query_takes_its_text_as_the_one_positional_argument(backend_store: str) -> None:
    with MemoryEngine(backend_store, embedder="none") as memory:
        wanted = memory.store("deploy steps: build, test, ship")
        memory.store("the office closes at six")
        by_position = [hit.record.record_id for hit in memory.query("deploy steps", limit=1)]
        by_name = [hit.record.record_id for hit in memory.query(text="deploy steps", limit=1)]
        assert by_position == by_name == [wanted.record_id]
