"""Text recall: embedding spaces, FTS5 lexical ranking and hybrid fusion."""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import given
from hypothesis import strategies as st

from prime_memory_folding import (
    DimensionMismatch,
    EmbeddingError,
    InvalidInput,
    MemoryEngine,
    RankingSettings,
)
from prime_memory_folding.recall.text_embedding import BUILTIN_SPACE
from prime_memory_folding.storage import SQLiteStorage, sqlite_text
from prime_memory_folding.storage.sqlite_text import parse_query
from tests.backends import emptied, examples
from tests.conftest import FakeClock


@pytest.fixture
def engine(backend_engine: MemoryEngine) -> MemoryEngine:
    """The engine of these tests runs on each backend."""
    return backend_engine


WORDS = ("apple", "banana", "cherry", "river", "mountain", "laptop", "guitar", "ocean")


class WordEmbedder:
    """A tiny deterministic embedder: one dimension per known word."""

    def __init__(self, name: str = "test:words", fail_after: int | None = None) -> None:
        self.name = name
        self.dim = len(WORDS)
        self.calls = 0
        self.fail_after = fail_after

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        self.calls += 1
        if self.fail_after is not None and self.calls > self.fail_after:
            raise EmbeddingError("the test embedder broke; set embedder= to another one")
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            for j, word in enumerate(WORDS):
                if word in text.lower():
                    out[i, j] = 1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        np.divide(out, norms, out=out, where=norms > 0)
        return out


@pytest.fixture
def words_engine(backend_store: str, clock: FakeClock) -> Any:
    with MemoryEngine(backend_store, clock=clock, embedder=WordEmbedder()) as memory:
        yield memory


def contents(hits: Sequence[Any]) -> list[str]:
    return [hit.record.content for hit in hits]


# -- schema -------------------------------------------------------------------------


def test_migration_creates_fts_tables_and_triggers(tmp_path: Path) -> None:
    storage = SQLiteStorage(tmp_path / "schema.db")
    names = {
        (kind, name) for kind, name in storage.db.execute("SELECT type, name FROM sqlite_master")
    }
    storage.close()
    assert {("table", "records_fts"), ("table", "records_grams")} <= names
    for trigger in ("records_fts_insert", "records_fts_update", "records_fts_delete"):
        assert ("trigger", trigger) in names


