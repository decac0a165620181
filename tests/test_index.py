from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from prime_memory_folding.core.index import IndexColumns, IndexEntry, StructuralIndex, TagQuery

#: Small primes, and large ones whose products reach 2**64 and more: a product
#: of 2**64 or more cannot sit in the index's uint64 column and is tested as a
#: Python int, both as a record's tag product and as a query's.
PRIMES = [2, 3, 5, 7, 11, 13, 2**31 - 1, 4_294_967_311, 2**61 - 1]

entry_specs = st.tuples(
    st.sampled_from(PRIMES[:3]),
    st.sets(st.sampled_from(PRIMES), max_size=3),
    st.floats(0, 1),
    st.booleans(),
)
entries = st.lists(entry_specs, max_size=30)


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
                session=i % 3,
                created_at=i / 2,
            )
        )
    return out


def _columns(entries: list[IndexEntry]) -> IndexColumns:
    """``entries`` as the whole-store columns that opening a store loads."""
    with_vector = [row for row, e in enumerate(entries) if e.vector is not None]
    vectors = [e.vector for e in entries if e.vector is not None]
    return IndexColumns(
        record_ids=[e.record_id for e in entries],
        domain_primes=[e.domain_prime for e in entries],
        subdomain_primes=[e.subdomain_prime for e in entries],
        tag_primes=[e.tag_primes for e in entries],
        tag_products=[e.tag_product for e in entries],
        importance=[e.importance for e in entries],
        strength=[e.strength for e in entries],
        updated_at=[e.updated_at for e in entries],
        reinforced_at=[e.reinforced_at for e in entries],
        half_life=[e.half_life for e in entries],
        vector_rows=with_vector,
        vectors=np.stack(vectors) if vectors else None,
        scopes=[e.scope for e in entries],
        sessions=[e.session for e in entries],
        created_at=[e.created_at for e in entries],
    )


@settings(max_examples=50, deadline=None)
@given(entries, st.sets(st.sampled_from(PRIMES), max_size=2), st.sampled_from([None, 2, 3]))
def test_loading_columns_equals_upserting_one_by_one(
    candidate_paths: int,
    specs: list[tuple[int, set[int], float, bool]],
    tags: set[int],
    domain: int | None,
) -> None:
    items = _entries(specs)
    bulk, single = StructuralIndex(), StructuralIndex()
    bulk.load(_columns(items))
    for item in items:
        single.upsert(item)
    gates = TagQuery(domain_prime=domain, all_of=tuple(sorted(tags)), min_strength=0.3)
    assert bulk.select(gates).tolist() == single.select(gates).tolist()
    assert set(bulk.record_ids(bulk.select(gates))) == {
        f"{i:032x}"
        for i, (d, t, strength, _) in enumerate(specs)
        if domain in (None, d) and tags <= t and strength >= 0.3
    }
    assert bulk.counts() == single.counts()
    query = np.array([0.6, 0.8], dtype=np.float32)
    assert np.array_equal(bulk.cosine(None, query), single.cosine(None, query))
    rows = bulk.alive_rows()
    assert np.array_equal(
        bulk.effective_strength(rows, 100.0), single.effective_strength(rows, 100.0)
    )
    assert bulk.session_codes(rows).tolist() == single.session_codes(rows).tolist()
    assert bulk.created_at(rows).tolist() == single.created_at(rows).tolist()
    assert bulk.session_codes(rows).tolist() == [e.session for e in items]


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
    candidate_paths: int,
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
    index.load(_columns(_entries([(2, {3, 5}, 1.0, False)] * 1 + [(2, {3}, 1.0, False)] * 3000)))
    gates = TagQuery(domain_prime=2, all_of=(3, 5))
    assert index.record_ids(index.select(gates)) == [f"{0:032x}"]
    index.remove(f"{0:032x}")
    assert index.select(gates).tolist() == []
    (late,) = _entries([(2, {3, 5}, 1.0, False)])
    index.upsert(IndexEntry(**{**_fields(late), "record_id": "f" * 32}))
    assert index.record_ids(index.select(gates)) == ["f" * 32]


