"""A text query's vector weighs its words by their rarity in the store searched."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import given
from hypothesis import strategies as st

from prime_memory_folding import MemoryEngine, RankingSettings
from prime_memory_folding.recall.embeddings import StaticEmbedder
from prime_memory_folding.recall.query_weights import (
    MAX_WEIGHTED_WORDS,
    WeightedEmbedder,
    query_words,
    word_weights,
)
from tests.conftest import FakeClock

#: The share of the store a stop word counts as held by.
SHARE = RankingSettings().stopword_share

WORDS = ("apple", "river", "guitar", "ocean")


class WeighingEmbedder:
    """One dimension per known word; a query's dimensions take its words' weights."""

    name = "test:weighing"
    dim = len(WORDS)

    def __init__(self) -> None:
        self.weighed: list[dict[str, float]] = []

    def _vector(self, text: str, weight: Mapping[str, float]) -> npt.NDArray[np.float32]:
        out = np.zeros(self.dim, dtype=np.float32)
        for word in query_words(text):
            if word in WORDS:
                out[WORDS.index(word)] = weight.get(word, 0.0)
        norm = float(np.linalg.norm(out))
        return out / norm if norm > 0 else out

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        ones = {word: 1.0 for word in WORDS}
        return np.array([self._vector(text, ones) for text in texts], dtype=np.float32)

    def embed_weighted(self, text: str, weights: Mapping[str, float]) -> npt.NDArray[np.float32]:
        self.weighed.append(dict(weights))
        return self._vector(text, weights)


def shares_from(table: Mapping[str, float | None], total: int) -> Any:
    asked: list[list[str]] = []

    def shares_of(words: Sequence[str]) -> tuple[list[float | None], int]:
        asked.append(list(words))
        return [table.get(w, 0.0) for w in words], total

    shares_of.asked = asked  # type: ignore[attr-defined]
    return shares_of


# -- the weights ----------------------------------------------------------------------


def test_a_rarer_word_weighs_more_and_stop_words_are_not_looked_up() -> None:
    shares_of = shares_from({"caroline": 0.5, "hike": 0.01}, 1000)
    weights = word_weights("Did Caroline go on a hike?", shares_of)
    assert weights is not None
    assert set(weights) == {"did", "caroline", "go", "on", "a", "hike"}
    assert weights["hike"] > weights["caroline"] > 0
    assert weights["did"] == pytest.approx(math.log(1001 / (SHARE * 1000 + 0.5)) ** 0.5)
    assert weights["on"] == weights["a"] == weights["did"]
    assert shares_of.asked == [["caroline", "go", "hike"]]


def test_a_word_the_text_index_keeps_no_trace_of_weighs_as_a_stop_word() -> None:
    weights = word_weights("zebra quietly", shares_from({"zebra": 0.2, "quietly": None}, 50))
    assert weights is not None
    expected = word_weights("the zebra", shares_from({"zebra": 0.2}, 50))
    assert expected is not None
    assert weights["quietly"] == pytest.approx(expected["the"])


@pytest.mark.parametrize(
    "text",
    ["", "?!", " ".join(f"word{i}" for i in range(MAX_WEIGHTED_WORDS + 1))],
)
def test_a_query_without_words_or_with_too_many_is_left_as_the_model_reads_it(text: str) -> None:
    shares_of = shares_from({}, 10)
    assert word_weights(text, shares_of) is None
    assert shares_of.asked == []


def test_a_store_without_text_leaves_the_query_as_the_model_reads_it() -> None:
    assert word_weights("apple river", lambda words: None) is None


def test_no_weights_when_turned_off() -> None:
    off = RankingSettings(query_idf=0.0)
    assert word_weights("apple river", shares_from({"apple": 0.1}, 10), off) is None


@given(
    total=st.integers(1, 10**7),
    shares=st.lists(st.floats(0.0, 1.0), min_size=2, max_size=2),
)
def test_weights_are_positive_and_fall_as_a_word_gets_commoner(
    total: int, shares: list[float]
) -> None:
    low, high = sorted(shares)
    weights = word_weights("alpha beta", shares_from({"alpha": low, "beta": high}, total))
    assert weights is not None
    assert weights["alpha"] >= weights["beta"] > 0


# -- the static model ---------------------------------------------------------------


@pytest.fixture(scope="module")
def static() -> StaticEmbedder:
    return StaticEmbedder()


def test_the_static_model_weighs_words(static: StaticEmbedder) -> None:
    assert isinstance(static, WeightedEmbedder)


def test_equal_weights_give_the_models_own_vector(static: StaticEmbedder) -> None:
    text = "Would Caroline pursue writing as a career"
    weights = {word: 2.5 for word in query_words(text)}
    assert np.allclose(static.embed_weighted(text, weights), static.embed([text])[0], atol=1e-6)


def test_a_heavier_word_pulls_the_vector_towards_it(static: StaticEmbedder) -> None:
    text = "Caroline went hiking in the mountains"
    plain = static.embed_weighted(text, {word: 1.0 for word in query_words(text)})
    heavy = static.embed_weighted(text, {**{w: 1.0 for w in query_words(text)}, "hiking": 4.0})
    hiking = static.embed(["hiking"])[0]
    assert float(heavy @ hiking) > float(plain @ hiking) + 0.05
    assert abs(float(np.linalg.norm(heavy)) - 1.0) < 1e-5


def test_punctuation_weighs_nothing(static: StaticEmbedder) -> None:
    vector = static.embed_weighted("apple!?", {"apple": 1.0})
    assert np.allclose(vector, static.embed(["apple"])[0], atol=1e-6)


def test_no_weight_at_all_gives_the_models_own_vector(static: StaticEmbedder) -> None:
    text = "apple, river!"
    assert np.allclose(static.embed_weighted(text, {}), static.embed([text])[0], atol=1e-6)


# -- the engine, on each backend ----------------------------------------------------


@pytest.fixture
def weighing() -> WeighingEmbedder:
    return WeighingEmbedder()


def test_a_text_query_weighs_its_words_by_the_store(
    backend_store: str, clock: FakeClock, weighing: WeighingEmbedder
) -> None:
    with MemoryEngine(backend_store, clock=clock, embedder=weighing) as memory:
        memory.store_many([f"apple note {i}" for i in range(9)] + ["apple river"])
        memory.query(text="the apple river", limit=3)
    weights = weighing.weighed[-1]
    assert weights["river"] > weights["apple"] > 0
    assert weights["the"] == pytest.approx(math.log(11 / (SHARE * 10 + 0.5)) ** 0.5)


def test_the_rarer_word_leads_the_vector_side(
    backend_store: str,
    clock: FakeClock,
    weighing: WeighingEmbedder,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # "ocean" is in one note of ten, "guitar" in nine: weighted, the query's vector
    # leans to the ocean note; unweighted, both words count the same.
    notes = [f"guitar {i}" for i in range(9)] + ["ocean"]
    with MemoryEngine(backend_store, clock=clock, embedder=weighing) as memory:
        memory.store_many(notes)
        weighted = {
            h.record.content: h.score_parts["cosine"] for h in memory.query(text="guitar ocean")
        }
        memory.ranking = RankingSettings(query_idf=0.0)
        plain = {
            h.record.content: h.score_parts["cosine"] for h in memory.query(text="guitar ocean")
        }
    assert plain["ocean"] == pytest.approx(plain["guitar 0"])
    assert weighted["ocean"] > weighted["guitar 0"] + 0.2


def test_a_callers_vector_is_not_reweighed(
    backend_store: str, clock: FakeClock, weighing: WeighingEmbedder
) -> None:
    with MemoryEngine(backend_store, clock=clock, embedder=weighing) as memory:
        memory.store_many(["apple note", "river note"])
        memory.query(text="apple", vector=weighing.embed(["river"])[0])
    assert weighing.weighed == []
