"""Store file problems end in a clear message naming the path and the fix.

Each problem is met through the engine, the CLI and the stdio MCP server, and
never as a traceback or a silently emptied store:

- a store path under a regular file (no folder can be made there);
- a read-only file system (a tmpfs mounted read-only; tests run as root, so
  file modes alone would not stop a write);
- a corrupt database file, and one written by a newer schema version;
- a full disk (a 256 KiB tmpfs);
- a store locked by a long transaction elsewhere (``PRIME_MEMORY_BUSY_TIMEOUT_MS``
  keeps the wait short).

Mounting needs root and mount permission; without them those cases are skipped
with the reason.
"""

from __future__ import annotations

import contextlib
import random
import sqlite3
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from prime_memory_folding import MemoryEngine, StoreError, StoreLocked
from prime_memory_folding.cli import cli
from prime_memory_folding.errors import SchemaTooNew
from prime_memory_folding.storage import SQLiteStorage
from tests.stdio_client import StdioServer

FAST_LOCK_MS = "200"


@contextlib.contextmanager
def tmpfs(where: Path, *options: str) -> Iterator[Path]:
    where.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", ",".join(options), "tmpfs", str(where)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({done.stderr.strip()}); needs root")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def remount_read_only(where: Path) -> None:
    subprocess.run(["mount", "-o", "remount,ro", str(where)], check=True)


# -- the problems, each as (store path, what the message must say) --------------------


def under_a_file(tmp: Path) -> Path:
    (tmp / "a-file").write_text("not a folder")
    return tmp / "a-file" / "memory.db"


def corrupt(tmp: Path) -> Path:
    path = tmp / "corrupt.db"
    path.write_bytes(random.Random(7).randbytes(64 * 1024))
    return path


def half_corrupt(tmp: Path) -> Path:
    path = tmp / "half.db"
    with MemoryEngine(path, embedder="none") as engine:
        engine.store_many([f"memory {n}" for n in range(200)])
    data = bytearray(path.read_bytes())
    data[100:8192] = random.Random(8).randbytes(8092)
    path.write_bytes(bytes(data))
    return path


def newer_schema(tmp: Path) -> Path:
    path = tmp / "newer.db"
    with MemoryEngine(path, embedder="none") as engine:
        engine.store("from an older life")
    db = sqlite3.connect(path)
    db.execute("INSERT INTO schema_migrations VALUES (9999, 'from_the_future', 0)")
    db.commit()
    db.close()
    return path


CASES: dict[str, tuple[Callable[[Path], Path], type[StoreError], tuple[str, ...]]] = {
    "under-a-file": (under_a_file, StoreError, ("cannot create the folder", "--store")),
    "corrupt": (corrupt, StoreError, ("not a readable SQLite database", "backup")),
    "half-corrupt": (half_corrupt, StoreError, ("not a readable SQLite database", "backup")),
    "newer-schema": (newer_schema, SchemaTooNew, ("schema version 9999", "upgrade")),
}


def says(message: str, path: Path, fragments: tuple[str, ...]) -> None:
    assert str(path) in message, message
    for fragment in fragments:
        assert fragment in message, message
    assert "Traceback" not in message


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_the_engine_names_the_path_and_the_fix(tmp_path: Path, case: tuple) -> None:
    make, error, fragments = case
    path = make(tmp_path)
    before = path.read_bytes() if path.is_file() else None
    with pytest.raises(error) as raised:
        MemoryEngine(path, embedder="none")
    says(str(raised.value), path, fragments)
    if before is not None:
        assert path.read_bytes() == before, "a bad store must never be rewritten"


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
@pytest.mark.parametrize("command", [["stats"], ["store", "hello"], ["query"]])
def test_the_cli_prints_one_line_naming_the_path(
    tmp_path: Path, case: tuple, command: list[str]
) -> None:
    make, _, fragments = case
    path = make(tmp_path)
    result = CliRunner().invoke(cli, ["--store", str(path), *command])
    assert result.exit_code == 1, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.output
    says(lines[0], path, fragments)


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_the_mcp_server_answers_with_a_tool_error_and_keeps_serving(
    tmp_path: Path, case: tuple
) -> None:
    make, _, fragments = case
    path = make(tmp_path)
    server = StdioServer(path, env={"PRIME_MEMORY_EMBEDDER": "none"})
    try:
        server.handshake()
        for tool, arguments in [
            ("prime_memory_stats", {}),
            ("prime_memory_store", {"content": "x"}),
        ]:
            result = server.call(tool, arguments)
            assert result["isError"] is True
            says(result["content"][0]["text"], path, fragments)
        assert server.request("ping")["result"] == {}
    finally:
        assert server.close() == 0
    assert b"Traceback" not in server.stderr, server.stderr.decode(errors="replace")


