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
