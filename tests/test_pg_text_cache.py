"""The server's text cache: BM25 as the embedded store computes it, kept coherent.

A PostgreSQL store's text query searches a private copy of the records' text
indexed as the SQLite store indexes it, so the same words, statistics and
plans give the same candidates and scores, and the ranking is the SQLite
store's, stop words, stems, diacritics and broad (planned) queries included.
"""

from __future__ import annotations

import itertools
import sqlite3
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prime_memory_folding import MemoryEngine, RankingSettings
from prime_memory_folding.engine import text_cache, vector_cache
from prime_memory_folding.engine.text_cache import TextCache
from prime_memory_folding.storage import sqlite_text

from .backends import examples, twins
from .conftest import FakeClock

#: Words whose stems, stop words, diacritics and joins the two text indexes of
#: PostgreSQL and SQLite treat differently; the cache must treat them as SQLite does.
WORDS = [
    "the", "a", "of", "and", "is", "running", "runs", "ran", "runner", "connection",
    "connected", "connecting", "café", "cafe", "naïve", "e-mail", "email", "snake_case",
    "don't", "3.14", "v2", "https://example.org/x", "user@example.org", "databases",
    "database", "caching", "cached", "flies", "fly", "東京", "decision", "decided",
]  # fmt: skip

texts = st.lists(st.sampled_from(WORDS), min_size=1, max_size=8).map(" ".join)


def _ids(hits: list[Any]) -> list[str]:
    return [hit.record.record_id for hit in hits]