def test_migration_indexes_records_stored_before_it(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with MemoryEngine(path, embedder="none") as memory:
        memory.store("the old lighthouse keeper")
    db = sqlite3.connect(path)
    db.execute("DROP TABLE records_fts")
    db.execute("DROP TABLE records_grams")
    for trigger in ("records_fts_insert", "records_fts_update", "records_fts_delete"):
        db.execute(f"DROP TRIGGER {trigger}")
    db.execute("DELETE FROM schema_migrations WHERE version = 2")
    db.commit()
    db.close()
    with MemoryEngine(path, embedder="none") as memory:
        assert contents(memory.query(text="lighthouse")) == ["the old lighthouse keeper"]


def test_fts_follows_updates_and_forgets(words_engine: MemoryEngine) -> None:
    rec = words_engine.store("a note about the harbour")
    words_engine.update(rec.record_id, content="a note about the airport")
    assert words_engine.query(text="harbour") == []
    assert contents(words_engine.query(text="airport")) == ["a note about the airport"]
    words_engine.forget(rec.record_id)
    assert words_engine.query(text="airport") == []


# -- lexical ------------------------------------------------------------------------


def test_stemming_finds_other_word_forms(words_engine: MemoryEngine) -> None:
    words_engine.store("I run every morning")
    words_engine.store("The cat sleeps")
    assert contents(words_engine.query(text="running"))[0] == "I run every morning"


@pytest.mark.parametrize(
    ("content", "query"),
    [
        ("我喜欢吃苹果和香蕉", "苹果"),
        ("我喜欢吃苹果和香蕉", "喜欢吃苹果"),
        ("東京で寿司を食べました", "寿司"),
        ("مرحبا بالعالم الجميل", "بالعالم"),
        ("שלום עולם", "עולם"),
        ("party time 🎉 tonight", "🎉"),
        ("🎉🥳🎂", "🥳"),
        ("Crème brûlée at the café", "creme brulee"),
        ("안녕하세요 반갑습니다", "안녕하세요"),
    ],
)
def test_text_in_any_script_is_found_again(
    words_engine: MemoryEngine, content: str, query: str
) -> None:
    words_engine.store("an unrelated note")
    rec = words_engine.store(content)
    assert words_engine.get(rec.record_id).content == content
    assert contents(words_engine.query(text=query))[0] == content


@pytest.mark.parametrize(
    "text",
    [
        "NEAR(apple banana)",
        "apple*",
        "*",
        '"unbalanced',
        'apple" OR "',
        "content:apple",
        "apple AND NOT banana",
        "^apple",
        "(apple",
        "apple + - : { }",
        "'; DROP TABLE records; --",
    ],
)
def test_fts_syntax_in_query_text_is_only_words(words_engine: MemoryEngine, text: str) -> None:
    words_engine.store("apple pie recipe")
    hits = words_engine.query(text=text)
    assert all(hit.record.content == "apple pie recipe" for hit in hits)
    assert words_engine.stats().records == 1


def test_query_terms_are_quoted_and_joined_by_or() -> None:
    parsed = parse_query('NEAR("apple" pie*)')
    assert parsed.words == '"near" OR "apple" OR "pie"'
    assert parsed.grams is None and parsed.short == ()


def test_stopwords_are_dropped_unless_nothing_else_is_left() -> None:
    assert parse_query("what is the plan").words == '"plan"'
    assert parse_query("what is it").words == '"what" OR "is" OR "it"'


@pytest.mark.parametrize("text", ["", "   ", "\n\t"])
def test_blank_text_query_is_refused(words_engine: MemoryEngine, text: str) -> None:
    with pytest.raises(InvalidInput, match="text is empty"):
        words_engine.query(text=text)


def test_non_string_text_query_is_refused(words_engine: MemoryEngine) -> None:
    with pytest.raises(InvalidInput, match="text must be a string"):
        words_engine.query(text=3)  # type: ignore[arg-type]


def test_parsed_query_keeps_each_quoted_term() -> None:
    parsed = parse_query("apple pie apple")
    assert parsed.terms == ('"apple"', '"pie"')
    assert parsed.words == '"apple" OR "pie"'


# -- lexical ranking in large stores ------------------------------------------------

#: (content, how many), stored in this order. Once the limits are lowered this is
#: a large store with one rare word, one in 40 % of the records and one in all.
LARGE_STORE = [
    ("zebra common everywhere", 2),
    ("zebra common common everywhere filler", 1),
    ("zebra everywhere filler words here", 3),
    ("common everywhere filler", 45),
    ("everywhere filler words only", 69),
]
LARGE_STORE_SIZE = sum(count for _, count in LARGE_STORE)


#: A store of more than 50 records plans its broad text queries, scoring at most 10.
LARGE_PLANNING = RankingSettings(exact_store=50, lexical_budget=10)


@pytest.fixture
def large_store(store_path: Path, clock: FakeClock) -> Any:
    with MemoryEngine(store_path, clock=clock, embedder="none", ranking=LARGE_PLANNING) as memory:
        for content, count in LARGE_STORE:
            memory.store_many([f"{content} {i}" for i in range(count)])
        yield memory


def lexical(memory: MemoryEngine, text: str, store_size: int, depth: int | None = 1000) -> Any:
    return sqlite_text.lexical_scores(
        memory.storage.db,  # type: ignore[attr-defined]
        parse_query(text),
        depth,
        store_size,
        budget=LARGE_PLANNING.lexical_budget,
        exact_store=LARGE_PLANNING.exact_store,
    )


def contents_of(memory: MemoryEngine, record_ids: Any) -> set[str]:
    return {memory.get(rid).content for rid in record_ids}


def test_large_store_scores_the_rare_words_records_with_every_words_bm25(
    large_store: MemoryEngine,
) -> None:
    planned = lexical(large_store, "zebra common", LARGE_STORE_SIZE)
    exact = lexical(large_store, "zebra common", LARGE_STORE_SIZE, depth=None)
    assert not planned.exhaustive
    assert {text.split()[0] for text in contents_of(large_store, planned.scores)} == {"zebra"}
    assert len(planned.scores) == 6
    for rid, score in planned.scores.items():
        assert score == pytest.approx(exact.scores[rid], rel=1e-12)
    # The rare word decides the top of the exact ranking here, so the plan keeps it.
    top = sorted(exact.scores, key=exact.scores.__getitem__, reverse=True)[:6]
    assert set(top) == set(planned.scores)


@pytest.mark.parametrize(
    ("text", "store_size", "planned", "exhaustive"),
    [
        ("zebra common", 50, False, True),  # a small store is always exact
        ("zebra", LARGE_STORE_SIZE, False, True),  # few matches expected: exact
        # Planned, but a deeper look could add only records that hold "filler"
        # alone, a word in most records (and worth a few millionths).
        ("zebra filler", LARGE_STORE_SIZE, True, True),
        ("zebra common", LARGE_STORE_SIZE, True, False),  # "common" alone goes unscored
        ("common", LARGE_STORE_SIZE, True, False),  # more matches than the budget
    ],
)
def test_only_broad_queries_in_large_stores_are_planned(
    large_store: MemoryEngine, text: str, store_size: int, planned: bool, exhaustive: bool
) -> None:
    found = lexical(large_store, text, store_size)
    exact = lexical(large_store, text, store_size, depth=None)
    assert found.exhaustive is exhaustive
    assert (found.scores != exact.scores) is planned


def test_a_planned_query_looks_deeper_only_for_words_it_left_unscored(
    large_store: MemoryEngine,
) -> None:
    # "everywhere" is in every record: the rare word's records are the answer.
    found = contents(large_store.query(text="zebra everywhere", limit=10))
    assert len(found) == 6 and all(text.startswith("zebra") for text in found)
    # "common" is in 40 % of them: records that hold it alone are found too.
    found = contents(large_store.query(text="zebra common", limit=10))
    assert len(found) == 10
    assert {text.split()[0] for text in found} == {"zebra", "common"}


def test_budget_keeps_the_newest_records_of_a_common_rarest_word(
    large_store: MemoryEngine,
) -> None:
    found = lexical(large_store, "common", LARGE_STORE_SIZE)
    newest = {f"common everywhere filler {i}" for i in range(35, 45)}
    assert contents_of(large_store, found.scores) == newest


def test_word_in_most_records_is_left_out_of_a_planned_query(
    large_store: MemoryEngine,
) -> None:
    found = lexical(large_store, "zebra everywhere", LARGE_STORE_SIZE)
    exact = lexical(large_store, "zebra everywhere", LARGE_STORE_SIZE, depth=None)
    assert len(exact.scores) == LARGE_STORE_SIZE
    assert {text.split()[0] for text in contents_of(large_store, found.scores)} == {"zebra"}
    for rid, score in found.scores.items():
        assert score == pytest.approx(exact.scores[rid], abs=1e-5)


def test_word_shares_are_remembered_until_a_quarter_of_the_sample_is_new(
    store_path: Path, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_text, "SAMPLE_RECORDS", 8)  # forgotten after 2 new records
    with MemoryEngine(store_path, clock=clock, embedder="none") as memory:
        memory.store_many([f"{fruit} {i}" for i in range(4) for fruit in ("apple", "pear")])
        shares = sqlite_text.WordShares()
        db = memory.storage.db
        assert shares.get(db, ['"apple"', '"plum"']) == [0.5, 0.0]
        memory.store("apple again")
        assert shares.get(db, ['"apple"']) == [0.5]  # remembered, a little stale
        memory.store("apple once more")
        assert shares.get(db, ['"apple"']) == [5 / 8]


def test_gate_that_drops_every_planned_hit_looks_at_every_match(
    backend_store: str, clock: FakeClock
) -> None:
    planned = RankingSettings(exact_store=5, lexical_budget=5)
    with MemoryEngine(backend_store, clock=clock, embedder="none", ranking=planned) as memory:
        memory.store("apple pie", domain="rare")
        memory.store_many([f"apple tart {i}" for i in range(30)])
        assert contents(memory.query(text="apple", domain="rare")) == ["apple pie"]


# -- words that no record holds -----------------------------------------------------


@pytest.mark.parametrize(
    ("text", "without"),
    [
        ("common qxjq", "common"),  # the unknown word would be the rarest
        ("qxjq zebra common jjqx", "zebra common"),
        ("everywhere qxjq", "everywhere"),  # every word left is in most records
        ("zebra filler qxjq", "zebra filler"),
    ],
)
def test_a_word_in_no_record_leaves_the_plan_as_it_was(
    large_store: MemoryEngine, text: str, without: str
) -> None:
    found = lexical(large_store, text, LARGE_STORE_SIZE)
    assert found.scores
    assert found == lexical(large_store, without, LARGE_STORE_SIZE)


def test_a_word_in_no_record_does_not_make_a_query_score_every_match(
    large_store: MemoryEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    depths: list[int | None] = []
    scores = sqlite_text.lexical_scores

    def spy(db: Any, query: Any, depth: int | None, *args: Any, **kwargs: Any) -> Any:
        depths.append(depth)
        return scores(db, query, depth, *args, **kwargs)

    monkeypatch.setattr(sqlite_text, "lexical_scores", spy)
    expected = large_store.query(text="common", limit=5)
    assert depths == [sqlite_text.LEXICAL_DEPTH]  # the plan found enough
    depths.clear()
    assert large_store.query(text="common qxjq", limit=5) == expected
    assert depths == [sqlite_text.LEXICAL_DEPTH]


def test_a_word_in_no_record_is_found_once_stored(words_engine: MemoryEngine) -> None:
    words_engine.store("an apple note")
    assert words_engine.query(text="qxjq") == []
    rec = words_engine.store("the qxjq note")
    first, *others = words_engine.query(text="qxjq")
    assert first.record.record_id == rec.record_id
    assert all(hit.score_parts["bm25"] == 0 for hit in others)  # its session's, on context


#: Words of the stores below; no query word made of q, x and j is among them.
STORE_WORDS = ("apple", "river", "guitar", "ocean", "laptop", "mountain", "harbour", "meadow")
unknown_words = st.text(alphabet="qxj", min_size=3, max_size=7)


#: Stores of more than 5 records plan their broad text queries, on each backend.
PLANNED_EARLY = RankingSettings(exact_store=5, lexical_budget=3)


def test_words_in_no_record_change_no_hit(backend_store: str, clock: FakeClock) -> None:
    # Earlier words are far commoner: most queries are broad enough to be planned.
    last = len(STORE_WORDS) - 1
    contents = st.lists(
        st.integers(0, len(STORE_WORDS) ** 2 - 1).map(lambda n: STORE_WORDS[last - math.isqrt(n)]),
        min_size=1,
        max_size=5,
    ).map(" ".join)

    @examples(backend_store, sqlite=60, postgres=20)
    @given(
        st.lists(contents, min_size=1, max_size=60),
        st.lists(st.sampled_from(STORE_WORDS), min_size=1, max_size=3),
        st.lists(st.tuples(st.integers(0, 3), unknown_words), min_size=1, max_size=2),
        st.integers(1, 10),
    )
    def check(
        stored: list[str], words: list[str], unknown: list[tuple[int, str]], limit: int
    ) -> None:
        text = list(words)
        for at, word in unknown:
            text.insert(min(at, len(text)), word)
        with MemoryEngine(
            emptied(backend_store), clock=clock, embedder="none", ranking=PLANNED_EARLY
        ) as memory:
            memory.store_many([f"{content} {n}" for n, content in enumerate(stored)])
            expected = memory.query(text=" ".join(words), limit=limit)
            assert memory.query(text=" ".join(text), limit=limit) == expected

    check()


# -- hybrid -------------------------------------------------------------------------


def test_hybrid_ranks_above_either_signal_alone(
    backend_store: str, another_store: str, clock: FakeClock
) -> None:
    # BM25 prefers the note that repeats the words; the word embedder prefers
    # "pineapple guitarist" (it sees "apple" and "guitar" inside). Only the
    # note with both the words and the meaning is first for both together.
    filler = [f"weather report {i} with plain words about nothing in particular" for i in range(10)]
    target = "apple guitar river"
    notes = [
        "apple apple apple guitar guitar banana cherry ocean mountain laptop",
        "pineapple guitarist",
        target,
        *filler,
    ]
    query = "apple guitar"
    with MemoryEngine(backend_store, clock=clock, embedder=WordEmbedder()) as memory:
        memory.store_many(notes)
        hybrid = contents(memory.query(text=query, limit=3))
        cosine = contents(memory.query(vector=WordEmbedder().embed([query])[0], limit=3))
    with MemoryEngine(another_store, clock=clock, embedder="none") as lexical:
        lexical.store_many(notes)
        bm25 = contents(lexical.query(text=query, limit=3))
    assert hybrid[0] == target
    assert bm25[0] != target
    assert cosine[0] != target


def test_neighbours_within_reach_in_the_same_session_lend_context(
    words_engine: MemoryEngine,
) -> None:
    words_engine.store_many([{"content": t, "session": "a"} for t in ("note x", "note y")])
    words_engine.store_many(
        {"content": t, "session": "b"}
        for t in ("apple river", "note one", "note two", "note three")
    )
    hits = {hit.record.content: hit for hit in words_engine.query(text="apple", limit=10)}
    target = hits.pop("apple river")
    defaults = RankingSettings()
    reached = [f"note {n}" for n in ("one", "two")[: defaults.context_reach]]
    assert sorted(hits) == sorted(reached)
    for hit in hits.values():
        assert hit.score_parts["context"] == pytest.approx(target.score)
        assert hit.score == pytest.approx(defaults.context_weight * target.score)


def test_hybrid_hits_show_their_score_parts(words_engine: MemoryEngine) -> None:
    words_engine.store("apple and cherry")
    hit = words_engine.query(text="apple")[0]
    assert {"bm25", "bm25_norm", "cosine", "fused"} <= set(hit.score_parts)
    assert hit.score == pytest.approx(hit.score_parts["fused"])


def test_text_query_combines_with_gates(words_engine: MemoryEngine) -> None:
    words_engine.store("apple in the kitchen", domain="home", tags=["food"])
    words_engine.store("apple in the office", domain="work", tags=["food"])
    words_engine.store("apple on the desk", domain="work", tags=["hardware"])
    hits = words_engine.query(text="apple", domain="work", tags=["food"])
    assert contents(hits) == ["apple in the office"]
    assert words_engine.query(text="apple", domain="nowhere") == []


def test_gates_see_matches_beyond_the_first_lexical_page(
    backend_store: str, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_text, "LEXICAL_DEPTH", 5)
    with MemoryEngine(backend_store, clock=clock, embedder="none") as memory:
        memory.store_many([f"apple apple note {i}" for i in range(20)])
        memory.store("apple once", domain="rare")
        assert contents(memory.query(text="apple", domain="rare")) == ["apple once"]


def test_text_and_vector_together_use_the_vector_for_similarity(
    words_engine: MemoryEngine,
) -> None:
    words_engine.store("guitar lessons")
    words_engine.store("ocean view")
    vector = WordEmbedder().embed(["ocean"])[0]
    hits = words_engine.query(text="lessons", vector=vector)
    assert {h.record.content for h in hits} == {"guitar lessons", "ocean view"}
    by_content = {h.record.content: h.score_parts for h in hits}
    assert by_content["ocean view"]["cosine"] == pytest.approx(1.0)
    assert by_content["guitar lessons"]["bm25"] > 0


# -- embedding spaces ---------------------------------------------------------------


def test_first_text_store_claims_the_embedders_space(words_engine: MemoryEngine) -> None:
    rec = words_engine.store("apple")
    assert words_engine.stats().embedding_space == "test:words"
    assert rec.vector is not None and len(rec.vector) == len(WORDS)


def test_builtin_model_is_the_default(
    backend_store: str, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PRIME_MEMORY_EMBEDDER")
    with MemoryEngine(backend_store, clock=clock) as memory:
        memory.store("We deploy on Fridays")
        assert memory.stats().embedding_space == BUILTIN_SPACE
        hit = memory.query(text="deployment day")[0]
        assert "cosine" in hit.score_parts


def test_custom_space_falls_back_to_lexical_and_says_so(engine: MemoryEngine) -> None:
    engine.store("apple pie", vector=[1.0, 0.0, 0.0])
    engine.store("apple tart")  # no vector: a custom space never embeds text
    assert engine.stats().embedding_space == "custom:3"
    hits = engine.query(text="apple")
    assert len(hits) == 2
    assert all(hit.score_parts["lexical_only"] == 1.0 for hit in hits)
    assert all("cosine" not in hit.score_parts for hit in hits)


def test_vector_of_the_wrong_dimension_is_refused(words_engine: MemoryEngine) -> None:
    words_engine.store("apple")
    with pytest.raises(DimensionMismatch, match="dimension 3"):
        words_engine.store("banana", vector=[1.0, 2.0, 3.0])
    with pytest.raises(DimensionMismatch):
        words_engine.query(text="banana", vector=[1.0, 2.0, 3.0])


def test_texts_that_embed_to_nothing_are_stored_without_vector(
    words_engine: MemoryEngine,
) -> None:
    rec = words_engine.store("🎉🎉🎉")
    assert rec.vector is None
    assert contents(words_engine.query(text="🎉")) == ["🎉🎉🎉"]


def test_zero_vector_from_a_caller_is_still_refused(words_engine: MemoryEngine) -> None:
    with pytest.raises(InvalidInput, match="all zeros"):
        words_engine.store("apple", vector=[0.0] * len(WORDS))


def test_no_embedder_stores_without_vectors(backend_store: str, clock: FakeClock) -> None:
    with MemoryEngine(backend_store, clock=clock, embedder="none") as memory:
        rec = memory.store("apple")
        assert rec.vector is None
        assert memory.stats().embedding_space is None
        assert memory.query(text="apple")[0].score_parts["lexical_only"] == 1.0


def test_store_many_embeds_in_one_batch(backend_store: str, clock: FakeClock) -> None:
    embedder = WordEmbedder()
    with MemoryEngine(backend_store, clock=clock, embedder=embedder) as memory:
        records = memory.store_many([f"apple note {i}" for i in range(50)])
    assert embedder.calls == 1
    assert all(rec.vector is not None for rec in records)


def test_opening_a_store_of_another_space_is_refused(backend_store: str, clock: FakeClock) -> None:
    with MemoryEngine(backend_store, clock=clock, embedder=WordEmbedder("test:one")) as memory:
        memory.store("apple")
    with pytest.raises(EmbeddingError, match="embedder=") as caught:
        MemoryEngine(backend_store, clock=clock, embedder=WordEmbedder("test:two"))
    assert "reembed" in str(caught.value)


def test_space_mismatch_names_the_environment_setting(
    backend_store: str, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    with MemoryEngine(backend_store, clock=clock, embedder=WordEmbedder("test:one")) as memory:
        memory.store("apple")
    monkeypatch.setenv("PRIME_MEMORY_EMBEDDER", "builtin")
    with pytest.raises(EmbeddingError, match="PRIME_MEMORY_EMBEDDER"):
        MemoryEngine(backend_store, clock=clock)


def test_missing_model_names_the_setting_and_leaves_the_store_usable(
    backend_store: str, clock: FakeClock, tmp_path: Path
) -> None:
    missing = tmp_path / "no-such-model"
    with MemoryEngine(backend_store, clock=clock, embedder=f"model2vec:{missing}") as memory:
        with pytest.raises(EmbeddingError, match="PRIME_MEMORY_EMBEDDER"):
            memory.store("apple")
        assert memory.stats().records == 0
        assert memory.stats().embedding_space is None
        rec = memory.store("apple", vector=[1.0, 0.0])
        assert memory.get(rec.record_id).content == "apple"


def test_reembed_moves_the_store_and_reports_progress(backend_store: str, clock: FakeClock) -> None:
    with MemoryEngine(backend_store, clock=clock, embedder="builtin") as memory:
        memory.store_many([f"apple note {i}" for i in range(5)] + ["river walk"])
    seen: list[tuple[int, int]] = []
    with MemoryEngine(backend_store, clock=clock, embedder="none") as memory:
        count = memory.reembed(
            WordEmbedder(), progress=lambda done, total: seen.append((done, total))
        )
        assert count == 6
        assert memory.stats().embedding_space == "test:words"
        assert contents(memory.query(text="river"))[0] == "river walk"
        assert "cosine" in memory.query(text="river")[0].score_parts
    assert seen[0] == (0, 6) and seen[-1] == (6, 6)
    with MemoryEngine(backend_store, clock=clock, embedder=WordEmbedder()) as memory:
        assert memory.stats().records == 6


def test_failed_reembed_changes_nothing(
    backend_store: str, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    from prime_memory_folding.recall import space

    monkeypatch.setattr(space, "REEMBED_BATCH", 2)
    with MemoryEngine(backend_store, clock=clock, embedder=WordEmbedder("test:one")) as memory:
        memory.store_many([f"apple note {i}" for i in range(6)])
        before = [memory.get(h.record.record_id).vector for h in memory.query(limit=10)]
        with pytest.raises(EmbeddingError, match="embedder="):
            memory.reembed(WordEmbedder("test:two", fail_after=2))
        assert memory.stats().embedding_space == "test:one"
        after = [memory.get(h.record.record_id).vector for h in memory.query(limit=10)]
        assert after == before
        assert memory.query(text="apple")  # still usable in its old space


# -- the time prior -----------------------------------------------------------------

MAY_10 = 1_683_720_000.0  # 2023-05-10 12:00 UTC
JULY_10 = 1_688_990_400.0  # 2023-07-10 12:00 UTC


@pytest.fixture
def may_and_july(words_engine: MemoryEngine, clock: FakeClock) -> MemoryEngine:
    """The same words stored in May and, a little more strongly, in July."""
    clock.now = MAY_10
    words_engine.store("apple notes")
    clock.now = JULY_10
    words_engine.store("apple apple notes")
    return words_engine


def test_a_time_expression_leads_to_what_was_stored_then(
    may_and_july: MemoryEngine, clock: FakeClock
) -> None:
    clock.now = JULY_10 + 30 * 86_400
    assert contents(may_and_july.query(text="apple notes")) == ["apple apple notes", "apple notes"]
    hits = may_and_july.query(text="apple notes from May")
    assert contents(hits) == ["apple notes", "apple apple notes"]  # a lead, not a gate
    assert hits[0].score_parts["time"] == 1.0
    assert 0.0 < hits[1].score_parts["time"] < 1.0
    for hit in hits:
        assert (
            hit.score == pytest.approx(hit.score_parts["fused"], rel=1e-9)
            and hit.score_parts["fused"] > RankingSettings().time_weight * hit.score_parts["time"]
        )


def test_a_query_without_a_time_expression_shows_no_time_part(
    may_and_july: MemoryEngine,
) -> None:
    assert all("time" not in hit.score_parts for hit in may_and_july.query(text="apple"))


def test_time_expressions_are_read_at_the_query_time(may_and_july: MemoryEngine) -> None:
    in_may = may_and_july.query(text="apple notes from yesterday", now=MAY_10 + 86_400)
    in_july = may_and_july.query(text="apple notes from yesterday", now="2023-07-11")
    assert contents(in_may)[0] == "apple notes"
    assert contents(in_july)[0] == "apple apple notes"


def test_a_bad_query_time_is_a_clear_error(may_and_july: MemoryEngine) -> None:
    with pytest.raises(InvalidInput, match="now"):
        may_and_july.query(text="apple yesterday", now="whenever")
