"""Store file problems end in a clear message naming the path and the fix.

Each problem is met through the engine, the CLI and the stdio MCP server, and
never as a traceback or a silently emptied store:

- a store path under a regular file (no folder can be made there);
- a read-only folder: a tmpfs mounted read-only, or a folder and file with
  their write bits cleared (which binds only a user without CAP_DAC_OVERRIDE,
  so not root);
- a corrupt database file, and one written by a newer schema version;
- a full disk: a 256 KiB tmpfs, or a 256 KiB file size limit (RLIMIT_FSIZE) on
  the writing process, past which a write fails with EFBIG;
- a store locked by a long transaction elsewhere (``PRIME_MEMORY_BUSY_TIMEOUT_MS``
  keeps the wait short).

Mounting needs root and mount permission. Each simulation that cannot work here
skips with the reason; when the ``CI`` environment variable is set and no way to
simulate a problem works, the test fails instead.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import random
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from prime_memory_folding import MemoryEngine, StoreError, StoreLocked
from prime_memory_folding.cli import cli
from prime_memory_folding.errors import SchemaTooNew
from prime_memory_folding.storage import SQLiteStorage
from tests import stdio_client
from tests.stdio_client import StdioServer

FAST_LOCK_MS = "200"
#: A new store's write-ahead log holds every migration (about 230 KB), so the
#: disk leaves room for a few stores after it.
SMALL_DISK = 320 * 1024


@functools.cache
def mount_problem() -> str | None:
    """Why a tmpfs cannot be mounted here, or None when it can."""
    if shutil.which("mount") is None:
        return "no mount command"
    where = Path(tempfile.mkdtemp(prefix="pmf-mount-"))
    try:
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(where)],
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            return f"cannot mount a tmpfs ({' '.join(done.stderr.split())}); needs root"
        subprocess.run(["umount", str(where)], check=True)
        return None
    finally:
        where.rmdir()


@functools.cache
def chmod_problem() -> str | None:
    """Why clearing a folder's write bits would not stop this process, or None."""
    where = Path(tempfile.mkdtemp(prefix="pmf-chmod-"))
    try:
        where.chmod(0o555)
        try:
            (where / "probe").touch()
        except PermissionError:
            return None
        return "file modes do not bind this user (root, or CAP_DAC_OVERRIDE)"
    finally:
        where.chmod(0o755)
        shutil.rmtree(where)


def file_size_limit_problem() -> str | None:
    try:
        import resource
    except ImportError:
        return "no resource module on this platform"
    return None if hasattr(resource, "RLIMIT_FSIZE") else "no RLIMIT_FSIZE on this platform"


def require(way: str, problems: dict[str, Callable[[], str | None]]) -> None:
    """Skip unless ``way`` works here; on CI, fail when no way in ``problems`` does."""
    problem = problems[way]()
    if problem is None:
        return
    others = {name: check() for name, check in problems.items() if name != way}
    if os.environ.get("CI") and all(others.values()):
        pytest.fail(f"no way to simulate this works here ({way}: {problem}; {others})")
    covered = [name for name, other in others.items() if other is None]
    pytest.skip(f"{way}: {problem}" + (f"; the {covered[0]} way runs instead" if covered else ""))


READ_ONLY_WAYS = {"tmpfs": mount_problem, "chmod": chmod_problem}
FULL_DISK_WAYS = {"tmpfs": mount_problem, "file-size-limit": file_size_limit_problem}


@contextlib.contextmanager
def tmpfs(where: Path, *options: str) -> Iterator[Path]:
    where.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", ",".join(options), "tmpfs", str(where)], check=True
    )
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


@contextlib.contextmanager
def read_only_folder(where: Path, way: str) -> Iterator[tuple[Path, Callable[[], None]]]:
    """A folder, and the call that makes it and everything in it read-only."""
    if way == "tmpfs":
        with tmpfs(where, "size=4m") as folder:
            yield folder, functools.partial(remount_read_only, folder)
        return
    where.mkdir(parents=True)
    try:
        yield where, functools.partial(clear_write_bits, where)
    finally:
        where.chmod(0o755)


def remount_read_only(where: Path) -> None:
    subprocess.run(["mount", "-o", "remount,ro", str(where)], check=True)


def clear_write_bits(where: Path) -> None:
    for item in where.iterdir():
        item.chmod(0o444)
    where.chmod(0o555)


