"""Lexical feedback and memories that only ask, in a hybrid text query's ranking."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prime_memory_folding import MemoryEngine, RankingSettings
from prime_memory_folding.recall import asking
from prime_memory_folding.recall.feedback import telling_words
from tests.conftest import FakeClock
from tests.test_recall import WordEmbedder

DEFAULTS = RankingSettings()


def shares_from(held: Mapping[str, int], total: int) -> Any:
    def shares_of(words: Sequence[str]) -> tuple[list[float | None], int]:
        return [held.get(w, 0) / total for w in words], total

    return shares_of


# -- the words first hits lend --------------------------------------------------------


def test_the_rarest_words_the_query_lacks_are_lent_first() -> None:
    texts = ["Melanie painted a lake at sunrise", "the lake and the sunrise again"]
    held = {"melanie": 40, "painted": 3, "lake": 5, "sunrise": 2}
    words = telling_words(texts, "What did Melanie paint?", shares_from(held, 100))
    assert words == ["sunrise", "lake", "painted"]


def test_common_short_numeric_and_unheld_words_are_not_lent() -> None:
    texts = ["we ran 2024 km in the zoo with glorb and kayak"]
    held = {"ran": 3, "2024": 3, "zoo": 3, "glorb": 1, "kayak": 30, "with": 3}
    total = 100
    assert held["kayak"] > DEFAULTS.lend_common * total
    assert telling_words(texts, "where we ran", shares_from(held, total)) == ["zoo"]


def test_nothing_is_lent_from_a_store_without_text() -> None:
    assert telling_words(["some words here"], "query", lambda words: None) == []


@given(
    texts=st.lists(st.text(alphabet="abcdef ", max_size=40), max_size=5),
    query=st.text(alphabet="abcdef ", max_size=12),
    total=st.integers(1, 10_000),
    held=st.integers(0, 10_000),
)
def test_lent_words_come_from_the_hits_and_not_from_the_query(
    texts: list[str], query: str, total: int, held: int
) -> None:
    words = telling_words(texts, query, lambda ws: ([min(held, total) / total] * len(ws), total))
    assert len(words) <= DEFAULTS.lend_words
    assert len(set(words)) == len(words)
    asked = set(query.split())
    for word in words:
        assert word not in asked
        assert any(word in text.split() for text in texts)


# -- which memories ask --------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("What did you paint last week?", True),
        ("Wow, nice! What did you paint?", True),
        ("Is it 3.5 km away?  ", True),
        ("I painted a lake. What about you?", False),
        ("Why? Because it rained.", False),
        ("That was fun!", False),
        ("no marks at all", False),
        ("", False),
    ],
)
def test_a_memory_asks_when_its_last_mark_asks_and_no_sentence_ends_in_a_full_stop(
    text: str, expected: bool
) -> None:
    assert asking.asks(text) is expected


# -- the engine, on each backend ----------------------------------------------------

FILLER = [f"weather report {i} about nothing in particular" for i in range(24)]


def test_the_first_hits_lend_their_rare_words(backend_store: str, clock: FakeClock) -> None:
    with MemoryEngine(backend_store, clock=clock, embedder=WordEmbedder()) as memory:
        memory.store_many([*FILLER, "apple harvest at the zebulon farm"])
        memory.store("zebulon is where we met")
        found = {h.record.content: h for h in memory.query(text="apple", limit=5)}
        memory.ranking = DEFAULTS.but(lend_weight=0.0)
        plain = {h.record.content: h for h in memory.query(text="apple", limit=5)}
    lent = found["zebulon is where we met"]
    assert lent.score_parts["lent"] > 0
    assert lent.score_parts["bm25"] == 0
    assert "zebulon is where we met" not in plain
    assert all("lent" not in h.score_parts for h in plain.values())


def test_a_lexical_only_query_lends_nothing(backend_store: str, clock: FakeClock) -> None:
    with MemoryEngine(backend_store, clock=clock, embedder="none") as memory:
        memory.store_many([*FILLER, "apple harvest at the zebulon farm", "zebulon met"])
        hits = memory.query(text="apple", limit=5)
    assert [h.record.content for h in hits] == ["apple harvest at the zebulon farm"]


def test_a_memory_that_only_asks_ranks_lower_and_lends_the_next_more_in_its_session(
    backend_store: str, clock: FakeClock
) -> None:
    question = "Did you go to the apple orchard?"
    answer = "Yes, we picked lots of fruit there."
    penalty, lend, context = DEFAULTS.ask_penalty, DEFAULTS.ask_lend, DEFAULTS.context_weight
    with MemoryEngine(backend_store, clock=clock, embedder=WordEmbedder()) as memory:
        memory.store_many(FILLER)
        memory.store_many([{"content": text, "session": "chat"} for text in (question, answer)])
        asked = {h.record.content: h for h in memory.query(text="apple orchard")}
        memory.ranking = DEFAULTS.but(ask_penalty=0.0)
        plain = {h.record.content: h for h in memory.query(text="apple orchard")}
    assert asked[question].score_parts["asks"] == 1.0
    assert "asks" not in asked[answer].score_parts
    fused = plain[question].score
    assert asked[question].score == pytest.approx(fused * (1 - penalty))
    assert plain[answer].score == pytest.approx(context * fused)
    assert asked[answer].score == pytest.approx((context + lend) * fused)


def test_a_note_that_asks_outside_a_session_keeps_its_score(
    backend_store: str, clock: FakeClock
) -> None:
    question = "Open question: should we drop the apple orchard?"
    with MemoryEngine(backend_store, clock=clock, embedder=WordEmbedder()) as memory:
        memory.store_many([*FILLER, question])
        asked = memory.query(text="apple orchard")[0]
        memory.ranking = DEFAULTS.but(ask_penalty=0.0)
        plain = memory.query(text="apple orchard")[0]
    assert asked.record.content == question and "asks" not in asked.score_parts
    assert asked.score == pytest.approx(plain.score)


PHRASES = (
    "apple orchard trip",
    "Did you see the river?",
    "the guitar lesson was fun.",
    "ocean swim at dawn",
    "zebulon farm apple harvest",
    "Why? Because of the mountain.",
    "laptop repair at the zebulon shop",
    "weather report about nothing",
)


@settings(max_examples=40, deadline=None)
@given(
    notes=st.lists(st.sampled_from(PHRASES), min_size=1, max_size=30),
    query=st.sampled_from(["apple", "river guitar", "zebulon", "Did you see it?", "ocean apple"]),
    limit=st.integers(1, 8),
)
def test_a_hybrid_ranking_keeps_its_invariants(notes: list[str], query: str, limit: int) -> None:
    clock = FakeClock()
    with MemoryEngine(":memory:", clock=clock, embedder=WordEmbedder()) as memory:
        for n, note in enumerate(notes):
            memory.store(f"{note} #{n}", session=f"s{n // 7}")  # a new session now and then
        hits = memory.query(text=query, limit=limit)
    assert len(hits) <= limit
    assert len({h.record.record_id for h in hits}) == len(hits)
    scores = [h.score for h in hits]
    assert scores == sorted(scores, reverse=True)
    for hit in hits:
        parts = hit.score_parts
        assert hit.score == pytest.approx(parts["fused"])
        reasons = [parts.get(k, 0.0) for k in ("bm25", "cosine", "lent", "context")]
        assert any(r > 0 for r in reasons)
        assert parts.get("asks", 1.0) == 1.0
        if "lexical_only" in parts:  # no vector side (the query embeds to nothing)
            assert "asks" not in parts
            assert "lent" not in parts
        else:  # every candidate of a store this small is among the best checked
            assert ("asks" in parts) == asking.asks(hit.record.content)
