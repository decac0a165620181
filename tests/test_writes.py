from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from prime_memory_folding import InvalidInput, MemoryEngine
from prime_memory_folding.core.address import concept_bucket, instance_id, pack, record_id
from prime_memory_folding.core.primes import Kind
from prime_memory_folding.engine.writes import (
    REINFORCE_RATE,
    StoreItem,
    allocate,
    as_vector,
    new_row,
    prepare,
    reinforced,
)

PRIMES = {Kind.DOMAIN: {"memory": 2}, Kind.SUBDOMAIN: {"general": 2}, Kind.TAG: {"a": 2, "b": 3}}


def item(content: str = "text", **fields: Any) -> StoreItem:
    return prepare({"content": content, **fields})


def test_prepare_normalises_labels_and_fills_defaults() -> None:
    got = item("Use WAL", domain=" Project ", tags=["B", "a", "b"])
    assert (got.domain, got.subdomain, got.tags) == ("project", "general", ("a", "b"))
    assert (got.importance, got.metadata, got.vector, got.instance_key) == (0.5, {}, None, None)


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        ({"content": "x", "colour": "red"}, "unknown field"),
        ({"domain": "memory"}, "content is missing"),
        ({"content": "x", "instance_key": " "}, "instance_key"),
        ({"content": "x", "importance": 2}, "importance"),
        ({"content": "x", "tags": ["  "]}, "empty"),
    ],
)
def test_prepare_refuses_a_bad_request(raw: dict[str, Any], says: str) -> None:
    with pytest.raises(InvalidInput, match=says):
        prepare(raw)


@pytest.mark.parametrize(
    ("vector", "says"),
    [([0.0, 0.0], "all zeros"), ([1e39], "too large"), ([math.nan], "finite"), ([], "empty")],
)
def test_a_vector_without_a_float32_direction_is_refused(vector: list[float], says: str) -> None:
    with pytest.raises(InvalidInput, match=says):
        as_vector(vector)


def test_the_dedupe_key_follows_labels_and_identity() -> None:
    base = item("same")
    assert item("same").dedupe_key == base.dedupe_key
    assert item("same", tags=["a"]).dedupe_key != base.dedupe_key
    assert item("other").dedupe_key != base.dedupe_key
    keyed = item("same", instance_key="k")
    assert keyed.dedupe_key != base.dedupe_key
    assert item("changed", instance_key="k").dedupe_key == keyed.dedupe_key


class Taken:
    """A store in which some record ids already exist."""

    def __init__(self, ids: Iterable[str]) -> None:
        self.ids = set(ids)

    def existing_ids(self, ids: Iterable[str]) -> set[str]:
        return self.ids & set(ids)


def first_address(it: StoreItem, attempt: int = 0) -> int:
    bucket = concept_bucket(it.domain, it.subdomain, it.tags)
    identity = it.instance_key if it.instance_key is not None else it.content
    return pack(2, 2, bucket, instance_id(identity, attempt))


def test_allocate_moves_past_taken_lanes_deterministically() -> None:
    one, two = item("one"), item("two")
    taken = {record_id(first_address(one)), record_id(first_address(one, 1))}
    planned = [("k1", one), ("k2", two)]
    got = allocate(Taken(taken), planned, PRIMES)  # type: ignore[arg-type]
    assert got == [first_address(one, 2), first_address(two)]
    assert allocate(Taken(taken), planned, PRIMES) == got  # type: ignore[arg-type]


def test_allocate_never_gives_two_new_records_one_address() -> None:
    one = item("same identity", instance_key="k")
    two = item("other content", instance_key="k")
    got = allocate(Taken(()), [("k1", one), ("k2", two)], PRIMES)  # type: ignore[arg-type]
    assert got == [first_address(one), first_address(two, 1)]


def test_a_new_row_starts_at_full_strength_with_its_tag_product() -> None:
    new = item("text", tags=["a", "b"], vector=[3.0, 4.0], metadata={"by": "me"})
    row = new_row(new, new.dedupe_key, first_address(new), PRIMES, now=100.0)
    rec = row.record
    assert (rec.record_id, rec.tag_product, rec.strength) == (
        record_id(first_address(new)),
        6,
        1.0,
    )
    assert (rec.created_at, rec.updated_at, rec.accessed_at, rec.access_count) == (100, 100, 100, 0)
    assert row.vector_blob == np.asarray([3.0, 4.0], dtype="<f4").tobytes()


def test_storing_again_reinforces_and_keeps_what_it_did_not_change() -> None:
    first = item("text", importance=0.8, vector=[1.0, 0.0], metadata={"a": 1, "b": 1})
    row = new_row(first, first.dedupe_key, first_address(first), PRIMES, now=100.0)
    row = replace(row, record=replace(row.record, strength=0.4))
    again = item("text", importance=0.3, metadata={"b": 2})
    got = reinforced(row, again, now=200.0).record
    assert got.strength == pytest.approx(0.4 + 0.6 * REINFORCE_RATE)
    assert (got.importance, got.metadata) == (0.8, {"a": 1, "b": 2})
    assert (got.created_at, got.updated_at, got.accessed_at, got.access_count) == (100, 200, 200, 1)
    assert got.vector is not None and list(got.vector) == [1.0, 0.0]
    assert got.record_id == row.record.record_id


@pytest.mark.parametrize(
    ("field", "item"),
    [
        ("content", {"content": "half a pair \ud800 here"}),
        ("domain", {"content": "ok", "domain": "de\udfffcision"}),
        ("tag", {"content": "ok", "tags": ["fine", "bro\ud83dken"]}),
        ("metadata", {"content": "ok", "metadata": {"note": "\udc00"}}),
        ("session", {"content": "ok", "session": "chat-\ud800"}),
        ("instance_key", {"content": "ok", "instance_key": "k\ud800"}),
    ],
)
def test_a_lone_surrogate_is_refused_by_name_and_nothing_is_stored(
    backend_engine: MemoryEngine, field: str, item: dict[str, Any]
) -> None:
    with pytest.raises(InvalidInput, match=f"{field} holds a lone surrogate"):
        backend_engine.store(**item)
    assert backend_engine.stats().records == 0
    with pytest.raises(InvalidInput, match="text holds a lone surrogate"):
        backend_engine.query("where is \ud800 it")
