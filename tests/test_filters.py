from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import pytest

from prime_memory_folding import Filters, InvalidInput, MemoryEngine
from tests.conftest import FakeClock

DAY = 86_400.0


def test_filters_are_keyword_only_frozen_and_hashable() -> None:
    with pytest.raises(TypeError):
        Filters("decision")  # type: ignore[misc]
    gates = Filters(domain="decision", tags=["sqlite", "wal"], scopes=["global"])
    with pytest.raises(dataclasses.FrozenInstanceError):
        gates.domain = "bug"  # type: ignore[misc]
    assert gates.tags == ("sqlite", "wal")
    assert gates.scopes == ("global",)
    assert gates == Filters(domain="decision", tags=("sqlite", "wal"), scopes=("global",))
    assert len({gates, Filters(domain="decision", tags=["sqlite", "wal"], scopes=["global"])}) == 1


def test_no_filters_pass_every_record_the_read_sees() -> None:
    assert Filters() == Filters(
        domain=None, tags=(), any_tags=(), exclude_tags=(), min_strength=0.0, scopes=None
    )


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"domain": 3}, "domain must be a string"),
        ({"domain": "   "}, "domain '   ' is empty"),
        ({"subdomain": ""}, "subdomain '' is empty"),
        ({"tags": "sqlite"}, "tags must be a list of tags, not one string"),
        ({"any_tags": ["ok", 5]}, "tag must be a string"),
        ({"exclude_tags": 7}, "exclude_tags must be a list of tags"),
        ({"exclude_tags": [f"t{i}" for i in range(33)]}, "exclude_tags has 33 tags"),
        ({"min_strength": 1.5}, "min_strength must be from 0 to 1"),
        ({"min_strength": "high"}, "min_strength must be a number"),
        ({"scopes": "global"}, "scopes must be a list of scope names, not one string"),
        ({"scopes": ["galaxy:far"]}, "galaxy:far"),
        ({"scopes": [None]}, "scope must be a string"),
        ({"since": "whenever"}, "since 'whenever' is not a time"),
        ({"until": True}, "until"),
        ({"now": "soon"}, "now 'soon' is not a time"),
    ],
)
def test_a_bad_field_is_refused_when_the_filters_are_made(
    fields: dict[str, Any], named: str
) -> None:
    with pytest.raises(InvalidInput, match=named):
        Filters(**fields)


def _store_some(engine: MemoryEngine, clock: FakeClock) -> None:
    engine.store("WAL lets readers go on", domain="decision", tags=["sqlite", "wal"])
    engine.store("One writer at a time", domain="decision", tags=["sqlite"], scope="user:me")
    clock.advance(10 * DAY)
    engine.store("Flaky test on CI", domain="bug", tags=["ci"], importance=0.9)
    engine.store("Deploy on Fridays, never", domain="decision", tags=["deploy"])


@pytest.mark.parametrize(
    "gates",
    [
        {"domain": "decision"},
        {"tags": ["sqlite"], "exclude_tags": ["wal"], "scopes": ["*"]},
        {"any_tags": ["ci", "deploy"], "min_strength": 0.2},
        {"since": "3d"},
        {"until": "3d", "scopes": ["global", "user:me"]},
        {"scopes": ["project:nowhere/at-all"]},
    ],
)
def test_filters_gate_query_match_ids_and_browse_as_the_keywords_do(
    engine: MemoryEngine, clock: FakeClock, gates: dict[str, Any]
) -> None:
    _store_some(engine, clock)
    by_value = Filters(**gates)

    def ids(hits: Any) -> list[str]:
        return [hit.record.record_id for hit in hits]

    assert ids(engine.query(filters=by_value)) == ids(engine.query(**gates))
    assert engine.match_ids(filters=by_value) == engine.match_ids(**gates)
    if not {"since", "until"} & gates.keys():  # browse has no keywords for those
        assert ids(engine.browse(filters=by_value).hits) == ids(engine.browse(**gates).hits)


def test_browse_reads_the_filters_times(engine: MemoryEngine, clock: FakeClock) -> None:
    old = engine.store("old and weak", importance=0.1).record_id
    clock.advance(3 * DAY)  # a working memory halves each day
    fresh = engine.store("fresh", importance=0.1).record_id
    recent = engine.browse(filters=Filters(since="1d"))
    assert [h.record.record_id for h in recent.hits] == [fresh]
    back_then = engine.browse(filters=Filters(until="1d", now=clock.now - DAY))
    assert [h.record.record_id for h in back_then.hits] == [old]
    assert back_then.hits[0].score_parts["strength"] == pytest.approx(0.25)


@pytest.mark.parametrize(
    ("call", "keyword"),
    [
        (lambda e, f: e.query("sqlite", filters=f, domain="decision"), "domain"),
        (lambda e, f: e.query(filters=f, now="1d"), "now"),
        (lambda e, f: e.query(filters=f, min_strength=0.5), "min_strength"),
        (lambda e, f: e.match_ids(filters=f, tags=["x"]), "tags"),
        (lambda e, f: e.match_ids(filters=f, scopes=[]), "scopes"),
        (lambda e, f: e.browse(filters=f, any_tags=("x",)), "any_tags"),
    ],
)
def test_filters_and_a_gate_keyword_at_once_are_refused_naming_both(
    engine: MemoryEngine, call: Callable[[MemoryEngine, Filters], object], keyword: str
) -> None:
    with pytest.raises(InvalidInput, match=f"filters and {keyword} were both given"):
        call(engine, Filters(domain="decision"))


def test_gate_keywords_left_at_their_defaults_go_with_filters(engine: MemoryEngine) -> None:
    record = engine.store("kept", domain="decision")
    gates = Filters(domain="decision")
    found = engine.query(filters=gates, tags=[], min_strength=0, scopes=None)
    assert [hit.record.record_id for hit in found] == [record.record_id]


def test_filters_must_be_a_filters(engine: MemoryEngine) -> None:
    with pytest.raises(InvalidInput, match="filters must be a Filters, got dict"):
        engine.query(filters={"domain": "decision"})  # type: ignore[arg-type]
