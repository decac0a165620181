from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from prime_memory_folding.index import IndexEntry, StructuralIndex, TagQuery

PRIMES = [2, 3, 5, 7, 11, 13]

entries = st.lists(
    st.tuples(
        st.sampled_from(PRIMES[:3]),
        st.sets(st.sampled_from(PRIMES), max_size=3),
        st.floats(0, 1),
        st.booleans(),
    ),
    max_size=30,
)


def _entries(specs: list[tuple[int, set[int], float, bool]]) -> list[IndexEntry]:
    out = []
    for i, (domain, tags, strength, has_vector) in enumerate(specs):
        product = 1
        for p in tags:
            product *= p
        out.append(
            IndexEntry(
                record_id=f"{i:032x}",
                domain_prime=domain,
                subdomain_prime=2,
                tag_primes=tuple(sorted(tags)),
                tag_product=product,
                importance=0.5,
                strength=strength,
                updated_at=float(i),
                vector=np.array([1.0, float(i)], dtype=np.float32) if has_vector else None,
            )
        )
    return out


@settings(max_examples=50, deadline=None)
@given(entries, st.sets(st.sampled_from(PRIMES), max_size=2), st.sampled_from([None, 2, 3]))
def test_bulk_rebuild_equals_upserting_one_by_one(
    specs: list[tuple[int, set[int], float, bool]], tags: set[int], domain: int | None
) -> None:
    items = _entries(specs)
    bulk, single = StructuralIndex(), StructuralIndex()
    bulk.rebuild(items)
    for item in items:
        single.upsert(item)
    gates = TagQuery(domain_prime=domain, all_of=tuple(sorted(tags)), min_strength=0.3)
    assert bulk.select(gates).tolist() == single.select(gates).tolist()
    assert bulk.counts() == single.counts()
    query = np.array([0.6, 0.8], dtype=np.float32)
    assert np.array_equal(bulk.cosine(None, query), single.cosine(None, query))
    rows = bulk.alive_rows()
    assert np.array_equal(
        bulk.effective_strength(rows, 100.0), single.effective_strength(rows, 100.0)
    )


operations = st.lists(
    st.tuples(
        st.sampled_from(["upsert", "remove", "query"]),
        st.integers(min_value=0, max_value=40),
        st.sampled_from(PRIMES[:3]),
        st.sets(st.sampled_from(PRIMES), max_size=3),
    ),
    max_size=80,
)


@settings(max_examples=60, deadline=None)
@given(
    operations,
    st.sets(st.sampled_from(PRIMES), min_size=1, max_size=2),
    st.sets(st.sampled_from(PRIMES), max_size=2),
    st.sets(st.sampled_from(PRIMES), max_size=2),
)
def test_posting_lists_stay_exact_through_updates(
    ops: list[tuple[str, int, int, set[int]]],
    wanted: set[int],
    any_of: set[int],
    none_of: set[int],
) -> None:
    index = StructuralIndex()
    truth: dict[str, tuple[int, set[int]]] = {}
    for op, number, domain, tags in ops:
        rid = f"{number:032x}"
        if op == "upsert":
            (entry,) = _entries([(domain, tags, 1.0, False)])
            index.upsert(IndexEntry(**{**_fields(entry), "record_id": rid}))
            truth[rid] = (domain, tags)
        elif op == "remove":
            index.remove(rid)
            truth.pop(rid, None)
        gates = TagQuery(domain_prime=domain, all_of=tuple(sorted(wanted)))
        got = set(index.record_ids(index.select(gates)))
        assert got == {r for r, (d, t) in truth.items() if d == domain and wanted <= t}
        gates = TagQuery(all_of=tuple(sorted(wanted)), none_of=tuple(sorted(none_of)))
        assert set(index.select_ids(gates)) == {
            r for r, (_, t) in truth.items() if wanted <= t and not t & none_of
        }
        gates = TagQuery(any_of=tuple(sorted(any_of)), none_of=tuple(sorted(none_of)))
        assert set(index.select_ids(gates)) == {
            r for r, (_, t) in truth.items() if (t & any_of or not any_of) and not t & none_of
        }


def _fields(entry: IndexEntry) -> dict[str, object]:
    return {name: getattr(entry, name) for name in entry.__slots__}  # type: ignore[attr-defined]


def test_a_large_posting_follows_writes() -> None:
    index = StructuralIndex()
    index.rebuild(_entries([(2, {3, 5}, 1.0, False)] * 1 + [(2, {3}, 1.0, False)] * 3000))
    gates = TagQuery(domain_prime=2, all_of=(3, 5))
    assert index.record_ids(index.select(gates)) == [f"{0:032x}"]
    index.remove(f"{0:032x}")
    assert index.select(gates).tolist() == []
    (late,) = _entries([(2, {3, 5}, 1.0, False)])
    index.upsert(IndexEntry(**{**_fields(late), "record_id": "f" * 32}))
    assert index.record_ids(index.select(gates)) == ["f" * 32]
