"""``copy_store`` and ``prime-memory copy``: a whole store, exactly, between SQLite and PostgreSQL.

Stores are compared table by table on the columns both backends share
(:func:`dump`), and through ``prime-memory export --vectors``.
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from prime_memory_folding.cli import cli
from prime_memory_folding.engine import tokens
from prime_memory_folding.engine.facade import MemoryEngine
from prime_memory_folding.errors import InvalidInput, StoreError
from prime_memory_folding.storage import open_storage
from prime_memory_folding.storage.copy import DestinationNotEmpty, copy_store
from prime_memory_folding.storage.fold_marks import add_kept_apart
from tests.cli_helpers import one_line_error
from tests.conftest import FakeClock
from tests.pg_helpers import new_schema

RECORD_COLUMNS = (
    "record_id, dedupe_key, domain, subdomain, tags, tag_product, content, vector, "
    "importance, strength, created_at, updated_at, accessed_at, access_count, metadata, "
    "instance_key, strength_at, scope, session"
)
ARCHIVE_COLUMNS = f"seq, reason, detail, folded_into, archived_at, {RECORD_COLUMNS}"


def dump(location: str | Path) -> dict[str, list[tuple[Any, ...]]]:
    """Every table a copy carries, on the columns both backends share, in the store's order."""
    storage = open_storage(location)
    db: Any = storage.db  # type: ignore[attr-defined]
    try:

        def rows(sql: str) -> list[tuple[Any, ...]]:
            return [
                tuple(bytes(v) if isinstance(v, memoryview) else v for v in row)
                for row in db.execute(sql).fetchall()
            ]

        return {
            "records": rows(f"SELECT {RECORD_COLUMNS} FROM records ORDER BY id"),
            "archive": rows(f"SELECT {ARCHIVE_COLUMNS} FROM archive ORDER BY seq"),
            "primes": sorted(rows("SELECT kind, label, prime FROM primes")),
            "meta": sorted(rows("SELECT key, value FROM meta WHERE key <> 'fold_state'")),
            "fold_marks": sorted(rows("SELECT record_id, prune_at FROM fold_marks")),
            "fold_apart": sorted(rows("SELECT set_id, record_id FROM fold_apart")),
        }
    finally:
        storage.close()


def fill(path: Path, clock: FakeClock) -> None:
    """A store with every kind of state: vectors, metadata, scopes, sessions, the archive,
    fold marks and settings."""
    with MemoryEngine(path, clock=clock, embedder="none") as engine:
        kept = []
        for i in range(40):
            record = engine.store(
                f"note {i}: the build uses tool {i % 7}",
                domain=("decision", "fact", "preference")[i % 3],
                subdomain=f"area{i % 4}",
                tags=[f"t{i % 5}", "shared"] + (["rare"] if i % 11 == 0 else []),
                importance=(i % 10) / 10,
                vector=[1.0, i / 3, -0.25 * i],
                metadata={"i": i, "name": f"n{i}", "nested": {"even": i % 2 == 0}},
                instance_key=f"key-{i}" if i % 6 == 0 else None,
                scope=("global", "project:github.com/acme/api", "user:alice")[i % 3],
                session=None if i % 4 == 0 else f"chat {i % 4}",
            )
            kept.append(record.record_id)
            clock.advance(60)
        engine.store("note 3: the build uses tool 3", domain="fact", subdomain="area3",
                     tags=["t3", "shared"], vector=[1.0, 1.0, -0.75],
                     scope="global")  # fmt: skip
        engine.update(kept[1], content="note 1, corrected")
        engine.forget(kept[2])
        engine.get(kept[4])
        clock.advance(200 * 86_400)
        engine.fold()
        with engine.storage.transaction():  # as an unfold leaves them
            add_kept_apart(engine.storage, kept[5:8])


