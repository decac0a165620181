"""The same records on both backends answer every query the same.

One hypothesis property writes the same records, at the same moments, into an
SQLite store and a PostgreSQL store, then asks both the same queries: gates,
salience, vectors and text. The PostgreSQL store ranks in small windows
(pushdown.py); the windows' limits are lowered here, so that the salience
reads stop early and vector queries scan in batches, as they do in a large store.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from prime_memory_folding import MemoryEngine, RankingSettings
from prime_memory_folding.engine import pushdown, text_cache, vector_cache

from .backends import emptied, examples
from .conftest import FakeClock

WORDS = ["apple", "river", "guitar", "ocean", "laptop", "mountain", "zebra", "harbour"]
SCOPES = ["project:a", "project:b", "global"]
TAGS = ["a", "b", "c"]

writes = st.lists(
    st.tuples(
        st.lists(st.sampled_from(WORDS), min_size=1, max_size=4),
        st.sampled_from(["memory", "task"]),
        st.sets(st.sampled_from(TAGS), max_size=2),
        st.sampled_from([0.1, 0.5, 0.9]),
        st.one_of(st.none(), st.tuples(st.integers(-3, 3), st.integers(1, 3))),
        st.sampled_from(SCOPES),
        st.sampled_from([0.0, 60.0, 86_400.0 * 3]),
        st.one_of(st.none(), st.sampled_from([0.2, 0.6])),
    ),
    min_size=1,
    max_size=30,
)
gates = st.fixed_dictionaries(
    {
        "domain": st.sampled_from([None, "memory", "task"]),
        "tags": st.sets(st.sampled_from(TAGS), max_size=1).map(sorted),
        "exclude_tags": st.sets(st.sampled_from(TAGS), max_size=1).map(sorted),
        "min_strength": st.sampled_from([0.0, 0.3]),
        "scopes": st.sampled_from([None, ["*"], ["project:b"]]),
        "since": st.sampled_from([None, "2d"]),
    }
)


@pytest.fixture(params=["small windows", "small windows, no caches", "default windows"])
def windows(request: pytest.FixtureRequest) -> Iterator[RankingSettings]:
    """The PostgreSQL windows' limits: lowered, so every path of pushdown.py runs
    (without the vector cache, vector queries scan the gated vectors in batches;
    without the text cache, text queries search PostgreSQL's own text index)."""
    if request.param == "default windows":
        yield RankingSettings()
        return
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(pushdown, "SALIENCE_FIRST", 1)
        patch.setattr(pushdown, "NEAREST_FIRST", 1)
        if request.param.endswith("no caches"):
            patch.setenv(vector_cache.SETTING, "off")
            patch.setenv(text_cache.SETTING, "off")
        yield RankingSettings(window_max=3)


def _same(a: list[Any], b: list[Any]) -> None:
    assert [h.record.record_id for h in a] == [h.record.record_id for h in b]
    assert [h.score for h in a] == pytest.approx([h.score for h in b], rel=1e-6, abs=1e-9)


def test_both_backends_answer_alike(windows: RankingSettings, pg_url: str, tmp_path: Path) -> None:
    examples_run = itertools.count()

    @examples(pg_url, sqlite=0, postgres=12)
    @given(writes, st.lists(gates, min_size=1, max_size=3), st.integers(1, 12), st.data())
    def check(
        steps: list[tuple[Any, ...]], asked: list[dict[str, Any]], limit: int, data: st.DataObject
    ) -> None:
        sqlite_clock, pg_clock = FakeClock(), FakeClock()
        lite_path = tmp_path / f"lite-{next(examples_run)}.db"  # a new file every example
        with (
            MemoryEngine(lite_path, clock=sqlite_clock, scope="project:a") as lite,
            MemoryEngine(emptied(pg_url), clock=pg_clock, scope="project:a", ranking=windows) as pg,
        ):
            for words, domain, tags, importance, vector, scope, wait, strength in steps:
                for clock in (sqlite_clock, pg_clock):
                    clock.advance(wait)
                item = {
                    "content": " ".join(words),
                    "domain": domain,
                    "tags": sorted(tags),
                    "importance": importance,
                    "vector": None if vector is None else [float(vector[0]), float(vector[1])],
                    "scope": scope,
                }
                a, b = lite.store(**item), pg.store(**item)
                assert a == b
                if strength is not None:
                    assert lite.update(a.record_id, strength=strength) == pg.update(
                        b.record_id, strength=strength
                    )
            for clock in (sqlite_clock, pg_clock):
                clock.advance(86_400.0 * 5)
            for gate in asked:
                assert lite.match_ids(**gate) == pg.match_ids(**gate)
                _same(lite.query(limit=limit, **gate), pg.query(limit=limit, **gate))
                vector = data.draw(st.tuples(st.integers(-3, 3), st.integers(1, 3)))
                query = [float(vector[0]), float(vector[1])]
                if any(v is not None for *_, v, _s, _w, _st in steps):
                    _same(
                        lite.query(vector=query, limit=limit, **gate),
                        pg.query(vector=query, limit=limit, **gate),
                    )
                _same(
                    lite.query(limit=limit, max_tokens=100, **gate),
                    pg.query(limit=limit, max_tokens=100, **gate),
                )
            # Text: the same BM25 where every query word is in at most half of
            # the records (FTS5 gives a commoner word almost nothing, and
            # PostgreSQL leaves it out), over every scope, so that neighbours agree.
            contents = [set(lite.get(rid).content.split()) for rid in lite.match_ids(scopes=["*"])]
            for word in data.draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=2)):
                held = sum(word in c for c in contents)
                lite_hits = lite.query(text=word, scopes=["*"], limit=100)
                pg_hits = pg.query(text=word, scopes=["*"], limit=100)
                if held == 0:
                    assert lite_hits == pg_hits == []
                elif held * 2 <= len(contents):
                    _same(lite_hits, pg_hits)

    check()
