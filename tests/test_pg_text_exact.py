"""A text query on PostgreSQL ranks what a window of every gated record would.

Its window holds only the candidates the fusion can rank (the BM25 candidates,
the nearest vectors, the records of the words the first hits lend, and their
session neighbours), not every gated record. With windows lowered so that
this path always runs, and the built-in model's vectors, a hybrid text query
answers as the SQLite store's, which ranks over every record: here with
PostgreSQL's own text index (the text cache off), on words both index alike.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from prime_memory_folding import MemoryEngine, RankingSettings
from prime_memory_folding.engine import text_cache, vector_cache

from .backends import examples, twins
from .conftest import FakeClock

#: Words that both backends' stemmers keep alike, and no stop word.
WORDS = [
    "apple", "river", "guitar", "ocean", "laptop", "mountain", "zebra", "harbour",
    "violin", "desert", "pencil", "rocket", "garden", "tiger", "bridge", "candle",
    "anchor", "basket", "cactus", "dolphin", "engine", "falcon", "glacier", "hammer",
    "igloo", "jacket", "kernel", "lantern", "magnet", "napkin", "orchid", "parrot",
    "quartz", "ribbon", "saddle", "tunnel", "umbrella", "velvet", "walrus", "yogurt",
]  # fmt: skip

records = st.lists(
    st.tuples(
        st.lists(st.sampled_from(WORDS), min_size=1, max_size=5),
        st.sampled_from([None, "s1", "s2"]),
        st.sampled_from(["project:a", "global"]),
        st.sampled_from(["a", "b"]),
    ),
    min_size=1,
    max_size=40,
)


def _ids(hits: list[Any]) -> list[str]:
    return [hit.record.record_id for hit in hits]


def test_text_queries_rank_over_candidates_as_over_every_record(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(vector_cache.SETTING, raising=False)
    # PostgreSQL's own text index, where both see the same words (with the text
    # cache on, the default, tests/test_pg_text_cache.py checks every word).
    monkeypatch.setenv(text_cache.SETTING, "off")
    examples_run = itertools.count()
    small = RankingSettings(window_max=3, nearest_keep=1)

    @examples(pg_url, sqlite=0, postgres=15)
    @given(
        records,
        st.lists(st.lists(st.sampled_from(WORDS), min_size=1, max_size=2), min_size=1, max_size=3),
        st.integers(1, 3),
        st.sampled_from([None, ["a"]]),
    )
    def check(
        written: list[tuple[list[str], str | None, str, str]],
        asked: list[list[str]],
        limit: int,
        tags: list[str] | None,
    ) -> None:
        clocks = FakeClock(), FakeClock()
        lite_path = tmp_path / f"lite-{next(examples_run)}.db"
        with twins(lite_path, pg_url, clocks, (RankingSettings(), small)) as (lite, pg):
            for words, session, scope, tag in written:
                item = {"content": " ".join(words), "session": session, "scope": scope}
                assert lite.store(**item, tags=[tag]) == pg.store(**item, tags=[tag])
                for clock in clocks:
                    clock.advance(60.0)
            contents = [set(words) for words, *_ in written]
            for words in asked:
                # Where a word is in more than half of the records, FTS5 still
                # scores it a little and PostgreSQL leaves it out.
                if any(sum(w in c for c in contents) * 2 > len(contents) for w in words):
                    continue
                text = " ".join(words)
                found = [
                    engine.query(text=text, limit=limit, scopes=["*"], tags=tags)
                    for engine in (lite, pg)
                ]
                assert _ids(found[1]) == _ids(found[0]), text
                assert [h.score for h in found[1]] == pytest.approx(
                    [h.score for h in found[0]], rel=1e-5, abs=1e-9
                )

    check()


def test_the_cache_follows_writes_deletes_and_updates(pg_url: str) -> None:
    """Vectors stored, changed and forgotten after the cache was read are
    found, re-scored and gone at the next query, on the same server."""
    small = RankingSettings(window_max=1, nearest_keep=1)
    with (
        MemoryEngine(pg_url, ranking=small) as pg,
        MemoryEngine(pg_url, ranking=small) as other,
    ):
        first = pg.store("apple orchard", vector=[1.0, 0.0])
        pg.store("river bank", vector=[0.0, 1.0])
        assert _ids(pg.query(vector=[1.0, 0.1], limit=1)) == [first.record_id]
        nearer = other.store("apple tree", vector=[1.0, 0.05])
        assert _ids(pg.query(vector=[1.0, 0.05], limit=1)) == [nearer.record_id]
        other.update(nearer.record_id, vector=[0.0, -1.0])
        assert _ids(pg.query(vector=[1.0, 0.05], limit=1)) == [first.record_id]
        other.forget(first.record_id)
        hits = pg.query(vector=[1.0, 0.05], limit=2)
        assert first.record_id not in _ids(hits)
        assert len(hits) == 2