def test_tag_products_past_64_bits_are_tested_exactly(candidate_paths: int) -> None:
    big, bigger = 4_294_967_311, 2**61 - 1  # big * big and bigger * 11 pass 2**64
    specs = [(2, {3}, 1.0, False)] * 8 + [
        (2, {3, big}, 1.0, False),
        (2, {3, 11, bigger}, 1.0, False),
        (2, {3, big, bigger}, 1.0, False),
        (2, {big, 4_294_967_291}, 1.0, False),
    ]
    index = StructuralIndex()
    index.load(_columns(_entries(specs)))
    assert sum(e.tag_product >= 2**64 for e in _entries(specs)) == 3

    def ids(**gates: tuple[int, ...]) -> set[int]:
        found = index.select_ids(TagQuery(domain_prime=2, **gates))
        assert set(index.record_ids(index.select(TagQuery(domain_prime=2, **gates)))) == set(found)
        return {int(rid, 16) for rid in found}

    assert ids(all_of=(3,)) == set(range(11))
    assert ids(all_of=(big,)) == {8, 10, 11}
    assert ids(all_of=(3, bigger)) == {9, 10}
    assert ids(all_of=(big, bigger)) == {10}  # the query's own product passes 2**64
    assert ids(any_of=(11, bigger)) == {9, 10}
    assert ids(any_of=(big, bigger)) == {8, 9, 10, 11}
    assert ids(all_of=(3,), none_of=(big,)) == set(range(8)) | {9}
    assert ids(all_of=(3,), any_of=(bigger, 7)) == {9, 10}


@settings(max_examples=50, deadline=None)
@given(st.lists(entry_specs, min_size=70, max_size=140), st.data())
def test_removing_many_at_once_equals_removing_one_by_one(
    specs: list[tuple[int, set[int], float, bool]], data: st.DataObject
) -> None:
    items = _entries(specs)
    ids = [item.record_id for item in items]
    # Enough ids to take the batched path, some of them unknown or repeated.
    gone = data.draw(st.lists(st.sampled_from([*ids, "unknown"]), min_size=64, max_size=len(ids)))
    many, single = StructuralIndex(), StructuralIndex()
    many.load(_columns(items))
    single.load(_columns(items))
    many.remove_many(gone)
    for rid in gone:
        single.remove(rid)
    assert len(many) == len(single) == len(set(ids) - set(gone))
    for domain in (None, *PRIMES[:3]):
        for tags in ((), *((p,) for p in PRIMES)):
            gates = TagQuery(domain_prime=domain, all_of=tags)
            assert many.select(gates).tolist() == single.select(gates).tolist()
    assert many.counts() == single.counts()
    query = np.array([0.6, 0.8], dtype=np.float32)
    assert np.array_equal(many.cosine(None, query), single.cosine(None, query))
    assert set(many.record_ids(many.alive_rows())) == set(ids) - set(gone)
    assert _sessions(many) == _sessions(single)


def _sessions(index: StructuralIndex) -> dict[str, tuple[int, float]]:
    """Each live record's session code and first store time, by id."""
    rows = index.alive_rows()
    pairs = zip(index.session_codes(rows).tolist(), index.created_at(rows).tolist())
    return dict(zip(index.record_ids(rows), pairs))


def test_compacting_keeps_each_record_s_session_and_first_store_time() -> None:
    items = _entries([(2, {3}, 1.0, i % 2 == 0) for i in range(3000)])
    index = StructuralIndex()
    index.load(_columns(items))
    before = index.generation
    index.remove_many([item.record_id for item in items[:2000]])
    assert index.row_of(items[2000].record_id) == 0  # compacted: the survivors renumbered
    assert index.generation > before
    assert _sessions(index) == {e.record_id: (e.session, e.created_at) for e in items[2000:]}
