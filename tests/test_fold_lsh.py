"""The fold's candidate search where words are widely shared: sizes, MinHash bands, signs."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from prime_memory_folding.fold import links, lsh
from prime_memory_folding.fold.links import jaccard, linked_pairs, word_set

DIM = 16


def unit_rows(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float64)
    return (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)


def both_searches(
    contents: list[str], vectors: np.ndarray, domains: list[str] | None = None, **labels: Any
) -> tuple[set[int], set[int]]:
    """Pair codes of the candidate search and of the exhaustive screen."""
    n = len(contents)
    domains = domains or ["d"] * n
    subdomains = labels.get("subdomains", ["s"] * n)
    tags = labels.get("tags", [()] * n)
    args = (domains, subdomains, tags, vectors, np.ones(n, dtype=bool), 0.85)
    found = linked_pairs(*args, contents=contents, word_overlap=0.5)
    exhaustive = linked_pairs(*args, contents=contents, word_overlap=0.5, exhaustive=True)
    return set(found.tolist()), set(exhaustive.tolist())


def small_vocabulary_store(
    count: int, seed: int, pair_share: float, domains: int = 1
) -> tuple[list[str], np.ndarray, list[str]]:
    """Notes over 60 words, each held by many records; some in near-duplicate pairs."""
    rng = np.random.default_rng(seed)
    contents: list[str] = []
    vectors: list[np.ndarray] = []
    groups: list[str] = []
    unit = 0
    while len(contents) < count:
        words = [f"w{i}" for i in rng.choice(60, size=int(rng.integers(6, 10)), replace=False)]
        centre = rng.normal(size=DIM)
        contents.append(" ".join(words))
        vectors.append(centre)
        groups.append(f"d{unit % domains}")
        if rng.random() < pair_share:
            twin = list(words)
            twin[int(rng.integers(len(twin)))] = f"w{int(rng.integers(60))}"
            contents.append(" ".join(twin))
            vectors.append(centre + rng.normal(size=DIM) * 0.05)
            groups.append(f"d{unit % domains}")
        unit += 1
    return contents, unit_rows(np.array(vectors)), groups


@pytest.fixture
def buckets_from_the_start(monkeypatch: pytest.MonkeyPatch) -> None:
    """Small stores take the bucketed path, as a large residue does."""
    monkeypatch.setattr(lsh, "EXACT_RESIDUE", 8)
    monkeypatch.setattr(links, "EXACT_RESIDUE", 8)


@pytest.mark.usefixtures("buckets_from_the_start")
def test_labels_of_a_common_word_and_a_number_of_their_own_never_link_and_drop_out() -> None:
    rng = np.random.default_rng(1)
    centres = rng.normal(size=(200, DIM))
    # Half the records are near-duplicate vectors of another; texts share only "item".
    vectors = unit_rows(np.repeat(centres, 2, axis=0) + rng.normal(size=(400, DIM)) * 0.01)
    contents = [f"item {i}" for i in range(400)]
    found, exhaustive = both_searches(contents, vectors)
    assert found == exhaustive == set()
    group_of = np.zeros(400, dtype=np.int64)
    met, screened = lsh.residue_candidates(
        group_of, contents, np.ones(400, dtype=bool), 0.5, vectors, 0.85
    )
    assert len(met) == 0 and not screened.any()


@pytest.mark.usefixtures("buckets_from_the_start")
@pytest.mark.parametrize(("domains", "pair_share"), [(3, 0.0), (1, 0.3)])
def test_the_buckets_find_the_links_of_a_small_vocabulary_store(
    domains: int, pair_share: float
) -> None:
    contents, vectors, groups = small_vocabulary_store(600, 3, pair_share, domains)
    found, exhaustive = both_searches(contents, vectors, groups)
    assert found <= exhaustive
    assert len(found) >= 0.98 * len(exhaustive)
    if pair_share:
        assert exhaustive


@pytest.mark.usefixtures("buckets_from_the_start")
def test_a_crowded_group_goes_to_the_buckets_as_a_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    contents, vectors, groups = small_vocabulary_store(300, 5, 0.3)
    seen: list[int] = []
    real = lsh.residue_candidates

    def spy(group_of: Any, contents: Any, residue: Any, *rest: Any) -> Any:
        seen.append(int(residue.sum()))
        return real(group_of, contents, residue, *rest)

    monkeypatch.setattr(links, "residue_candidates", spy)
    monkeypatch.setattr(links, "JOIN_PAIRS_PER_ROW", 0)
    found, exhaustive = both_searches(contents, vectors, groups)
    assert seen == [len(contents)]
    assert found <= exhaustive and len(found) >= 0.98 * len(exhaustive)


def test_band_recall_at_the_default_word_overlap_is_at_least_098() -> None:
    assert lsh.band_recall(0.5) >= 0.98
    assert lsh.band_recall(0.6) > lsh.band_recall(0.5) > lsh.band_recall(0.05)


@pytest.mark.parametrize("threshold", [0.5, 0.85, 0.95])
def test_vectors_at_the_threshold_rarely_differ_in_more_signs_than_the_limit(
    threshold: float,
) -> None:
    rng = np.random.default_rng(11)
    x = unit_rows(rng.normal(size=(2_000, 64)))
    # y at exactly the threshold's cosine from x.
    noise = rng.normal(size=x.shape)
    noise -= np.einsum("ij,ij->i", noise, x)[:, None] * x
    noise /= np.linalg.norm(noise, axis=1, keepdims=True)
    y = threshold * x + np.sqrt(1 - threshold**2) * noise
    both = np.concatenate([x, y]).astype(np.float32)
    signs = lsh._signs(both, np.arange(len(both)))
    differ = lsh._popcount(signs[:2_000] ^ signs[2_000:]).sum(axis=1)
    assert (differ <= lsh.sign_limit(threshold)).all()


_words = st.lists(st.integers(0, 11), min_size=0, max_size=7)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    texts=st.lists(_words, min_size=2, max_size=40),
    groups=st.lists(st.integers(0, 1), min_size=40, max_size=40),
)
def test_the_size_rule_keeps_every_record_that_overlaps_enough_with_another(
    texts: list[list[int]], groups: list[int]
) -> None:
    contents = [" ".join(f"v{w}" for w in words) for words in texts]
    group_of = np.asarray(groups[: len(contents)], dtype=np.int64)
    local, numbers, _, sizes = lsh._word_hashes(contents)
    kept = lsh._may_overlap(group_of, local, numbers, sizes, 0.5)
    sets = [word_set(c) for c in contents]
    for a, b in itertools.combinations(range(len(contents)), 2):
        if group_of[a] == group_of[b] and jaccard(sets[a], sets[b]) >= 0.5:
            assert kept[a] and kept[b]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    bases=st.lists(st.lists(st.integers(0, 40), min_size=3, max_size=9), min_size=1, max_size=6),
    copies=st.lists(st.integers(1, 5), min_size=6, max_size=6),
    seed=st.integers(0, 2**16),
)
def test_the_buckets_find_every_pair_well_above_both_thresholds(
    bases: list[list[int]], copies: list[int], seed: int
) -> None:
    """Near-duplicates overlapping by 0.7 or more with cosines of 0.95 or more share a band
    but with odds below one in ten million; the buckets then find them in any residue."""
    rng = np.random.default_rng(seed)
    contents: list[str] = []
    vectors: list[np.ndarray] = []
    for base, count in zip(bases, copies):
        centre = rng.normal(size=DIM)
        centre /= np.linalg.norm(centre)
        for _ in range(count):
            words = list(dict.fromkeys(base))
            if len(words) > 4 and rng.random() < 0.5:
                words[int(rng.integers(len(words)))] = f"{int(rng.integers(99))}"
            contents.append(" ".join(f"v{w}" for w in words))
            vectors.append(centre + rng.normal(size=DIM) * 0.02)
    unit = unit_rows(np.array(vectors))
    n = len(contents)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(lsh, "EXACT_RESIDUE", 0)  # every residue is bucketed, however small
        met, screened = lsh.residue_candidates(
            np.zeros(n, dtype=np.int64), contents, np.ones(n, dtype=bool), 0.5, unit, 0.85
        )
    assert not screened.any()
    found = set(met.tolist())
    sets = [word_set(c) for c in contents]
    for a, b in itertools.combinations(range(n), 2):
        if jaccard(sets[a], sets[b]) >= 0.7 and float(unit[a] @ unit[b]) >= 0.95:
            assert a * n + b in found


@pytest.mark.usefixtures("buckets_from_the_start")
def test_the_buckets_depend_on_the_records_not_their_order() -> None:
    contents, vectors, groups = small_vocabulary_store(300, 9, 0.3, domains=2)
    n = len(contents)
    order = np.random.default_rng(2).permutation(n)
    first, _ = both_searches(contents, vectors, groups)
    moved, _ = both_searches(
        [contents[i] for i in order], vectors[order], [groups[i] for i in order]
    )
    back = {min(order[c // n], order[c % n]) * n + max(order[c // n], order[c % n]) for c in moved}
    assert back == first


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    texts=st.lists(st.lists(st.integers(0, 14), min_size=1, max_size=9), min_size=2, max_size=30),
    at=st.integers(0, 29),
    overlap=st.sampled_from([0.3, 0.5, 0.8]),
)
def test_a_look_up_of_widely_shared_words_asks_more_and_still_leads_to_every_partner(
    texts: list[list[int]], at: int, overlap: float
) -> None:
    sets = [word_set(" ".join(f"v{w}" for w in words)) for words in texts]
    x = sets[at % len(sets)]

    def posting(word: str) -> np.ndarray | None:
        return np.array([i for i, s in enumerate(sets) if word in s], dtype=np.int64)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(links, "PROBE_ROWS", 0)  # every list counts as long
        probe = links.probe_rows(x, overlap, posting)
    slack = len(x) - int(links.overlap_floor(overlap, np.array([len(x)]))[0])
    if probe is None:
        assert len(x) - slack < 1
        return
    lead, need = probe
    # Every word is listed here, so every one is asked for, and the count rises with them.
    assert len(lead) == len(x) and need == len(x) - slack
    found, times = np.unique(np.concatenate(lead), return_counts=True)
    reached = set(found[times >= need].tolist())
    for i, other in enumerate(sets):
        if jaccard(x, other) >= overlap:
            assert i in reached


def test_a_crowded_bucket_is_split_by_the_vectors_and_keeps_its_near_duplicates() -> None:
    rng = np.random.default_rng(4)
    dim = 64
    centres = rng.normal(size=(300, dim))
    # 300 pairs of near-duplicate vectors; every text the same words, so that
    # every band puts all 600 records in one bucket.
    vectors = unit_rows(np.repeat(centres, 2, axis=0) + rng.normal(size=(600, dim)) * 0.02)
    contents = ["alpha beta gamma delta epsilon"] * 600
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(lsh, "EXACT_RESIDUE", 0)
        met, _ = lsh.residue_candidates(
            np.zeros(600, dtype=np.int64), contents, np.ones(600, dtype=bool), 0.5, vectors, 0.85
        )
    found = set(met.tolist())
    twins = {2 * k * 600 + 2 * k + 1 for k in range(300)}
    assert twins <= found
    # Far fewer candidates than pairs: the splits and the signs did the work.
    assert len(found) < 600 * 599 // 2 // 20
