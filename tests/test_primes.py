from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prime_memory_folding import InvalidInput, MemoryEngine
from prime_memory_folding.core.primes import (
    DEFAULT_LABELS,
    Kind,
    is_prime,
    next_prime,
    normalise_label,
    normalise_tags,
)

SMALL_PRIMES = [p for p in range(2, 2000) if all(p % d for d in range(2, int(p**0.5) + 1))]


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("Memory", "memory"),
        ("  Project  ", "project"),
        ("Design  Decision\tlog", "design_decision_log"),
        ("数据库", "数据库"),
    ],
)
def test_labels_are_trimmed_lowered_and_joined(raw: str, expected: str) -> None:
    assert normalise_label(raw) == expected


@pytest.mark.parametrize("raw", ["", "   ", "\t\n"])
def test_label_that_normalises_to_empty_is_rejected(raw: str) -> None:
    with pytest.raises(InvalidInput, match="empty"):
        normalise_label(raw, Kind.TAG)


def test_a_bare_string_of_tags_is_rejected() -> None:
    with pytest.raises(InvalidInput, match="list"):
        normalise_tags("important")


def test_primality_matches_trial_division() -> None:
    assert [n for n in range(2000) if is_prime(n)] == SMALL_PRIMES


@given(st.integers(min_value=0, max_value=10**12))
def test_next_prime_is_the_smallest_prime_above(n: int) -> None:
    p = next_prime(n)
    assert p > n and is_prime(p)
    assert not any(is_prime(m) for m in range(n + 1, p))


def test_defaults_get_consecutive_primes_in_listed_order(engine: MemoryEngine) -> None:
    registries = engine.stats().registries
    for kind, labels in DEFAULT_LABELS.items():
        assert [registries[kind.value][label] for label in labels] == SMALL_PRIMES[: len(labels)]


def test_new_label_gets_the_next_prime_above_the_highest(engine: MemoryEngine) -> None:
    engine.store("x", tags=["alpha"])
    engine.store("y", tags=["beta"])
    tags = engine.stats().registries["tag"]
    assert tags["alpha"] == next_prime(max(tags[label] for label in DEFAULT_LABELS[Kind.TAG]))
    assert tags["beta"] == next_prime(tags["alpha"])


def test_prime_is_never_reused_after_its_records_are_gone(store_path: Path) -> None:
    with MemoryEngine(store_path) as memory:
        record = memory.store("x", tags=["ephemeral"])
        first = memory.stats().registries["tag"]["ephemeral"]
        memory.forget(record.record_id)
    with MemoryEngine(store_path) as memory:
        memory.store("y", tags=["another"])
        tags = memory.stats().registries["tag"]
        assert tags["ephemeral"] == first
        assert tags["another"] > first


def test_queries_never_assign_primes(engine: MemoryEngine) -> None:
    before = engine.stats().registries
    assert engine.query(domain="never-seen", tags=["unknown"]) == []
    assert engine.query(any_tags=["unknown"], exclude_tags=["other"]) == []
    assert engine.match_ids(subdomain="nope") == []
    assert engine.stats().registries == before


label_text = st.text(
    alphabet=st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=12
).filter(lambda s: s.strip() != "")


@settings(max_examples=30, deadline=None)
@given(st.lists(st.lists(label_text, min_size=1, max_size=4), min_size=1, max_size=6))
def test_registry_is_stable_unique_and_survives_reopen(
    tmp_path_factory: pytest.TempPathFactory, batches: list[list[str]]
) -> None:
    path = tmp_path_factory.mktemp("reg") / "m.db"
    seen: dict[str, int] = {}
    for batch in batches:
        with MemoryEngine(path) as memory:
            memory.store("content", tags=batch)
            tags = memory.stats().registries["tag"]
        for label, prime in seen.items():
            assert tags[label] == prime
        seen = tags
        primes = list(tags.values())
        assert len(primes) == len(set(primes))
        assert all(is_prime(p) for p in primes)


_WORKER = """
import sys
from prime_memory_folding import MemoryEngine
path, name = sys.argv[1], sys.argv[2]
with MemoryEngine(path) as memory:
    for i in range(60):
        memory.store(f"{name} note {i}", domain=f"domain-{i % 7}",
                     tags=[f"shared-{i % 11}", f"{name}-{i % 5}"])
"""


def test_two_processes_agree_on_primes_and_lose_no_record(store_path: Path) -> None:
    MemoryEngine(store_path).close()
    procs = [
        subprocess.Popen([sys.executable, "-c", _WORKER, str(store_path), name])
        for name in ("left", "right")
    ]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    with MemoryEngine(store_path) as memory:
        stats = memory.stats()
        assert stats.records == 120
        for kind, table in stats.registries.items():
            assert len(set(table.values())) == len(table), kind
        assert {f"shared-{i}" for i in range(11)} <= set(stats.registries["tag"])
        for name in ("left", "right"):
            assert len(memory.match_ids(tags=[f"{name}-0"])) == 12