def test_text_queries_rank_as_on_sqlite(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ids and scores equal the SQLite store's, with windows and plans so small
    that every path runs: broad queries planned, gates, lent words, sessions."""
    for setting in (vector_cache.SETTING, text_cache.SETTING):
        monkeypatch.delenv(setting, raising=False)
    examples_run = itertools.count()
    planned = RankingSettings(exact_store=4, lexical_budget=3)
    small = RankingSettings(exact_store=4, lexical_budget=3, window_max=3, nearest_keep=1)

    @examples(pg_url, sqlite=0, postgres=15)
    @given(
        st.lists(
            st.tuples(texts, st.sampled_from([None, "s1"]), st.sampled_from(["a", "b"])),
            min_size=1,
            max_size=30,
        ),
        st.lists(texts, min_size=1, max_size=3),
        st.integers(1, 4),
        st.sampled_from([None, ["a"]]),
    )
    def check(
        written: list[tuple[str, str | None, str]],
        asked: list[str],
        limit: int,
        tags: list[str] | None,
    ) -> None:
        clocks = FakeClock(), FakeClock()
        lite_path = tmp_path / f"lite-{next(examples_run)}.db"
        with twins(lite_path, pg_url, clocks, (planned, small)) as (lite, pg):
            for content, session, tag in written:
                item = {"content": content, "session": session, "tags": [tag]}
                assert lite.store(**item) == pg.store(**item)
                for clock in clocks:
                    clock.advance(60.0)
            for text in asked:
                found = [engine.query(text=text, limit=limit, tags=tags) for engine in (lite, pg)]
                assert _ids(found[1]) == _ids(found[0]), text
                assert [h.score for h in found[1]] == pytest.approx(
                    [h.score for h in found[0]], rel=1e-6, abs=1e-9
                )
                assert [h.score_parts.get("bm25") for h in found[1]] == pytest.approx(
                    [h.score_parts.get("bm25") for h in found[0]], rel=1e-6, abs=1e-9
                )

    check()


def test_another_servers_writes_are_searched_at_the_next_query(pg_url: str) -> None:
    """Text stored, changed and forgotten by another engine after the cache was
    read is found, found by its new words only, and gone at the next query."""
    with (
        MemoryEngine(pg_url, embedder="none") as pg,
        MemoryEngine(pg_url, embedder="none") as other,
    ):
        first = pg.store("the orchard keeps apples")
        assert _ids(pg.query(text="apples")) == [first.record_id]
        added = other.store("a river of apples")
        assert set(_ids(pg.query(text="apples"))) == {first.record_id, added.record_id}
        other.update(added.record_id, content="a river of pears")
        assert _ids(pg.query(text="apples")) == [first.record_id]
        assert _ids(pg.query(text="pears")) == [added.record_id]
        other.forget(first.record_id)
        assert _ids(pg.query(text="apples")) == []


def test_turned_off_the_store_searches_its_own_text_index(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(text_cache.SETTING, "off")
    with MemoryEngine(pg_url, embedder="none") as pg:
        stored = pg.store("the orchard keeps apples")
        pg.store("a river bank")
        assert _ids(pg.query(text="apple")) == [stored.record_id]
        assert pg.query(text="apple")[0].score_parts["bm25"] > 0


# -- the cache alone, over a store in memory ---------------------------------------------


class Source:
    """A store's text and change log, in memory: rows keep their first row id."""

    def __init__(self) -> None:
        self.texts: dict[str, tuple[int, str]] = {}
        self.log: list[str] = []
        self.trimmed = 0  # log entries dropped from the front
        self.rows = itertools.count(1)

    def write(self, rid: str, content: str | None) -> None:
        if content is None:
            self.texts.pop(rid, None)
        else:
            row = self.texts[rid][0] if rid in self.texts else next(self.rows)
            self.texts[rid] = (row, content)
        self.log.append(rid)

    def rows_of(self, ids: Sequence[str]) -> list[tuple[int, str, str]]:
        held = [(self.texts[rid][0], rid, self.texts[rid][1]) for rid in ids if rid in self.texts]
        return sorted(held)

    def text_batches(self) -> Iterator[list[tuple[int, str, str]]]:
        rows = self.rows_of(list(self.texts))
        for start in range(0, len(rows), 3):
            yield rows[start : start + 3]

    def texts_of(self, record_ids: Sequence[str]) -> list[tuple[int, str, str]]:
        return self.rows_of(record_ids)

    def newest_change(self) -> int:
        return len(self.log)

    def changes_since(self, seq: int) -> tuple[list[str], int, bool]:
        return self.log[max(seq, self.trimmed) :], len(self.log), seq < self.trimmed


def fresh_scores(source: Source, text: str, depth: int | None) -> dict[str, float]:
    """BM25 from an index made afresh of the store's text, as the SQLite store makes it."""
    db = sqlite3.connect(":memory:")
    db.execute("CREATE TABLE records (id INTEGER PRIMARY KEY, record_id TEXT, content TEXT)")
    db.executescript(sqlite_text.text_search_schema())
    db.executemany("INSERT INTO records VALUES (?, ?, ?)", source.rows_of(list(source.texts)))
    found = sqlite_text.lexical_scores(
        db, sqlite_text.parse_query(text), depth, budget=1_000, exact_store=1_000
    )
    db.close()
    return found.scores


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["r1", "r2", "r3", "r4", "r5"]),
            st.none() | texts,  # None forgets the record
            st.booleans(),  # ask between writes
            st.booleans(),  # trim the change log first
        ),
        min_size=1,
        max_size=25,
    ),
    texts,
    st.sampled_from([None, 2]),
)
def test_the_cache_searches_as_an_index_made_afresh(
    written: list[tuple[str, str | None, bool, bool]], text: str, depth: int | None
) -> None:
    source = Source()
    cache = TextCache(source)
    for rid, content, ask, trim in written:
        if trim:
            source.trimmed = len(source.log)
        source.write(rid, content)
        if ask:
            got = cache.lexical(text, depth, budget=1_000, exact_store=1_000).scores
            assert got == pytest.approx(fresh_scores(source, text, depth))
            assert len(cache) == len(source.texts)
    got = cache.lexical(text, depth, budget=1_000, exact_store=1_000).scores
    assert got == pytest.approx(fresh_scores(source, text, depth))


def test_a_failed_cache_is_given_up_and_the_store_answers(
    pg_url: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A private database that fails (its disk full, say) is dropped with a
    warning; that query and the next are answered from the store's own index."""
    with MemoryEngine(pg_url, embedder="none") as pg:
        stored = pg.store("the orchard keeps apples")
        pg.store("a river bank")
        assert _ids(pg.query(text="apples")) == [stored.record_id]

        def full(*args: object, **kwargs: object) -> None:
            raise sqlite3.OperationalError("database or disk is full")

        monkeypatch.setattr(text_cache.sqlite_text, "lexical_scores", full)
        with caplog.at_level("WARNING"):
            assert _ids(pg.query(text="apples")) == [stored.record_id]
        assert "text cache failed" in caplog.text
        monkeypatch.undo()
        later = pg.store("apples in a basket")
        assert set(_ids(pg.query(text="apples"))) == {stored.record_id, later.record_id}
