"""The vector cache answers as a scan of the store's vectors would, after any
writes, deletes, changes of length and trimmed change logs."""

from __future__ import annotations

import json
from collections.abc import Iterator

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from prime_memory_folding.core.index import TagQuery
from prime_memory_folding.engine.vector_cache import VectorCache
from prime_memory_folding.storage.base import GatedRead, IndexTable


def rid(which: int) -> str:
    """A record id of the address's form, in one of three domains (primes 2, 3 and 5)."""
    return f"{(2, 3, 5)[which % 3]:08x}{which:024x}"


class Source:
    """A store's vectors, their records' labels and its change log, in memory."""

    def __init__(self) -> None:
        self.vectors: dict[str, bytes] = {}
        self.labels: dict[str, tuple[str, tuple[str, ...]]] = {}  # subdomain, tags
        self.log: list[str] = []
        self.trimmed = 0  # log entries dropped from the front

    def write(
        self, rid: str, vector: list[float] | None, subdomain: str = "s", tags: tuple[str, ...] = ()
    ) -> None:
        if vector is None:
            self.vectors.pop(rid, None)
        else:
            self.vectors[rid] = np.asarray(vector, dtype="<f4").tobytes()
            self.labels[rid] = (subdomain, tags)
        self.log.append(rid)

    def labelled_vector_batches(self) -> Iterator[list[tuple[str, bytes, str, str]]]:
        items = [
            (rid, blob, self.labels[rid][0], json.dumps(list(self.labels[rid][1])))
            for rid, blob in sorted(self.vectors.items())
        ]
        for start in range(0, len(items), 3):
            yield items[start : start + 3]

    def gated(self, gates: TagQuery, read: GatedRead) -> IndexTable:
        ids = [rid for rid in read.ids or () if rid in self.vectors]
        blobs: list[bytes | None] = [self.vectors[rid] for rid in ids]
        return IndexTable(
            record_ids=ids, domains=[], subdomains=[self.labels[rid][0] for rid in ids],
            tags=[self.labels[rid][1] for rid in ids], tag_products=[],
            importance=[], strength=[], updated_at=[], vector_blobs=blobs, created_at=[],
            accessed_at=[], access_count=[], strength_at=[], tiers=[], scopes=[], sessions=[],
        )  # fmt: skip

    def newest_change(self) -> int:
        return len(self.log)

    def changes_since(self, seq: int) -> tuple[list[str], int, bool]:
        # Entries before ``trimmed`` are gone: a reader that far behind sees a gap.
        return self.log[max(seq, self.trimmed) :], len(self.log), seq < self.trimmed


def cosine(source: Source, rid: str, unit: np.ndarray) -> float:
    vector = np.frombuffer(source.vectors[rid], dtype="<f4")
    norm = float(np.linalg.norm(vector))
    return round(float(vector @ unit) / norm if norm else 0.0, 5)


def brute(source: Source, unit: np.ndarray, keep: int, allowed: set[str]) -> list[float]:
    """The best ``keep`` cosines of the allowed records of ``unit``'s length."""
    scores = [
        cosine(source, rid, unit)
        for rid, blob in source.vectors.items()
        if len(blob) == 4 * len(unit) and rid in allowed
    ]
    return sorted(scores, reverse=True)[:keep]


steps = st.lists(
    st.tuples(
        st.integers(0, 30),  # which record
        st.one_of(st.none(), st.lists(st.integers(-4, 4), min_size=3, max_size=3)),
        st.booleans(),  # ask a query after this step
        st.booleans(),  # trim the change log first
    ),
    min_size=1,
    max_size=60,
)


@settings(max_examples=60, deadline=None)
@given(steps, st.integers(1, 5), st.sets(st.integers(0, 30)))
def test_nearest_equals_a_scan_of_the_store(
    written: list[tuple[int, list[int] | None, bool, bool]], keep: int, barred: set[int]
) -> None:
    source = Source()
    cache = VectorCache(source)
    allowed = {rid(i) for i in range(31)} - {rid(i) for i in barred}
    unit = np.asarray([0.6, 0.8, 0.0], dtype=np.float32)
    for which, vector, ask, trim in written:
        if trim:
            source.trimmed = len(source.log)
        source.write(rid(which), vector and [float(v) for v in vector])
        if ask:
            found = cache.nearest(unit, keep, lambda ids: {r for r in ids if r in allowed})
            assert len(set(found)) == len(found) and set(found) <= allowed
            # Equally near records may come in either order: their cosines agree.
            assert [cosine(source, rid, unit) for rid in found] == brute(
                source, unit, keep, allowed
            )
    cache.nearest(unit, keep, lambda ids: set(ids))  # caught up: no row of a record gone
    assert len(cache) == sum(len(blob) == 12 for blob in source.vectors.values())


def test_vectors_of_another_length_are_left_out() -> None:
    source = Source()
    source.write("a", [1.0, 0.0, 0.0])
    source.write("b", [1.0, 0.0])
    cache = VectorCache(source)
    unit = np.asarray([1.0, 0.0, 0.0], dtype=np.float32)
    assert cache.nearest(unit, 5, lambda ids: set()) == []
    assert cache.nearest(unit, 5, lambda ids: set(ids)) == ["a"]
    assert cache.nearest(np.asarray([1.0, 0.0], dtype=np.float32), 5, lambda ids: set(ids)) == ["b"]
    assert cache.nbytes > 0
