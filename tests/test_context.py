"""Context in a text query's ranking: a memory's same-session neighbours lend it
a share of their score, and the neighbours of the best candidates join the
candidates even when they match nothing themselves."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from prime_memory_folding import MemoryEngine, context, recall
from tests.conftest import FakeClock

QUESTION = "Did you visit the zebulon orchard?"
ANSWER = "Yes, loved it."  # no word of the query below, not even a stop word
QUERY = "zebulon orchard"


def by_content(memory: MemoryEngine, text: str, limit: int = 10) -> dict[str, dict[str, float]]:
    return {h.record.content: h.score_parts for h in memory.query(text=text, limit=limit)}


def test_a_memory_that_matches_nothing_ranks_on_the_hit_before_it(
    backend_store: str, clock: FakeClock
) -> None:
    with MemoryEngine(backend_store, clock=clock, embedder="none") as memory:
        memory.store_many([QUESTION, ANSWER])
        found = by_content(memory, QUERY)
    assert list(found) == [QUESTION, ANSWER]
    assert found[ANSWER]["bm25"] == 0
    assert found[ANSWER]["context"] == pytest.approx(found[QUESTION]["fused"])


def test_without_the_pool_such_a_memory_is_not_a_candidate(
    backend_store: str, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(context, "CONTEXT_POOL", 0)
    with MemoryEngine(backend_store, clock=clock, embedder="none") as memory:
        memory.store_many([QUESTION, ANSWER])
        assert list(by_content(memory, QUERY)) == [QUESTION]


def test_a_memory_of_another_session_gets_no_context(backend_store: str, clock: FakeClock) -> None:
    with MemoryEngine(backend_store, clock=clock, embedder="none") as memory:
        memory.store(QUESTION)
        clock.advance(2 * context.SESSION_GAP_S)
        memory.store(ANSWER)
        assert list(by_content(memory, QUERY)) == [QUESTION]


def test_only_the_best_candidates_bring_their_neighbours(
    clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(context, "CONTEXT_POOL", 1)
    with MemoryEngine(":memory:", clock=clock, embedder="none") as memory:
        for first, then in (("zebulon orchard zebulon orchard", "after the best"),
                            ("an orchard", "after the other")):  # fmt: skip
            memory.store_many([first, then])
            clock.advance(2 * context.SESSION_GAP_S)
        found = by_content(memory, QUERY)
        assert "after the best" in found and "after the other" not in found
        monkeypatch.setattr(context, "CONTEXT_POOL", 2)
        assert "after the other" in by_content(memory, QUERY)


WORDS = ("apple", "river", "guitar", "ocean", "laptop", "meadow")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    sessions=st.lists(
        st.lists(st.lists(st.sampled_from(WORDS), min_size=1, max_size=3), min_size=1, max_size=6),
        min_size=1,
        max_size=4,
    ),
    word=st.sampled_from(WORDS),
    pool=st.integers(0, 5),
)
def test_every_hit_matches_or_sits_next_to_a_match_in_its_session(
    sessions: list[list[list[str]]], word: str, pool: int
) -> None:
    clock = FakeClock()
    placed: list[tuple[str, int, bool]] = []  # content, session, holds the word
    with MemoryEngine(":memory:", clock=clock, embedder="none") as memory:
        for s, session in enumerate(sessions):
            texts = [f"{' '.join(words)} n{len(placed) + i}" for i, words in enumerate(session)]
            memory.store_many(texts)
            placed += [(t, s, word in t.split()) for t in texts]
            clock.advance(2 * context.SESSION_GAP_S)
        saved = context.CONTEXT_POOL
        context.CONTEXT_POOL = pool
        try:
            hits = memory.query(text=word, limit=len(placed))
        finally:
            context.CONTEXT_POOL = saved
    at = {content: n for n, (content, _, _) in enumerate(placed)}
    scores = [h.score for h in hits]
    assert scores == sorted(scores, reverse=True)
    assert {c for c, _, holds in placed if holds} <= {h.record.content for h in hits}
    for hit in hits:
        n = at[hit.record.content]
        _, session, holds = placed[n]
        if holds:
            assert hit.score_parts["bm25"] > 0
            continue
        assert pool > 0 and hit.score_parts["context"] > 0
        near = placed[max(n - context.CONTEXT_REACH, 0) : n + context.CONTEXT_REACH + 1]
        assert any(s == session and h for _, s, h in near)
        assert hit.score == pytest.approx(recall.CONTEXT_WEIGHT * hit.score_parts["context"])