@pytest.fixture
def source(tmp_path: Path, clock: FakeClock) -> Path:
    path = tmp_path / "source.db"
    fill(path, clock)
    held = dump(path)
    assert held["archive"] and held["fold_marks"] and held["meta"] and held["fold_apart"], (
        "the source lacks some state"
    )
    return path


def export(location: str | Path, clock: FakeClock) -> str:
    result = CliRunner().invoke(
        cli, ["--store", str(location), "export", "-", "--vectors"], obj={"clock": clock}
    )
    assert result.exit_code == 0, result.output
    return result.stdout


# -- the core ---------------------------------------------------------------------------


def test_sqlite_to_postgres_to_sqlite_gives_an_identical_store_and_export(
    source: Path, pg_url: str, tmp_path: Path, clock: FakeClock
) -> None:
    back = tmp_path / "back.db"
    there = copy_store(source, pg_url)
    again = copy_store(pg_url, back)

    before = dump(source)
    assert dump(pg_url) == before
    assert dump(back) == before
    assert export(back, clock) == export(source, clock) == export(pg_url, clock)
    assert (there.records, there.archived) == (len(before["records"]), len(before["archive"]))
    assert (again.records, again.fold_marks) == (len(before["records"]), len(before["fold_marks"]))
    assert there.tokens == again.tokens == 0  # the source has none (see the tokens' test)
    assert not there.replaced and not again.replaced


def test_postgres_to_postgres_and_sqlite_to_sqlite(
    source: Path, pg_database: str, tmp_path: Path
) -> None:
    first, second = new_schema(pg_database), new_schema(pg_database)
    copy_store(source, first)
    copy_store(first, second)
    copy_store(source, tmp_path / "plain.db")
    before = dump(source)
    assert dump(second) == before
    assert dump(tmp_path / "plain.db") == before


def test_the_copy_assigns_no_prime_of_its_own(source: Path, pg_url: str) -> None:
    with sqlite3.connect(source) as db:
        db.execute("INSERT INTO primes (kind, label, prime) VALUES ('tag', 'far-off', 7919)")
    copy_store(source, pg_url)
    with MemoryEngine(pg_url, scope="global", embedder="none") as engine:
        record = engine.store("a new record", tags=["far-off"])
        assert record.tag_product == 7919
        assert engine.stats().registries["tag"]["far-off"] == 7919


