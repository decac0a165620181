from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from prime_memory_folding import InvalidInput, InvalidRecordId, MemoryEngine
from prime_memory_folding.core.address import (
    concept_bucket,
    domain_prime_of,
    instance_id,
    pack,
    parse_record_id,
    record_id,
    unpack,
)

lane = st.integers(min_value=0, max_value=2**32 - 1)


@given(lane, lane, lane, lane)
def test_pack_unpack_round_trip(d: int, s: int, c: int, i: int) -> None:
    address = pack(d, s, c, i)
    assert unpack(address) == (d, s, c, i)
    assert address == d << 96 | s << 64 | c << 32 | i
    rid = record_id(address)
    assert len(rid) == 32
    assert int(parse_record_id(rid.upper()), 16) == address
    assert domain_prime_of(rid) == d


@pytest.mark.parametrize("bad", [-1, 2**32])
def test_lane_outside_32_bits_is_rejected(bad: int) -> None:
    with pytest.raises(InvalidInput):
        pack(bad, 2, 3, 4)


@pytest.mark.parametrize("bad", ["", "xyz", "0" * 31, "g" * 32, "0" * 33, 42, None])
def test_malformed_record_id_is_rejected(bad: object) -> None:
    with pytest.raises(InvalidRecordId):
        parse_record_id(bad)


def test_bucket_ignores_tag_order_and_instance_is_stable() -> None:
    assert concept_bucket("d", "s", ["a", "b"]) == concept_bucket("d", "s", ["b", "a"])
    assert concept_bucket("d", "s", ["a"]) != concept_bucket("d", "s", ["b"])
    assert instance_id("same") == instance_id("same")
    assert instance_id("same", 1) != instance_id("same")


def test_record_address_lanes_follow_its_labels(engine: MemoryEngine) -> None:
    record = engine.store(
        "we ship on fridays", domain="decision", subdomain="episodic", tags=["important", "recent"]
    )
    d, s, c, i = unpack(record.address)
    registries = engine.stats().registries
    assert d == registries["domain"]["decision"]
    assert s == registries["subdomain"]["episodic"]
    assert c == concept_bucket("decision", "episodic", ("important", "recent"))
    assert i == instance_id("we ship on fridays")
    assert record.record_id == record_id(record.address)
    assert record.tag_product == registries["tag"]["important"] * registries["tag"]["recent"]


def test_encode_matches_the_address_store_gives_and_stores_nothing(engine: MemoryEngine) -> None:
    encoded = engine.encode("project", "code", ["brand-new"], instance_key="k1")
    assert encoded.provisional
    assert engine.stats().records == 0
    assert "brand-new" not in engine.stats().registries["tag"]
    record = engine.store(
        "anything", domain="project", subdomain="code", tags=["brand-new"], instance_key="k1"
    )
    assert record.address == encoded.address
    again = engine.encode("project", "code", ["brand-new"], instance_key="k1")
    assert again == dataclasses.replace(encoded, provisional=False)


def test_instance_collision_never_overwrites(
    engine: MemoryEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    import prime_memory_folding.engine.writes as writes_module

    real = writes_module.instance_id
    monkeypatch.setattr(
        writes_module,
        "instance_id",
        lambda key, attempt=0: 7 if attempt == 0 else real(key, attempt),
    )
    first = engine.store("first content")
    second = engine.store("second content")
    assert first.record_id != second.record_id
    assert unpack(first.address)[3] == 7
    assert engine.get(first.record_id).content == "first content"
    assert engine.get(second.record_id).content == "second content"
    # Deterministic: the same history gives the same ids.
    assert unpack(second.address)[3] == real("second content", 1)