#: Runs the rest of argv (``-m MODULE ARGS`` or ``-c CODE ARGS``) with writes past
#: the first argument's byte count failing with EFBIG, as on a full disk.
FILE_SIZE_LIMIT = """\
import resource, runpy, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # else the write kills the process
hard = resource.getrlimit(resource.RLIMIT_FSIZE)[1]
resource.setrlimit(resource.RLIMIT_FSIZE, (int(sys.argv[1]), hard))
switch, target, *rest = sys.argv[2:]
sys.argv = [target, *rest]
if switch == "-m":
    runpy.run_module(target, run_name="__main__", alter_sys=True)
else:
    exec(compile(target, "<limited>", "exec"), {"__name__": "__main__"})
"""


def python(limit: int | None, *argv: str) -> list[str]:
    """A ``python ARGV`` command line, under a file size limit unless ``limit`` is None."""
    if limit is None:
        return [sys.executable, *argv]
    return [sys.executable, "-c", FILE_SIZE_LIMIT, str(limit), *argv]


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

NO_STORE = ("no store at", "check --store")


def says(message: str, path: Path, fragments: tuple[str, ...]) -> None:
    assert str(path) in message, message
    for fragment in fragments:
        assert fragment in message, message
    assert "Traceback" not in message


def tells_the_client(message: str, path: Path, *told: str) -> None:
    """An MCP client's error: what to do, and nothing of where the store lives."""
    assert str(path) not in message and path.name not in message, message
    assert "Traceback" not in message
    for fragment in told:
        assert fragment in message, message


def logs_for_the_operator(log: bytes, path: Path, fragments: tuple[str, ...]) -> None:
    """The server's own log (stderr) holds the path and the fix the client was spared."""
    says(log.decode(errors="replace"), path, fragments)


def contents(path: Path) -> bytes | None:
    return path.read_bytes() if path.is_file() else None


def assert_unchanged(path: Path, before: bytes | None) -> None:
    assert contents(path) == before, "a bad store must never be rewritten"


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_the_engine_names_the_path_and_the_fix(tmp_path: Path, case: tuple) -> None:
    make, error, fragments = case
    path = make(tmp_path)
    before = contents(path)
    with pytest.raises(error) as raised:
        MemoryEngine(path, embedder="none")
    says(str(raised.value), path, fragments)
    assert_unchanged(path, before)


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
@pytest.mark.parametrize("command", [["stats"], ["store", "hello"], ["query"]])
def test_the_cli_prints_one_line_naming_the_path(
    tmp_path: Path, case: tuple, command: list[str]
) -> None:
    make, _, fragments = case
    path = make(tmp_path)
    before = contents(path)
    if before is None and command[0] != "store":
        fragments = NO_STORE  # only commands that add memories create a store
    result = CliRunner().invoke(cli, ["--store", str(path), *command])
    assert result.exit_code == 1, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.output
    says(lines[0], path, fragments)
    assert_unchanged(path, before)


# A server process for each problem: one in the default run, the others slow;
# the engine and the command line meet every problem in the default run.
@pytest.mark.parametrize(
    "case",
    [
        pytest.param(case, id=name, marks=() if name == "corrupt" else pytest.mark.slow)
        for name, case in CASES.items()
    ],
)
def test_the_mcp_server_answers_with_a_tool_error_and_keeps_serving(
    tmp_path: Path, case: tuple
) -> None:
    make, _, fragments = case
    path = make(tmp_path)
    before = contents(path)
    server = StdioServer(path, env={"PRIME_MEMORY_EMBEDDER": "none"})
    try:
        server.handshake()
        for tool, arguments in [
            ("prime_memory_stats", {}),
            ("prime_memory_store", {"content": "x"}),
        ]:
            result = server.call(tool, arguments)
            assert result["isError"] is True
            tells_the_client(result["content"][0]["text"], path, "the server's log says why")
        assert server.request("ping")["result"] == {}
    finally:
        assert server.close() == 0
    assert b"Traceback" not in server.stderr, server.stderr.decode(errors="replace")
    logs_for_the_operator(server.stderr, path, fragments)
    assert_unchanged(path, before)


def test_an_empty_file_is_a_new_store_not_an_error(tmp_path: Path) -> None:
    path = tmp_path / "empty.db"
    path.touch()
    with MemoryEngine(path, embedder="none") as engine:
        assert engine.stats().records == 0


# -- read-only file system ---------------------------------------------------------------

CANNOT_WRITE = ("cannot be written", "check the file and folder permissions")
CANNOT_MAKE_FOLDER = ("cannot create the folder", "choose a writable path with --store")


