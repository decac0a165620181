"""Context in a hybrid text query's ranking: a memory's same-session neighbours
lend it a share of their score, and the neighbours of the best candidates join
the candidates even when they match nothing themselves."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from prime_memory_folding import MemoryEngine, context, feedback, recall
from tests.conftest import FakeClock
from tests.test_recall import WORDS, WordEmbedder

MATCH = "We picked an apple at the zebulon orchard today."
REPLY = "Loved it, will go again."  # no word of the query, nor of the embedder's
QUERY = "apple orchard"
#: Older memories of another session, more than the cosine side takes for a
#: limit of 4 (three times that): their cosine with the query is 0, as the
#: reply's is, and ties go to the older rows, so the reply is no candidate
#: by cosine.
FILLER = [f"a river note {n}" for n in range(16)]


def by_content(memory: MemoryEngine, limit: int = 2) -> dict[str, dict[str, float]]:
    return {h.record.content: h.score_parts for h in memory.query(text=QUERY, limit=limit)}


def filled(memory: MemoryEngine, clock: FakeClock) -> None:
    memory.store_many(FILLER)
    clock.advance(2 * context.SESSION_GAP_S)


def test_a_memory_that_matches_nothing_ranks_on_the_hit_before_it(
    backend_store: str, clock: FakeClock
) -> None:
    with MemoryEngine(backend_store, clock=clock, embedder=WordEmbedder()) as memory:
        filled(memory, clock)
        memory.store_many([MATCH, REPLY])
        found = by_content(memory)
    assert list(found) == [MATCH, REPLY]
    assert found[REPLY]["bm25"] == 0 and found[REPLY]["cosine"] == 0
    assert found[REPLY]["context"] == pytest.approx(found[MATCH]["fused"])
    assert found[REPLY]["fused"] == pytest.approx(recall.CONTEXT_WEIGHT * found[REPLY]["context"])


def test_without_the_pool_such_a_memory_is_not_a_candidate(
    backend_store: str, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(context, "CONTEXT_POOL", 0)
    with MemoryEngine(backend_store, clock=clock, embedder=WordEmbedder()) as memory:
        filled(memory, clock)
        memory.store_many([MATCH, REPLY])
        assert list(by_content(memory)) == [MATCH]


def test_a_memory_of_another_session_gets_no_context(backend_store: str, clock: FakeClock) -> None:
    with MemoryEngine(backend_store, clock=clock, embedder=WordEmbedder()) as memory:
        filled(memory, clock)
        memory.store(MATCH)
        clock.advance(2 * context.SESSION_GAP_S)
        memory.store(REPLY)
        assert list(by_content(memory)) == [MATCH]


def test_a_keyword_search_keeps_to_its_matches(backend_store: str, clock: FakeClock) -> None:
    with MemoryEngine(backend_store, clock=clock, embedder="none") as memory:
        memory.store_many([MATCH, REPLY])
        assert list(by_content(memory)) == [MATCH]


def test_only_the_best_candidates_bring_their_neighbours(
    clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(context, "CONTEXT_POOL", 1)
    with MemoryEngine(":memory:", clock=clock, embedder=WordEmbedder()) as memory:
        filled(memory, clock)
        for first, then in (("apple orchard, the apple orchard", "after the best"),
                            ("an orchard", "after the other")):  # fmt: skip
            memory.store_many([first, then])
            clock.advance(2 * context.SESSION_GAP_S)
        found = by_content(memory, limit=4)
        assert "after the best" in found and "after the other" not in found
        monkeypatch.setattr(context, "CONTEXT_POOL", 2)
        assert "after the other" in by_content(memory, limit=4)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    sessions=st.lists(
        st.lists(st.lists(st.sampled_from(WORDS), min_size=1, max_size=3), min_size=1, max_size=8),
        min_size=1,
        max_size=4,
    ),
    word=st.sampled_from(WORDS),
    limit=st.integers(1, 8),
    pool=st.integers(0, 5),
)
def test_every_hit_matches_or_sits_next_to_a_match_in_its_session(
    sessions: list[list[list[str]]], word: str, limit: int, pool: int
) -> None:
    clock = FakeClock()
    placed: list[tuple[str, int, bool]] = []  # content, session, holds the word
    with MemoryEngine(":memory:", clock=clock, embedder=WordEmbedder()) as memory:
        for s, session in enumerate(sessions):
            texts = [f"{' '.join(words)} n{len(placed) + i}" for i, words in enumerate(session)]
            memory.store_many(texts)
            placed += [(t, s, word in t.split()) for t in texts]
            clock.advance(2 * context.SESSION_GAP_S)
        saved = context.CONTEXT_POOL, feedback.LEND_WEIGHT
        context.CONTEXT_POOL, feedback.LEND_WEIGHT = pool, 0.0  # only context lifts a row
        try:
            hits = memory.query(text=word, limit=limit)
        finally:
            context.CONTEXT_POOL, feedback.LEND_WEIGHT = saved
    at = {content: n for n, (content, _, _) in enumerate(placed)}
    scores = [h.score for h in hits]
    assert len(hits) <= limit and scores == sorted(scores, reverse=True)
    holding = sum(holds for _, _, holds in placed)
    assert len(hits) >= min(limit, holding)
    for hit in hits:
        n = at[hit.record.content]
        _, session, holds = placed[n]
        if holds:
            assert hit.score_parts["bm25"] > 0
            continue
        assert hit.score_parts["bm25"] == 0 and hit.score_parts["cosine"] == 0
        near = placed[max(n - context.CONTEXT_REACH, 0) : n + context.CONTEXT_REACH + 1]
        assert any(s == session and h for _, s, h in near)
        assert hit.score == pytest.approx(recall.CONTEXT_WEIGHT * hit.score_parts["context"])
