from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prime_memory_folding import MemoryEngine

from .backends import emptied, examples


@pytest.fixture
def engine(backend_engine: MemoryEngine) -> MemoryEngine:
    """The engine of these tests runs on each backend."""
    return backend_engine


TAGS = ["a", "b", "c", "d", "e", "f"]
DOMAINS = ["memory", "project", "task"]
#: Twelve more tags: any twelve tag primes multiply to 2**64 or more (the first
#: twelve free ones, 31 to 79, make 27 * 2**64), so a record or a gate holding
#: these has a tag product past the index's uint64 column.
WIDE = frozenset(f"w{i:02d}" for i in range(12))


def _maybe_wide(tags: st.SearchStrategy[set[str]]) -> st.SearchStrategy[set[str]]:
    return st.one_of(tags, tags.map(lambda t: t | WIDE))


records = st.lists(
    st.tuples(
        st.sampled_from(DOMAINS),
        st.sampled_from(["general", "code"]),
        _maybe_wide(st.sets(st.sampled_from(TAGS), max_size=4)),
        st.floats(0, 1),
    ),
    min_size=0,
    max_size=40,
)
tag_sets = _maybe_wide(st.sets(st.sampled_from([*TAGS, "unknown"]), max_size=3))


def _load(
    store: str, items: list[tuple[str, str, set[str], float]]
) -> tuple[MemoryEngine, dict[str, Any]]:
    memory = MemoryEngine(emptied(store))
    stored = memory.store_many(
        [
            {"content": f"record {i}", "domain": d, "subdomain": s, "tags": sorted(t)}
            for i, (d, s, t, _) in enumerate(items)
        ]
    )
    for record, (_, _, _, strength) in zip(stored, items):
        memory.update(record.record_id, strength=strength)
    truth = {r.record_id: (d, s, set(t), st_) for r, (d, s, t, st_) in zip(stored, items)}
    return memory, truth


def test_gates_equal_set_semantics(candidate_paths: int, backend_store: str) -> None:
    @examples(backend_store, sqlite=60, postgres=25)
    @given(
        records,
        tag_sets,
        tag_sets,
        tag_sets,
        st.sampled_from([None, *DOMAINS, "nowhere"]),
        st.sampled_from([None, "general", "code"]),
        st.sampled_from([0.0, 0.3, 0.9]),
    )
    def check(
        items: list[tuple[str, str, set[str], float]],
        all_of: set[str],
        any_of: set[str],
        none_of: set[str],
        domain: str | None,
        subdomain: str | None,
        min_strength: float,
    ) -> None:
        gates_equal_set_semantics(
            backend_store, items, all_of, any_of, none_of, domain, subdomain, min_strength
        )

    check()


def gates_equal_set_semantics(
    store: str,
    items: list[tuple[str, str, set[str], float]],
    all_of: set[str],
    any_of: set[str],
    none_of: set[str],
    domain: str | None,
    subdomain: str | None,
    min_strength: float,
) -> None:
    memory, truth = _load(store, items)
    with memory:
        got = memory.match_ids(
            domain=domain,
            subdomain=subdomain,
            tags=all_of,
            any_tags=any_of,
            exclude_tags=none_of,
            min_strength=min_strength,
        )
        # Lists and tuples take the memoised label path; asked twice, it must agree.
        for _ in range(2):
            assert got == memory.match_ids(
                domain=domain,
                subdomain=subdomain,
                tags=sorted(all_of),
                any_tags=tuple(sorted(any_of)),
                exclude_tags=list(none_of),
                min_strength=min_strength,
            )
        expected = {
            rid
            for rid, (d, s, tags, strength) in truth.items()
            if (domain is None or d == domain)
            and (subdomain is None or s == subdomain)
            and set(all_of) <= tags
            and (not any_of or bool(set(any_of) & tags))
            and not (set(none_of) & tags)
            and strength >= min_strength
        }
        assert len(got) == len(set(got))
        assert set(got) == expected
        hits = memory.query(
            domain=domain,
            subdomain=subdomain,
            tags=all_of,
            any_tags=any_of,
            exclude_tags=none_of,
            min_strength=min_strength,
            limit=100,
        )
        assert {h.record.record_id for h in hits} == expected


def test_domain_filter_equals_a_scan(candidate_paths: int, backend_store: str) -> None:
    @examples(backend_store, sqlite=40, postgres=15)
    @given(records, st.sampled_from(DOMAINS))
    def check(items: list[tuple[str, str, set[str], float]], domain: str) -> None:
        memory, truth = _load(backend_store, items)
        with memory:
            scanned = {rid for rid, (d, *_rest) in truth.items() if d == domain}
            assert set(memory.match_ids(domain=domain)) == scanned

    check()


