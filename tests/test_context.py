"""Context in a hybrid text query's ranking: a memory's neighbours in its explicit
session lend it a share of their score, and the neighbours of the best
candidates join the candidates even when they match nothing themselves. Notes
stored without a session neither lend nor borrow, however close in time."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from prime_memory_folding import MemoryEngine, RankingSettings
from tests.conftest import FakeClock
from tests.test_recall import WORDS, WordEmbedder

MATCH = "We picked an apple at the zebulon orchard today."
REPLY = "Loved it, will go again."  # no word of the query, nor of the embedder's
QUERY = "apple orchard"
#: Older memories, more than the cosine side takes for a limit of 4 (three
#: times that): their cosine with the query is 0, as the reply's is, and ties
#: go to the older rows, so the reply is no candidate by cosine.
FILLER = [f"a river note {n}" for n in range(16)]
DEFAULTS = RankingSettings()


def by_content(memory: MemoryEngine, limit: int = 2) -> dict[str, dict[str, float]]:
    return {h.record.content: h.score_parts for h in memory.query(QUERY, limit=limit)}


def in_session(texts: list[str], session: str | None) -> list[dict[str, object]]:
    return [{"content": text, "session": session} for text in texts]


def test_a_memory_that_matches_nothing_ranks_on_the_hit_before_it_in_its_session(
    backend_store: str, clock: FakeClock
) -> None:
    with MemoryEngine(backend_store, clock=clock, embedder=WordEmbedder()) as memory:
        memory.store_many(FILLER)
        memory.store_many(in_session([MATCH, REPLY], "chat-1"))
        found = by_content(memory)
    assert list(found) == [MATCH, REPLY]
    assert found[REPLY]["bm25"] == 0 and found[REPLY]["cosine"] == 0
    assert found[REPLY]["context"] == pytest.approx(found[MATCH]["fused"])
    assert found[REPLY]["fused"] == pytest.approx(DEFAULTS.context_weight * found[REPLY]["context"])


def test_without_the_pool_such_a_memory_is_not_a_candidate(
    backend_store: str, clock: FakeClock
) -> None:
    no_pool = DEFAULTS.but(context_pool=0)
    with MemoryEngine(
        backend_store, clock=clock, embedder=WordEmbedder(), ranking=no_pool
    ) as memory:
        memory.store_many(FILLER)
        memory.store_many(in_session([MATCH, REPLY], "chat-1"))
        assert list(by_content(memory)) == [MATCH]


@pytest.mark.parametrize("sessions", [(None, None), ("chat-1", None), ("chat-1", "chat-2")])
def test_memories_stored_together_without_one_session_share_no_context(
    backend_store: str, clock: FakeClock, sessions: tuple[str | None, str | None]
) -> None:
    with MemoryEngine(backend_store, clock=clock, embedder=WordEmbedder()) as memory:
        memory.store_many(FILLER)
        # Stored in the same second: timing no longer makes a session.
        memory.store(MATCH, session=sessions[0])
        memory.store(REPLY, session=sessions[1])
        assert list(by_content(memory)) == [MATCH]


def test_neighbours_are_taken_in_the_session_when_sessions_interleave(
    backend_store: str, clock: FakeClock
) -> None:
    with MemoryEngine(backend_store, clock=clock, embedder=WordEmbedder()) as memory:
        memory.store_many(FILLER)
        memory.store(MATCH, session="chat-1")
        for n in range(3):  # another session writes in between
            memory.store(f"a river note from elsewhere {n}", session="chat-2")
        memory.store(REPLY, session="chat-1")
        found = by_content(memory)
    assert list(found) == [MATCH, REPLY]
    assert found[REPLY]["context"] == pytest.approx(found[MATCH]["fused"])


def test_a_keyword_search_keeps_to_its_matches(backend_store: str, clock: FakeClock) -> None:
    with MemoryEngine(backend_store, clock=clock, embedder="none") as memory:
        memory.store_many(in_session([MATCH, REPLY], "chat-1"))
        assert list(by_content(memory)) == [MATCH]


def test_only_the_best_candidates_bring_their_neighbours(clock: FakeClock) -> None:
    with MemoryEngine(
        ":memory:", clock=clock, embedder=WordEmbedder(), ranking=DEFAULTS.but(context_pool=1)
    ) as memory:
        memory.store_many(FILLER)
        for n, (first, then) in enumerate(
            (("apple orchard, the apple orchard", "after the best"),
             ("an orchard", "after the other"))
        ):  # fmt: skip
            memory.store_many(in_session([first, then], f"chat-{n}"))
        found = by_content(memory, limit=4)
        assert "after the best" in found and "after the other" not in found
        memory.ranking = DEFAULTS.but(context_pool=2)
        assert "after the other" in by_content(memory, limit=4)


#: Notes a coding agent keeps, four of them stored within minutes of each other.
NOTES = [
    "Decision: logging goes through structlog, not print.",
    "Open question: should we drop Python 3.9 support?",
    "Convention: every migration gets a downgrade step.",
    "Bug: the retry loop in the HTTP client never backs off; fixed with jitter.",
    "We deploy to production with a blue-green switch behind the load balancer.",
    "Preference: prefer small pull requests over large ones.",
    "The CI cache key includes the lock file hash.",
    "Pitfall: the test database must be dropped after each run.",
]
ASKED = {
    "should we drop python 3.9?": NOTES[1],
    "how do we log?": NOTES[0],
    "does the retry loop back off?": NOTES[3],
    "how do we deploy to production?": NOTES[4],
    "what goes into the CI cache key?": NOTES[6],
    "migration downgrade step": NOTES[2],
}


def test_each_note_is_found_first_by_its_own_question(backend_store: str, clock: FakeClock) -> None:
    with MemoryEngine(backend_store, clock=clock) as memory:
        for n, note in enumerate(NOTES):
            memory.store(note)
            clock.advance(90 if n < 4 else 86_400)  # a burst, then a note a day
        for question, note in ASKED.items():
            hits = memory.query(question, limit=4)
            assert hits[0].record.content == note, question
            # A note that matches no word ranks below every one that does.
            matched = [h.score_parts["bm25"] > 0 for h in hits]
            assert matched == sorted(matched, reverse=True), question
            assert all("context" not in h.score_parts for h in hits), question


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    notes=st.lists(st.lists(st.sampled_from(WORDS), min_size=1, max_size=4), max_size=12),
    gaps=st.lists(st.integers(0, 120), min_size=12, max_size=12),
    word=st.sampled_from(WORDS),
    limit=st.integers(1, 8),
)
def test_notes_without_a_session_never_carry_context(
    notes: list[list[str]], gaps: list[int], word: str, limit: int
) -> None:
    clock = FakeClock()
    with MemoryEngine(":memory:", clock=clock, embedder=WordEmbedder()) as memory:
        for n, words in enumerate(notes):
            memory.store(f"{' '.join(words)} n{n}")
            clock.advance(gaps[n])
        hits = memory.query(word, limit=limit)
    for hit in hits:
        assert "context" not in hit.score_parts
        assert "asks" not in hit.score_parts


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
    # Only context lifts a row that holds no word.
    ranking = DEFAULTS.but(context_pool=pool, lend_weight=0.0)
    with MemoryEngine(":memory:", clock=clock, embedder=WordEmbedder(), ranking=ranking) as memory:
        for s, session in enumerate(sessions):
            texts = [f"{' '.join(words)} n{len(placed) + i}" for i, words in enumerate(session)]
            memory.store_many(in_session(texts, f"s{s}"))
            placed += [(t, s, word in t.split()) for t in texts]
        hits = memory.query(word, limit=limit)
    at = {content: n for n, (content, _, _) in enumerate(placed)}
    scores = [h.score for h in hits]
    assert len(hits) <= limit and scores == sorted(scores, reverse=True)
    holding = sum(holds for _, _, holds in placed)
    assert len(hits) >= min(limit, holding)
    reach = DEFAULTS.context_reach
    for hit in hits:
        n = at[hit.record.content]
        _, session, holds = placed[n]
        if holds:
            assert hit.score_parts["bm25"] > 0
            continue
        assert hit.score_parts["bm25"] == 0 and hit.score_parts["cosine"] == 0
        near = placed[max(n - reach, 0) : n + reach + 1]
        assert any(s == session and h for _, s, h in near)
        assert hit.score == pytest.approx(DEFAULTS.context_weight * hit.score_parts["context"])