def test_archive_numbers_carry_on_after_a_copy(source: Path, pg_url: str) -> None:
    copy_store(source, pg_url)
    highest = max(row[0] for row in dump(source)["archive"])
    with MemoryEngine(pg_url, scope="global", embedder="none") as engine:
        victim = engine.store("to forget")
        engine.storage.db.execute(  # type: ignore[attr-defined]
            "INSERT INTO archive (reason, detail, archived_at, record_id, dedupe_key, domain, "
            "subdomain, tags, tag_product, content, importance, strength, created_at, "
            "updated_at, accessed_at) VALUES ('forgotten', 'x', 1, ?, 'k', 'memory', "
            "'general', '[]', '1', 'c', 0.5, 0.5, 1, 1, 1)",
            (victim.record_id,),
        )
    assert max(row[0] for row in dump(pg_url)["archive"]) == highest + 1


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_a_non_empty_destination_is_refused_and_left_as_it_was(
    backend: str, source: Path, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    target = str(tmp_path / "dest.db") if backend == "sqlite" else request.getfixturevalue("pg_url")
    with MemoryEngine(target, scope="global", embedder="none") as engine:
        engine.store("already here", tags=["mine"])
    before = dump(target)
    with pytest.raises(DestinationNotEmpty, match="not empty") as caught:
        copy_store(source, target)
    assert caught.value.held == 1
    assert dump(target) == before


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_replace_swaps_the_contents_and_keeps_nothing_of_the_old(
    backend: str, source: Path, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    target = str(tmp_path / "dest.db") if backend == "sqlite" else request.getfixturevalue("pg_url")
    small = tmp_path / "small.db"
    with MemoryEngine(small, scope="global", embedder="none") as engine:
        engine.store("already here", tags=["mine"])
        engine.forget(engine.store("gone").record_id)
    if backend == "postgres":
        copy_store(small, target)
    else:
        target = str(small)
    assert dump(target)["archive"]
    report = copy_store(source, target, replace=True)
    assert report.replaced
    assert dump(target) == dump(source)


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_a_copy_that_fails_midway_leaves_the_destination_as_it_was(
    backend: str, source: Path, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    target = str(tmp_path / "dest.db") if backend == "sqlite" else request.getfixturevalue("pg_url")
    with MemoryEngine(target, scope="global", embedder="none") as engine:
        engine.store("already here", tags=["mine"])
    before = dump(target)

    def fail_in_the_records(step: str, done: int, total: int) -> None:
        if step == "records":
            raise RuntimeError("interrupted")

    with pytest.raises(RuntimeError, match="interrupted"):
        copy_store(source, target, replace=True, progress=fail_in_the_records)
    assert dump(target) == before


def test_a_failed_copy_into_a_new_file_leaves_no_file(source: Path, tmp_path: Path) -> None:
    target = tmp_path / "new.db"

    def fail(step: str, done: int, total: int) -> None:
        if step == "archive":
            raise RuntimeError("interrupted")

    with pytest.raises(RuntimeError):
        copy_store(source, target, progress=fail)
    assert sorted(os.listdir(tmp_path)) == ["source.db"]


def test_progress_rises_to_the_total(source: Path, pg_url: str) -> None:
    seen: list[tuple[str, int, int]] = []
    copy_store(source, pg_url, progress=lambda step, done, total: seen.append((step, done, total)))
    held = dump(source)
    total = sum(len(held[name]) for name in held)
    assert {entry[2] for entry in seen} == {total}
    done = [entry[1] for entry in seen]
    assert done == sorted(done) and done[0] == 0 and done[-1] == total
    steps = list(dict.fromkeys(entry[0] for entry in seen))
    assert steps == ["registries", "settings", "records", "archive", "fold marks", "kept apart"]


def test_bad_input_is_refused_and_changes_nothing(
    source: Path, tmp_path: Path, pg_url: str
) -> None:
    with pytest.raises(InvalidInput, match="no store at"):
        copy_store(tmp_path / "missing.db", tmp_path / "out.db")
    assert not (tmp_path / "out.db").exists()
    with pytest.raises(InvalidInput, match="same store"):
        copy_store(source, tmp_path / "." / "source.db")
    with pytest.raises(InvalidInput, match="both source and destination"):
        copy_store(pg_url, pg_url)
    # Another spelling of the same database and schema.
    with pytest.raises(InvalidInput, match="same store"):
        copy_store(pg_url, pg_url + "&application_name=other")
    with pytest.raises(InvalidInput, match=":memory:"):
        copy_store(source, ":memory:")
    assert dump(source)["records"]


def test_an_unreachable_database_is_a_clear_error_and_no_file_is_made(
    source: Path, tmp_path: Path
) -> None:
    with pytest.raises(StoreError, match="cannot connect to PostgreSQL") as caught:
        copy_store("postgresql://postgres:hunter2@127.0.0.1:1/nowhere", tmp_path / "out.db")
    assert "hunter2" not in str(caught.value)
    assert not (tmp_path / "out.db").exists()


# -- the property -------------------------------------------------------------------------

LABEL = st.from_regex(r"[a-z][a-z0-9_]{0,6}", fullmatch=True)
SCALAR = st.none() | st.booleans() | st.integers(-(2**40), 2**40) | st.text(max_size=8)
FLOAT = st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False, width=32)
ITEM = st.fixed_dictionaries(
    {
        "content": st.text(
            st.characters(codec="utf-8", exclude_characters="\x00"), min_size=1, max_size=40
        ).filter(lambda text: text.strip() != ""),
        "domain": LABEL,
        "subdomain": LABEL,
        "tags": st.lists(LABEL, max_size=4, unique=True),
        "importance": st.floats(0, 1),
        "vector": st.none()
        | st.lists(FLOAT, min_size=4, max_size=4).filter(lambda vector: any(vector)),
        "metadata": st.dictionaries(st.text(min_size=1, max_size=6), SCALAR, max_size=3),
        "scope": st.sampled_from(["global", "user:bob", "project:x"]),
    }
)


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(items=st.lists(ITEM, max_size=12), forget=st.sets(st.integers(0, 11), max_size=4))
def test_random_stores_round_trip_exactly(
    items: list[dict[str, Any]],
    forget: set[int],
    pg_database: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    folder = tmp_path_factory.mktemp("prop")
    start, back, url = folder / "start.db", folder / "back.db", new_schema(pg_database)
    clock = FakeClock()
    with MemoryEngine(start, clock=clock, embedder="none") as engine:
        ids = []
        for item in items:
            ids.append(engine.store(**item).record_id)
            clock.advance(1.5)
        for index in sorted(forget):
            if index < len(ids) and ids[index] not in ids[:index]:
                engine.forget(ids[index])
    copy_store(start, url)
    copy_store(url, back)
    before = dump(start)
    assert dump(url) == before
    assert dump(back) == before


# -- the command --------------------------------------------------------------------------


def copy_cli(*args: str, input: str | None = None) -> Result:
    return CliRunner().invoke(cli, ["copy", *args], input=input)


def test_copy_command_copies_and_says_what(source: Path, pg_url: str, tmp_path: Path) -> None:
    result = copy_cli(str(source), pg_url)
    assert result.exit_code == 0, result.output
    held = dump(source)
    assert f"{len(held['records'])} records" in result.stderr
    assert f"{len(held['archive'])} archive entries" in result.stderr
    result = copy_cli(pg_url, str(tmp_path / "back.db"))
    assert result.exit_code == 0, result.output
    assert dump(tmp_path / "back.db") == held


def test_copy_command_refuses_a_non_empty_destination(source: Path, tmp_path: Path) -> None:
    target = tmp_path / "dest.db"
    with MemoryEngine(target, scope="global", embedder="none") as engine:
        engine.store("already here")
    before = dump(target)
    one_line_error(copy_cli(str(source), str(target)), "already holds 1 record", "--force")
    # No terminal to ask on: --force alone is not enough.
    one_line_error(copy_cli(str(source), str(target), "--force"), "--yes")
    assert dump(target) == before
    result = copy_cli(str(source), str(target), "--force", "--yes")
    assert result.exit_code == 0, result.output
    assert "replaced the contents of" in result.stderr
    assert dump(target) == dump(source)


def test_copy_command_asks_before_replacing(
    source: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from prime_memory_folding.cli import transfer

    monkeypatch.setattr(transfer, "stdin_is_terminal", lambda: True)
    target = tmp_path / "dest.db"
    with MemoryEngine(target, scope="global", embedder="none") as engine:
        engine.store("already here")
    before = dump(target)
    declined = copy_cli(str(source), str(target), "--force", input="n\n")
    assert declined.exit_code != 0 and "Replace the 1 record" in declined.output
    assert dump(target) == before
    accepted = copy_cli(str(source), str(target), "--force", input="y\n")
    assert accepted.exit_code == 0, accepted.output
    assert dump(target) == dump(source)


def test_copy_command_bad_input_is_one_line(source: Path, tmp_path: Path) -> None:
    one_line_error(copy_cli(str(tmp_path / "nope.db"), str(tmp_path / "x.db")), "no store at")
    assert not (tmp_path / "x.db").exists()
    one_line_error(copy_cli(str(source), str(source)), "same store")
    result = copy_cli(str(source), str(tmp_path / "x.db"), "--yes")
    one_line_error(result, "--yes goes with --force")
    result = CliRunner().invoke(cli, ["--store", str(source), "copy", str(source), "y.db"])
    one_line_error(result, "leave out --store")


# -- every command on a URL -----------------------------------------------------------------


def with_password(url: str, password: str) -> str:
    """The URL with a password (trust authentication ignores it)."""
    return url.replace("postgresql://postgres@", f"postgresql://postgres:{password}@", 1)


@pytest.mark.parametrize("how", ["option", "environment"])
def test_commands_work_on_a_postgres_url(
    how: str, pg_url: str, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = with_password(pg_url, "s3cret-pw")
    if how == "environment":
        monkeypatch.setenv("PRIME_MEMORY_STORE", url)
        prefix: list[str] = []
    else:
        prefix = ["--store", url]
    runner = CliRunner()

    def run(*args: str) -> Result:
        result = runner.invoke(cli, [*prefix, *args], obj={"clock": clock})
        assert "s3cret-pw" not in result.output
        return result

    stored = run(
        "store", "PostgreSQL keeps the team memory", "-d", "decision", "-t", "pg", "--json"
    )
    assert stored.exit_code == 0, stored.output
    record_id = json.loads(stored.stdout)["record"]["record_id"]
    got = run("get", record_id, "--json")
    assert got.exit_code == 0 and json.loads(got.stdout)["record_id"] == record_id
    queried = run("query", "-d", "decision", "--json")
    assert queried.exit_code == 0, queried.output
    assert record_id in queried.stdout
    stats = run("stats")
    assert stats.exit_code == 0 and "1 records" in stats.stdout and "postgres:***@" in stats.stdout
    listed = run("scopes")
    assert listed.exit_code == 0 and "global" in listed.stdout
    who = run("whoami")
    assert who.exit_code == 0 and "postgres:***@" in who.stdout and "not created" not in who.stdout
    exported = run("export", "-")
    assert exported.exit_code == 0 and record_id in exported.stdout
    checked = run("doctor")
    assert checked.exit_code == 0, checked.output
    assert "does not apply to PostgreSQL" in checked.output


def test_the_stdio_mcp_server_serves_a_postgres_url(pg_url: str) -> None:
    from tests.stdio_client import StdioServer

    server = StdioServer(with_password(pg_url, "s3cret-pw"))  # type: ignore[arg-type]
    try:
        server.handshake()
        stored = server.call(
            "prime_memory_store", {"content": "served from PostgreSQL", "domain": "fact"}
        )
        assert not stored.get("isError"), stored
    finally:
        assert server.close() == 0
    assert b"s3cret-pw" not in server.stderr
    assert [row[6] for row in dump(pg_url)["records"]] == ["served from PostgreSQL"]


# -- tokens ---------------------------------------------------------------------------------


def test_tokens_come_along_exactly_and_keep_working(
    source: Path, pg_url: str, tmp_path: Path
) -> None:
    """Hashes, scopes, read-only flags, times and revocations survive both ways."""
    storage = open_storage(str(source))
    alice = tokens.add(storage, "alice", ["project:a"], now=10.0)
    tokens.add(storage, "reader", "*", read_only=True, now=11.0)
    tokens.add(storage, "gone", "*", now=12.0)
    tokens.revoke(storage, "gone", now=13.0)
    storage.close()
    back = tmp_path / "back.db"
    there = copy_store(source, pg_url)
    again = copy_store(pg_url, back)
    assert there.tokens == again.tokens == 3
    rows = {}
    for location in (str(source), pg_url, str(back)):
        opened = open_storage(location)
        rows[location] = opened.tokens()
        found = tokens.verify(opened, alice)
        opened.close()
        assert found is not None and found.name == "alice"
    assert rows[str(source)] == rows[pg_url] == rows[str(back)]
    assert [row.revoked_at for row in rows[str(back)]] == [None, None, 13.0]
