"""What a pack line may hold: times a calendar can show, vectors float32 can keep."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from prime_memory_folding import InvalidInput, MemoryEngine
from prime_memory_folding.transfer.packs import (
    PortableRecord,
    Source,
    parse_timestamp,
    portable_record,
    read_pack,
    write_source,
)


@pytest.mark.parametrize("value", [-1e20, 1e20, 2.6e11, -6.3e10, "0001-01-01T00:00:00+05:00"])
def test_times_outside_the_calendar_are_refused(value: object) -> None:
    with pytest.raises(InvalidInput, match="out of range"):
        parse_timestamp(value, "created_at")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (0, 0.0),
        ("0001-01-01T00:00:00Z", -62135596800.0),
        ("9999-12-31T23:59:59Z", 253402300799.0),
    ],
)
def test_times_at_the_ends_of_the_calendar_are_kept(value: object, expected: float) -> None:
    assert parse_timestamp(value) == expected


@pytest.mark.parametrize(
    ("vector", "fragment"),
    [
        ([0, 0, 0], "all zeros"),
        ([1e-50, 0, 0], "all zeros"),
        ([1e39, 1, 1], "too large for float32"),
        ([-3.5e38, 1, 1], "too large for float32"),
        ([float("inf"), 1, 1], "finite"),
    ],
)
def test_a_vector_that_float32_cannot_keep_is_refused(vector: list[float], fragment: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(InvalidInput, match=fragment):
            portable_record({"content": "x", "vector": vector}, 3)


def test_a_vector_at_the_float32_limit_is_kept() -> None:
    rec = portable_record({"content": "x", "vector": [3.4e38, -1e-30, 0]})
    assert rec.vector == (3.4e38, -1e-30, 0.0)


def test_bad_vectors_are_bad_lines_with_their_numbers(tmp_path: Path, engine: MemoryEngine) -> None:
    path = tmp_path / "p.jsonl"
    path.write_text(
        '{"format": "prime-memory-pack", "version": 1}\n'
        '{"content": "zeros", "vector": [0, 0]}\n'
        '{"content": "good", "vector": [1, 0]}\n'
        '{"content": "huge", "vector": [1e39, 0]}\n'
    )
    source = read_pack(path)
    assert [(bad.line, "vector" in bad.message) for bad in source.bad] == [(2, True), (4, True)]
    report = write_source(engine, source, skip_bad=True)
    assert (report.added, len(report.skipped)) == (1, 2)


def test_a_record_built_by_hand_with_a_bad_vector_is_refused_by_line(
    engine: MemoryEngine,
) -> None:
    source = Source("hand", [PortableRecord("x", vector=(1e39, 0.0), line=7)])
    with pytest.raises(InvalidInput, match=r"hand:7: .*too large for float32"):
        write_source(engine, source)
    assert engine.stats().records == 0
