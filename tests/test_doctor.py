"""``prime-memory doctor``: it only reads the store, and its self-test writes a copy."""

from __future__ import annotations

import hashlib
import sqlite3
import tempfile
from pathlib import Path
from typing import Any

import pytest

from prime_memory_folding import MemoryEngine
from prime_memory_folding.engine.doctor import SELF_TEST_DOMAIN, Check, check_store, self_test
from prime_memory_folding.storage import SQLiteStorage
from prime_memory_folding.storage.migrations import MIGRATIONS, latest_version
from tests.old_stores import build_store


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_the_self_test_counts_every_write_of_every_process(tmp_path: Path) -> None:
    store = tmp_path / "memory.db"
    with MemoryEngine(store, embedder="none") as engine:
        engine.store("a memory the doctor must not touch")
    before = digest(store)
    check = self_test(store, processes=3, writes=7)
    assert check.ok, check.detail
    assert check.detail == "3 processes x 7 writes: 21/21 survived"
    assert digest(store) == before
    with MemoryEngine(store, embedder="none") as engine:
        assert engine.match_ids(domain=SELF_TEST_DOMAIN) == []
        assert engine.stats().records == 1


def test_the_self_test_survives_a_store_bound_to_custom_vectors(tmp_path: Path) -> None:
    store = tmp_path / "vectors.db"
    with MemoryEngine(store, embedder="none") as engine:
        engine.store("with a vector", vector=[0.1, 0.2, 0.3])
    checks = check_store(store, processes=2, writes=4)
    assert [c.name for c in checks][-1] == "concurrent writes"
    assert all(c.ok for c in checks), checks


def test_processes_zero_skips_the_self_test(tmp_path: Path) -> None:
    store = tmp_path / "memory.db"
    MemoryEngine(store, embedder="none").close()
    assert "concurrent writes" not in [c.name for c in check_store(store, processes=0)]


def schema_version(path: Path) -> int:
    db = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)
    try:
        return int(db.execute("SELECT max(version) FROM schema_migrations").fetchone()[0])
    finally:
        db.close()


@pytest.fixture
def opened(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Every file this process opens as a writable store."""
    paths: list[Path] = []
    original = SQLiteStorage.__init__

    def spy(self: SQLiteStorage, path: Any, **kwargs: Any) -> None:
        paths.append(Path(path).resolve())
        original(self, path, **kwargs)

    monkeypatch.setattr(SQLiteStorage, "__init__", spy)
    return paths


@pytest.fixture
def scratch_folders(monkeypatch: pytest.MonkeyPatch) -> list[str | None]:
    """The ``dir`` of every temporary folder made, to see where the self-test copies."""
    folders: list[str | None] = []
    original = tempfile.TemporaryDirectory

    def spy(*args: Any, **kwargs: Any) -> tempfile.TemporaryDirectory[str]:
        folders.append(None if kwargs.get("dir") is None else str(kwargs["dir"]))
        return original(*args, **kwargs)

    monkeypatch.setattr(tempfile, "TemporaryDirectory", spy)
    return folders


def test_an_older_schema_is_reported_and_left_unmigrated(
    tmp_path: Path, opened: list[Path], scratch_folders: list[str | None]
) -> None:
    store = tmp_path / "old store #1.db"  # URI-special characters in the name
    newest = latest_version()
    # Version numbers may skip: the one before the newest is the newest below it.
    previous = max(m.version for m in MIGRATIONS if m.version < newest)
    build_store(store, previous)
    before = digest(store)
    checks = {c.name: c for c in check_store(store, processes=2, writes=3)}
    assert digest(store) == before
    assert schema_version(store) == previous
    assert store.resolve() not in opened
    schema = checks["schema"]
    assert not schema.ok
    pending = next(m for m in MIGRATIONS if m.version == newest)
    assert f"version {previous} of {newest}" in schema.detail
    assert f"migration {newest} ({pending.name}) pending" in schema.detail
    assert checks["opens"].ok and checks["integrity"].ok and checks["wal mode"].ok
    # The self-test migrates and writes its copy, in a folder beside the store.
    assert checks["concurrent writes"].ok, checks["concurrent writes"].detail
    assert scratch_folders == [str(store.parent)]
    assert sorted(p.name for p in tmp_path.iterdir() if "doctor" in p.name) == []


def test_a_newer_schema_is_reported_and_not_opened(tmp_path: Path, opened: list[Path]) -> None:
    store = tmp_path / "memory.db"
    with MemoryEngine(store, embedder="none") as engine:
        engine.store("written by a newer release")
    opened.clear()
    newest = latest_version()
    db = sqlite3.connect(store)
    with db:
        db.execute("INSERT INTO schema_migrations VALUES (?, 'from_the_future', 0)", (newest + 1,))
    db.close()
    before = digest(store)
    checks = check_store(store, processes=2, writes=3)
    assert digest(store) == before
    assert opened == []
    by_name = {c.name: c for c in checks}
    assert "concurrent writes" not in by_name
    assert not by_name["schema"].ok
    assert f"version {newest + 1}, newer" in by_name["schema"].detail
    assert "upgrade the package" in by_name["schema"].detail
    assert by_name["records"].detail == "1"


def test_a_current_store_passes_every_read_only_check(tmp_path: Path, opened: list[Path]) -> None:
    store = tmp_path / "memory.db"
    with MemoryEngine(store, embedder="none") as engine:
        engine.store("one")
    opened.clear()
    checks = check_store(store, processes=0)
    assert [c.name for c in checks] == [
        "opens", "integrity", "wal mode", "schema", "embedding", "records", "vectors",
    ]  # fmt: skip
    assert all(c.ok for c in checks), checks
    assert opened == []


def test_an_embedding_space_the_configured_embedder_cannot_open_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = tmp_path / "memory.db"
    with MemoryEngine(store, embedder="none") as engine:
        engine.store("one")
    db = sqlite3.connect(store)
    with db:
        db.executemany(
            "INSERT INTO meta (key, value) VALUES (?, ?)",
            [("embedding_space", "another-model"), ("embedding_dim", "3")],
        )
    db.close()
    monkeypatch.setenv("PRIME_MEMORY_EMBEDDER", "builtin")
    embedding = {c.name: c for c in check_store(store, processes=0)}["embedding"]
    assert not embedding.ok
    assert "another-model (3 dimensions)" in embedding.detail
    assert "PRIME_MEMORY_EMBEDDER" in embedding.detail


def test_the_self_test_falls_back_to_the_system_temp_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = tmp_path / "memory.db"
    MemoryEngine(store, embedder="none").close()
    original = tempfile.TemporaryDirectory

    def unwritable_beside(*args: Any, **kwargs: Any) -> tempfile.TemporaryDirectory[str]:
        if kwargs.get("dir") is not None:
            raise PermissionError(13, "Permission denied")
        return original(*args, **kwargs)

    monkeypatch.setattr(tempfile, "TemporaryDirectory", unwritable_beside)
    check = self_test(store, processes=1, writes=2)
    assert check.ok, check.detail
    assert check.detail.startswith("1 processes x 2 writes: 2/2 survived; the copy ran in")
    assert f"{tmp_path} is not writable (Permission denied)" in check.detail


def test_a_directory_is_not_a_store(tmp_path: Path) -> None:
    assert check_store(tmp_path, processes=0) == [
        Check("store", False, f"store path {tmp_path} is a directory; give a file path")
    ]