def test_salience_order_is_best_first_and_limited(backend_store: str) -> None:
    @examples(backend_store, sqlite=30, postgres=15)
    @given(records, st.integers(min_value=1, max_value=15))
    def check(items: list[tuple[str, str, set[str], float]], limit: int) -> None:
        memory, _ = _load(backend_store, items)
        with memory:
            hits = memory.query(limit=limit)
            assert len(hits) == min(limit, len(items))
            scores = [h.score for h in hits]
            assert scores == sorted(scores, reverse=True)
            everything = memory.query(limit=100)
            if hits:
                assert min(scores) >= max([h.score for h in everything[len(hits) :]], default=0.0)
                assert [h.record.record_id for h in everything[: len(hits)]] == [
                    h.record.record_id for h in hits
                ]

    check()


FEW = ["a", "b", "c"]
few_tags = _maybe_wide(st.sets(st.sampled_from(FEW), max_size=2))


def test_tag_gates_on_products_past_64_bits_equal_set_semantics(
    candidate_paths: int, backend_store: str
) -> None:
    @examples(backend_store, sqlite=50, postgres=20)
    @given(
        st.lists(few_tags, min_size=1, max_size=30),
        few_tags,
        few_tags,
        st.sets(st.sampled_from([*FEW, min(WIDE)]), max_size=1),
        st.sampled_from([0.0, 0.5]),
    )
    def check(
        tag_lists: list[set[str]],
        all_of: set[str],
        any_of: set[str],
        none_of: set[str],
        min_strength: float,
    ) -> None:
        tag_gates_past_64_bits(backend_store, tag_lists, all_of, any_of, none_of, min_strength)

    check()


def tag_gates_past_64_bits(
    store: str,
    tag_lists: list[set[str]],
    all_of: set[str],
    any_of: set[str],
    none_of: set[str],
    min_strength: float,
) -> None:
    # Few tags and no other gate: candidate sets are large, so a lowered
    # threshold sends them down the numpy path, products past 2**64 and all.
    with MemoryEngine(emptied(store)) as memory:
        stored = memory.store_many(
            [{"content": f"record {i}", "tags": sorted(t)} for i, t in enumerate(tag_lists)]
        )
        for i, record in enumerate(stored[::2]):
            memory.update(record.record_id, strength=0.25 + i % 2 * 0.5)
        strengths = {r.record_id: memory.get(r.record_id).strength for r in stored}
        truth = dict(zip((r.record_id for r in stored), tag_lists))
        assert {r.record_id for r in stored if r.tag_product >= 2**64} == {
            rid for rid, tags in truth.items() if tags >= WIDE
        }
        got = memory.match_ids(
            tags=all_of, any_tags=any_of, exclude_tags=none_of, min_strength=min_strength
        )
        expected = {
            rid
            for rid, tags in truth.items()
            if all_of <= tags
            and (not any_of or bool(any_of & tags))
            and not none_of & tags
            and strengths[rid] >= min_strength
        }
        assert len(got) == len(set(got)) and set(got) == expected
        assert set(memory.match_ids(tags=all_of)) == {
            rid for rid, tags in truth.items() if all_of <= tags
        }
        hits = memory.query(
            tags=all_of, any_tags=any_of, exclude_tags=none_of, min_strength=min_strength, limit=100
        )
        assert {h.record.record_id for h in hits} == expected


def test_tag_gate_divisibility_has_no_false_positives(engine: MemoryEngine) -> None:
    # 2 * 3 = 6 would divide a product of 6, but a record tagged only "important"
    # (prime 2) and "recent" (prime 3) must match while "source" (5) must not.
    both = engine.store("both", tags=["important", "recent"])
    engine.store("one", tags=["important", "source"])
    assert engine.match_ids(tags=["recent", "important"]) == [both.record_id]


def test_unknown_tag_matches_nothing(engine: MemoryEngine) -> None:
    engine.store("x", tags=["a"])
    assert engine.query(tags=["a", "never-used"]) == []
    assert engine.query(any_tags=["never-used"]) == []
    assert len(engine.query(exclude_tags=["never-used"])) == 1


@pytest.mark.parametrize("with_vector", [True, False])
def test_gates_combine_with_ranking(engine: MemoryEngine, with_vector: bool) -> None:
    keep = engine.store("keep", domain="project", tags=["a"], vector=[1.0, 0.0])
    engine.store("wrong domain", domain="task", tags=["a"], vector=[1.0, 0.0])
    engine.store("excluded", domain="project", tags=["a", "b"], vector=[1.0, 0.0])
    hits = engine.query(
        domain="project", tags=["a"], exclude_tags=["b"], vector=[1.0, 0.0] if with_vector else None
    )
    assert [h.record.record_id for h in hits] == [keep.record_id]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from([0.1, 0.5, 0.9]), st.sampled_from([1.0, 2.0, 3.0])),
        min_size=1,
        max_size=200,
    ),
    st.integers(min_value=1, max_value=30),
)
def test_best_positions_equals_a_full_sort(pairs: list[tuple[float, float]], k: int) -> None:
    import numpy as np

    from prime_memory_folding.recall.query import best_positions

    primary = np.array([p for p, _ in pairs])
    secondary = np.array([s for _, s in pairs])
    expected = sorted(range(len(pairs)), key=lambda i: (-primary[i], -secondary[i], i))[:k]
    assert best_positions(primary, secondary, k).tolist() == expected