def test_an_empty_file_is_a_new_store_not_an_error(tmp_path: Path) -> None:
    path = tmp_path / "empty.db"
    path.touch()
    with MemoryEngine(path, embedder="none") as engine:
        assert engine.stats().records == 0


# -- read-only file system ---------------------------------------------------------------


def test_a_read_only_file_system_is_named_in_every_adapter(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "ro", "size=4m") as folder:
        existing = folder / "memory.db"
        with MemoryEngine(existing, embedder="none") as engine:
            engine.store("written before the remount")
        remount_read_only(folder)
        for path in (existing, folder / "new.db", folder / "sub" / "new.db"):
            with pytest.raises(StoreError) as raised:
                MemoryEngine(path, embedder="none")
            message = str(raised.value)
            assert str(path) in message and ("permissions" in message or "--store" in message)
            result = CliRunner().invoke(cli, ["--store", str(path), "stats"])
            assert result.exit_code == 1 and str(path) in result.stderr
            assert len(result.stderr.strip().splitlines()) == 1
        server = StdioServer(existing, env={"PRIME_MEMORY_EMBEDDER": "none"})
        try:
            server.handshake()
            result = server.call("prime_memory_store", {"content": "x"})
            assert result["isError"] and str(existing) in result["content"][0]["text"]
        finally:
            assert server.close() == 0
        assert b"Traceback" not in server.stderr


# -- full disk ------------------------------------------------------------------------------


def test_a_full_disk_refuses_the_write_and_keeps_what_was_stored(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "full", "size=256k") as folder:
        path = folder / "memory.db"
        acknowledged: list[str] = []
        with MemoryEngine(path, embedder="none") as engine:
            with pytest.raises(StoreError) as raised:
                for n in range(10_000):
                    acknowledged.append(engine.store(f"{n} " + "z" * 2_000).record_id)
            message = str(raised.value)
            assert str(path) in message and "disk is full" in message and "free space" in message
            result = CliRunner().invoke(cli, ["--store", str(path), "store", "y" * 50_000])
            assert result.exit_code == 1 and "disk is full" in result.stderr
            assert len(result.stderr.strip().splitlines()) == 1
        server = StdioServer(path, env={"PRIME_MEMORY_EMBEDDER": "none"})
        try:
            server.handshake()
            result = server.call("prime_memory_store", {"content": "w" * 90_000})
            assert result["isError"] and "disk is full" in result["content"][0]["text"]
        finally:
            assert server.close() == 0
        with MemoryEngine(path, embedder="none") as engine:
            assert set(acknowledged) <= set(engine.match_ids())
            db = engine.storage.db  # type: ignore[attr-defined]
            assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


# -- a lock held elsewhere -------------------------------------------------------------------


@pytest.fixture
def locked_store(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "locked.db"
    with MemoryEngine(path, embedder="none") as engine:
        engine.store("already here")
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    holder.execute("INSERT INTO meta (key, value) VALUES ('held', 'yes')")
    yield path
    holder.execute("ROLLBACK")
    holder.close()


def test_a_long_transaction_elsewhere_is_store_locked_after_the_timeout(
    locked_store: Path,
) -> None:
    with MemoryEngine(storage=SQLiteStorage(locked_store, busy_timeout_ms=100)) as engine:
        with pytest.raises(StoreLocked) as raised:
            engine.store("blocked")
        message = str(raised.value)
        assert str(locked_store) in message and "0.1 s" in message and "retry" in message
        assert engine.stats().records == 1  # reading still works under a writer's lock


def test_the_busy_timeout_comes_from_the_environment(
    locked_store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PRIME_MEMORY_BUSY_TIMEOUT_MS", FAST_LOCK_MS)
    result = CliRunner().invoke(cli, ["--store", str(locked_store), "store", "blocked"])
    assert result.exit_code == 1
    [line] = result.stderr.strip().splitlines()
    assert str(locked_store) in line and "locked" in line and "0.2 s" in line
    env = {"PRIME_MEMORY_EMBEDDER": "none", "PRIME_MEMORY_BUSY_TIMEOUT_MS": FAST_LOCK_MS}
    server = StdioServer(locked_store, env=env)
    try:
        server.handshake()
        result_mcp = server.call("prime_memory_store", {"content": "blocked"})
        assert result_mcp["isError"] and "StoreLocked" in result_mcp["content"][0]["text"]
        assert server.call("prime_memory_stats", {})["structuredContent"]["records"] == 1
    finally:
        assert server.close() == 0


@pytest.mark.parametrize("value", ["soon", "-5", "1.5"])
def test_a_bad_busy_timeout_setting_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv("PRIME_MEMORY_BUSY_TIMEOUT_MS", value)
    with pytest.raises(StoreError, match="PRIME_MEMORY_BUSY_TIMEOUT_MS"):
        MemoryEngine(tmp_path / "m.db", embedder="none")
