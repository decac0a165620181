"""The vectors an incremental fold keeps for a store that answers queries itself:
``VectorCache.similar`` finds what a scan of the store's vectors finds, after any
writes, deletes and trimmed change logs."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from prime_memory_folding.engine.vector_cache import VectorCache
from tests.test_vector_cache import Source

steps = st.lists(
    st.tuples(
        st.integers(0, 20),  # which record
        st.one_of(st.none(), st.lists(st.integers(-3, 3), min_size=3, max_size=3)),
        st.booleans(),  # ask after this step
        st.booleans(),  # trim the change log first
    ),
    min_size=1,
    max_size=40,
)


@settings(max_examples=80, deadline=None)
@given(steps, st.lists(st.lists(st.integers(-3, 3), min_size=3, max_size=3), max_size=4))
def test_similar_equals_a_scan_of_the_store(
    written: list[tuple[int, list[int] | None, bool, bool]], asked: list[list[int]]
) -> None:
    queries = np.asarray(asked, dtype=np.float32).reshape(-1, 3)
    norms = np.linalg.norm(queries, axis=1, keepdims=True)
    queries = queries[norms[:, 0] > 0] / norms[norms[:, 0] > 0]
    threshold = 0.8
    source = Source()
    cache = VectorCache(source)
    for which, vector, ask, trim in written:
        if trim:
            source.trimmed = len(source.log)
        source.write(f"r{which}", vector and [float(v) for v in vector])
        if not ask:
            continue
        found = cache.similar(queries, threshold)
        assert len(set(found)) == len(found)
        for rid, blob in source.vectors.items():
            vector = np.frombuffer(blob, dtype="<f4").astype(np.float64)
            norm = float(np.linalg.norm(vector))
            best = max((float(q @ vector) / norm for q in queries), default=-1.0) if norm else 0.0
            if abs(best - threshold) > 1e-5:  # leave float rounding at the threshold aside
                assert (rid in found) == (best >= threshold), (rid, best)
