"""``prime-memory doctor``: its write self-test really runs processes on a copy."""

from __future__ import annotations

import hashlib
from pathlib import Path

from prime_memory_folding import MemoryEngine
from prime_memory_folding.doctor import SELF_TEST_DOMAIN, check_store, self_test


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
