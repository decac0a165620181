"""The vectors an incremental fold keeps for a store that answers queries itself:
``VectorCache.similar`` finds what a scan of the store's vectors finds, after any
writes, deletes and trimmed change logs."""

from __future__ import annotations

from unittest import mock

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from prime_memory_folding.core.index import rows_reaching
from prime_memory_folding.engine import vector_cache
from prime_memory_folding.engine.vector_cache import VectorCache, tag_bits
from tests.test_vector_cache import Source, rid

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
@given(
    steps,
    st.lists(st.lists(st.integers(-3, 3), min_size=3, max_size=3), max_size=4),
    st.one_of(st.none(), st.lists(st.sampled_from([2, 3, 5, 7]), min_size=4, max_size=4)),
)
def test_similar_equals_a_scan_of_the_store(
    written: list[tuple[int, list[int] | None, bool, bool]],
    asked: list[list[int]],
    domains: list[int] | None,
) -> None:
    """Every record whose vector reaches the threshold with a query, and with each
    query's domain given, only those of that domain (the first 8 hex digits of an id)."""
    queries = np.asarray(asked, dtype=np.float32).reshape(-1, 3)
    norms = np.linalg.norm(queries, axis=1, keepdims=True)
    kept = norms[:, 0] > 0
    queries = queries[kept] / norms[kept]
    of = None if domains is None else [d for d, keep in zip(domains, kept) if keep]
    threshold = 0.8
    source = Source()
    cache = VectorCache(source)
    for which, vector, ask, trim in written:
        if trim:
            source.trimmed = len(source.log)
        source.write(rid(which), vector and [float(v) for v in vector])
        if not ask:
            continue
        found = cache.similar(queries, threshold, of)
        assert len(set(found)) == len(found)
        for held, blob in source.vectors.items():
            vector = np.frombuffer(blob, dtype="<f4").astype(np.float64)
            norm = float(np.linalg.norm(vector))
            mine = [q for n, q in enumerate(queries) if of is None or of[n] == int(held[:8], 16)]
            best = max((float(q @ vector) / norm for q in mine), default=-1.0) if norm else 0.0
            if abs(best - threshold) > 1e-5:  # leave float rounding at the threshold aside
                assert (held in found) == (best >= threshold), (held, best)


LABELS = st.tuples(
    st.sampled_from(["ops", "api", "ui"]),  # subdomain
    st.lists(st.sampled_from(["t1", "t2", "t3", "t4", "t5"]), max_size=2, unique=True).map(tuple),
)


@settings(max_examples=80, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 20),  # which record
            st.one_of(st.none(), st.lists(st.integers(-3, 3), min_size=3, max_size=3)),
            LABELS,
            st.booleans(),  # ask after this step
        ),
        min_size=1,
        max_size=30,
    ),
    st.lists(
        st.tuples(st.lists(st.integers(-3, 3), min_size=3, max_size=3), LABELS),
        max_size=4,
    ),
    st.sampled_from([0, vector_cache.LABEL_PAIRS]),
)
def test_similar_with_labels_finds_those_sharing_a_subdomain_or_a_tag(
    written: list[tuple[int, list[int] | None, tuple[str, tuple[str, ...]], bool]],
    asked: list[tuple[list[int], tuple[str, tuple[str, ...]]]],
    label_pairs: int,
) -> None:
    """With each query's labels, every record of its domain that shares its subdomain
    or a tag and reaches the threshold is found; none outside its domain or short of
    the threshold; and, compared label by label (``LABEL_PAIRS`` 0), none that shares
    neither its subdomain nor a bit of its tag mask."""
    vectors = np.asarray([q for q, _ in asked], dtype=np.float32).reshape(-1, 3)
    norms = np.linalg.norm(vectors, axis=1)
    kept = [n for n in range(len(asked)) if norms[n] > 0]
    queries = vectors[kept] / norms[kept][:, None]
    labels = [asked[n][1] for n in kept]
    domains = [(2, 3, 5)[n % 3] for n in kept]
    threshold = 0.8
    source = Source()
    cache = VectorCache(source)
    with mock.patch.object(vector_cache, "LABEL_PAIRS", label_pairs):
        for which, vector, (subdomain, tags), ask in written:
            source.write(rid(which), vector and [float(v) for v in vector], subdomain, tags)
            if not ask:
                continue
            found = cache.similar(queries, threshold, domains, labels)
            assert len(set(found)) == len(found)
            for held, blob in source.vectors.items():
                vector_of = np.frombuffer(blob, dtype="<f4").astype(np.float64)
                norm = float(np.linalg.norm(vector_of))
                sub, tags_of = source.labels[held]
                must = may = -1.0  # the best cosine of the queries that must / may find it
                for n, query in enumerate(queries):
                    if domains[n] != int(held[:8], 16) or not norm:
                        continue
                    score = float(query @ vector_of) / norm
                    q_sub, q_tags = labels[n]
                    if q_sub == sub or set(q_tags) & set(tags_of):
                        must = max(must, score)
                    if (
                        label_pairs
                        or q_sub == sub
                        or set(tag_bits(q_tags)) & set(tag_bits(tags_of))
                    ):
                        may = max(may, score)
                if abs(must - threshold) > 1e-5 and must >= threshold:
                    assert held in found, (held, must)
                if abs(may - threshold) > 1e-5 and may < threshold:
                    assert held not in found, (held, may)


@settings(max_examples=80, deadline=None)
@given(
    st.integers(1, 40),
    st.lists(st.integers(0, 39), max_size=40),
    st.integers(1, 12),
    st.booleans(),
)
def test_rows_reaching_equals_a_scan_of_those_rows(
    n: int, picked: list[int], queries: int, consecutive: bool
) -> None:
    """The rows whose vector reaches the threshold with one of the queries, whether the
    rows run on (a slice of the matrix) or not, with few queries or many."""
    rng = np.random.default_rng(n * 100 + queries)
    vectors = rng.normal(size=(n, 4)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    asked = rng.normal(size=(queries, 4)).astype(np.float32)
    asked /= np.linalg.norm(asked, axis=1, keepdims=True)
    rows = np.arange(n // 3, n) if consecutive else np.unique([p % n for p in picked])
    rows = rows.astype(np.int64)
    found = rows_reaching(vectors, rows, asked, 0.5)
    best = (asked.astype(np.float64) @ vectors.astype(np.float64).T).max(axis=0)
    for row in rows.tolist():
        if abs(best[row] - 0.5) > 1e-5:  # leave float rounding at the threshold aside
            assert (row in found.tolist()) == (best[row] >= 0.5), row
    assert set(found.tolist()) <= set(rows.tolist())