@pytest.mark.parametrize("way", READ_ONLY_WAYS)
def test_a_read_only_folder_is_named_in_every_adapter(tmp_path: Path, way: str) -> None:
    require(way, READ_ONLY_WAYS)
    with read_only_folder(tmp_path / "ro", way) as (folder, make_read_only):
        existing = folder / "memory.db"
        with MemoryEngine(existing, embedder="none") as engine:
            engine.store("written before the folder became read-only")
        make_read_only()
        before = existing.read_bytes()
        cases = {
            existing: CANNOT_WRITE,
            folder / "new.db": CANNOT_WRITE,
            folder / "sub" / "new.db": CANNOT_MAKE_FOLDER,
        }
        for path, fragments in cases.items():
            with pytest.raises(StoreError) as raised:
                MemoryEngine(path, embedder="none")
            says(str(raised.value), path, fragments)
            result = CliRunner().invoke(cli, ["--store", str(path), "store", "x"])
            assert result.exit_code == 1, result.output
            [line] = result.stderr.strip().splitlines()
            says(line, path, fragments)
        server = StdioServer(existing, env={"PRIME_MEMORY_EMBEDDER": "none"})
        try:
            server.handshake()
            result_mcp = server.call("prime_memory_store", {"content": "x"})
            assert result_mcp["isError"] is True
            tells_the_client(result_mcp["content"][0]["text"], existing, "the server's log")
        finally:
            assert server.close() == 0
        assert b"Traceback" not in server.stderr
        logs_for_the_operator(server.stderr, existing, CANNOT_WRITE)
        assert existing.read_bytes() == before
        assert not (folder / "new.db").exists() and not (folder / "sub").exists()


# -- full disk ------------------------------------------------------------------------------

#: Stores 2,000-character memories until a write fails; prints what was acknowledged.
FILL = """\
import json, sys
from prime_memory_folding import MemoryEngine, StoreError
acknowledged = []
try:
    with MemoryEngine(sys.argv[1], embedder="none") as engine:
        for n in range(10_000):
            acknowledged.append(engine.store(f"{n} " + "z" * 2_000).record_id)
except StoreError as exc:
    print(json.dumps({"acknowledged": acknowledged, "error": str(exc)}))
"""
#: 270 KB as UTF-8: more than the small disk holds, within MAX_CONTENT_CHARS.
TOO_BIG = "語" * 90_000
FULL_DISK_SAYS = {
    "tmpfs": ("the disk is full", "free space and retry"),
    "file-size-limit": ("disk I/O error", "file size limit", "free space"),
}


@pytest.mark.parametrize("way", FULL_DISK_WAYS)
def test_a_full_disk_refuses_the_write_and_keeps_what_was_stored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, way: str
) -> None:
    require(way, FULL_DISK_WAYS)
    fragments = FULL_DISK_SAYS[way]
    limit = SMALL_DISK if way == "file-size-limit" else None
    with contextlib.ExitStack() as stack:
        if way == "tmpfs":
            folder = stack.enter_context(tmpfs(tmp_path / "full", f"size={SMALL_DISK}"))
        else:
            folder = tmp_path / "full"
            folder.mkdir()
        path = folder / "memory.db"
        filled = subprocess.run(
            python(limit, "-c", FILL, str(path)), capture_output=True, text=True, check=True
        )
        assert filled.stdout, f"the disk never filled: {filled.stderr[-2000:]}"
        report = json.loads(filled.stdout)
        says(report["error"], path, fragments)
        acknowledged = report["acknowledged"]
        assert acknowledged, "some stores fit before the disk filled"

        cli_run = subprocess.run(
            python(limit, "-m", "prime_memory_folding.cli", "--store", str(path), "store", "-"),
            input=TOO_BIG,
            capture_output=True,
            text=True,
        )
        assert cli_run.returncode == 1, cli_run.stderr
        [line] = cli_run.stderr.strip().splitlines()
        says(line, path, fragments)

        monkeypatch.setattr(
            stdio_client, "SERVER", python(limit, "-m", "prime_memory_folding.mcp.server")
        )
        server = StdioServer(path, env={"PRIME_MEMORY_EMBEDDER": "none"})
        try:
            server.handshake()
            result = server.call("prime_memory_store", {"content": TOO_BIG})
            assert result["isError"] is True
            tells_the_client(result["content"][0]["text"], path, "disk is full", "free space")
            assert server.request("ping")["result"] == {}
        finally:
            assert server.close() == 0
        assert b"Traceback" not in server.stderr

        with MemoryEngine(path, embedder="none") as engine:
            # Every acknowledged store is there, and no refused one.
            assert sorted(engine.match_ids()) == sorted(acknowledged)
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
        assert result_mcp["isError"] is True
        tells_the_client(result_mcp["content"][0]["text"], locked_store, "StoreLocked", "retry")
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
