from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from prime_memory_folding import (
    DimensionMismatch,
    InvalidInput,
    InvalidRecordId,
    MemoryEngine,
    NotFound,
)
from prime_memory_folding.core.index import TagQuery

from .backends import dump, emptied, examples, is_postgres
from .conftest import FakeClock


@pytest.fixture
def engine(backend_engine: MemoryEngine) -> MemoryEngine:
    """The engine of these tests runs on each backend."""
    return backend_engine


def test_store_returns_a_complete_record(engine: MemoryEngine, clock: FakeClock) -> None:
    record = engine.store(
        "Use WAL mode",
        domain="Decision",
        tags=["Architecture", "important"],
        importance=0.8,
        metadata={"by": "agent"},
    )
    assert record.domain == "decision"
    assert record.subdomain == "general"
    assert record.tags == ("architecture", "important")
    assert record.importance == 0.8
    assert record.strength == 1.0
    assert record.created_at == record.updated_at == clock.now
    assert record.metadata == {"by": "agent"}
    assert engine.get(record.record_id) == record


def test_storing_the_same_memory_again_reinforces_it(
    engine: MemoryEngine, clock: FakeClock
) -> None:
    first = engine.store_result("same", tags=["a", "b"])
    engine.update(first.record.record_id, strength=0.5)
    clock.advance(60)
    again = engine.store_result("same", tags=["b", "a"], importance=0.9)
    assert first.created and not again.created
    assert again.record.record_id == first.record.record_id
    assert again.record.strength == 0.75
    assert again.record.access_count == 1
    assert again.record.importance == 0.9
    assert again.record.updated_at == clock.now
    assert again.record.created_at == first.record.created_at
    assert engine.stats().records == 1


def test_same_content_with_other_labels_is_another_record(engine: MemoryEngine) -> None:
    a = engine.store("same")
    b = engine.store("same", tags=["x"])
    c = engine.store("same", domain="project")
    assert len({a.record_id, b.record_id, c.record_id}) == 3


def test_instance_key_identifies_a_record_across_content_changes(engine: MemoryEngine) -> None:
    first = engine.store("v1 of the plan", instance_key="plan")
    second = engine.store("v2 of the plan", instance_key="plan")
    assert second.record_id == first.record_id
    assert engine.get(first.record_id).content == "v2 of the plan"


BAD_STORES: list[tuple[str, dict[str, Any]]] = [
    ("content must be a string", {"content": 42}),
    ("empty", {"content": "   "}),
    ("limit", {"content": "x" * 100_001}),
    ("finite", {"content": "x", "vector": [1.0, float("nan")]}),
    ("finite", {"content": "x", "vector": [float("inf"), 1.0]}),
    ("float32", {"content": "x", "vector": [1e300, 1.0]}),
    ("zeros", {"content": "x", "vector": [0.0, 0.0]}),
    ("vector", {"content": "x", "vector": "1,2"}),
    ("importance", {"content": "x", "importance": 1.5}),
    ("importance", {"content": "x", "importance": float("nan")}),
    ("importance", {"content": "x", "importance": "high"}),
    ("empty", {"content": "x", "domain": "  "}),
    ("empty", {"content": "x", "tags": ["ok", " "]}),
    ("list", {"content": "x", "tags": "oops"}),
    ("JSON", {"content": "x", "metadata": {"when": object()}}),
    ("JSON", {"content": "x", "metadata": ["not", "a", "mapping"]}),
]


@pytest.mark.parametrize(("message", "kwargs"), BAD_STORES)
def test_bad_input_is_refused_and_changes_nothing(
    engine: MemoryEngine, backend_store: str, message: str, kwargs: dict[str, Any]
) -> None:
    engine.store("existing", vector=[1.0, 0.0])
    before = dump(backend_store)
    kwargs = dict(kwargs)  # each backend's run gets the parameters whole
    content = kwargs.pop("content")
    with pytest.raises(InvalidInput, match=message):
        engine.store(content, **kwargs)
    assert dump(backend_store) == before


def test_wrong_vector_dimension_names_the_space(engine: MemoryEngine, backend_store: str) -> None:
    engine.store("a", vector=[1.0, 0.0, 0.0])
    before = dump(backend_store)
    with pytest.raises(DimensionMismatch, match=r"custom:3 uses dimension 3"):
        engine.store("b", vector=[1.0, 0.0])
    with pytest.raises(DimensionMismatch):
        engine.query(vector=[1.0, 0.0])
    assert dump(backend_store) == before


def test_store_many_is_all_or_nothing(engine: MemoryEngine, backend_store: str) -> None:
    before = dump(backend_store)
    with pytest.raises(InvalidInput, match="item 2"):
        engine.store_many([{"content": "a"}, "b", {"content": ""}])
    assert dump(backend_store) == before
    records = engine.store_many(
        [{"content": "a", "tags": ["t"]}, "b", {"content": "a", "tags": ["t"]}]
    )
    assert records[0].record_id == records[2].record_id
    assert engine.stats().records == 2


def test_store_many_rejects_unknown_fields(engine: MemoryEngine) -> None:
    with pytest.raises(InvalidInput, match="unknown field"):
        engine.store_many([{"content": "a", "colour": "red"}])


def test_get_and_forget(engine: MemoryEngine) -> None:
    record = engine.store("to forget")
    assert engine.forget(record.record_id.upper()) == record
    with pytest.raises(NotFound):
        engine.get(record.record_id)
    with pytest.raises(NotFound):
        engine.forget(record.record_id)
    with pytest.raises(InvalidRecordId):
        engine.get("not-an-id")


def test_update_keeps_identity_and_recomputes_tags(engine: MemoryEngine, clock: FakeClock) -> None:
    record = engine.store("draft", tags=["a"])
    clock.advance(5)
    updated = engine.update(
        record.record_id,
        content="final",
        tags=["b", "c"],
        importance=0.9,
        metadata={"v": 2},
        vector=[0.0, 1.0],
    )
    assert updated.record_id == record.record_id and updated.address == record.address
    primes = engine.stats().registries["tag"]
    assert updated.tag_product == primes["b"] * primes["c"]
    assert updated.updated_at == clock.now and updated.created_at == record.created_at
    assert engine.get(record.record_id) == updated
    assert engine.match_ids(tags=["a"]) == []
    assert engine.match_ids(tags=["b"]) == [record.record_id]
    assert engine.update(record.record_id, vector=None).vector is None


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"domain": "other"}, "address"),
        ({"colour": "red"}, "updatable"),
        ({"strength": 2}, "strength"),
        ({"content": ""}, "empty"),
    ],
)
def test_bad_update_changes_nothing(
    engine: MemoryEngine, backend_store: str, changes: dict[str, Any], message: str
) -> None:
    record = engine.store("x")
    before = dump(backend_store)
    with pytest.raises(InvalidInput, match=message):
        engine.update(record.record_id, **changes)
    assert dump(backend_store) == before


def test_update_into_a_duplicate_is_refused(engine: MemoryEngine) -> None:
    engine.store("one")
    two = engine.store("two")
    with pytest.raises(InvalidInput, match="already holds"):
        engine.update(two.record_id, content="one")


def test_text_query_finds_stored_text(engine: MemoryEngine) -> None:
    engine.store("anything at all")
    engine.store("something else")
    hits = engine.query(text="anything")
    assert hits[0].record.content == "anything at all"
    assert "bm25" in hits[0].score_parts


@pytest.mark.parametrize("limit", [-1, 10_001, 2.5, True, "3"])
def test_bad_limit_is_refused(engine: MemoryEngine, limit: Any) -> None:
    with pytest.raises(InvalidInput, match="limit"):
        engine.query(limit=limit)


def test_limit_zero_returns_nothing(engine: MemoryEngine) -> None:
    engine.store("x")
    assert engine.query(limit=0) == []


def test_salience_orders_hits_and_explains_scores(engine: MemoryEngine, clock: FakeClock) -> None:
    low = engine.store("low", importance=0.2)
    clock.advance(1)
    high = engine.store("high", importance=0.9)
    clock.advance(1)
    newer_low = engine.store("newer low", importance=0.2)
    hits = engine.query()
    assert [h.record.record_id for h in hits] == [
        high.record_id,
        newer_low.record_id,
        low.record_id,
    ]
    # Strength is decayed to the query time: two seconds of a long half-life.
    assert hits[0].score_parts == pytest.approx(
        {"importance": 0.9, "strength": 1.0, "salience": 0.9}, rel=1e-6
    )
    assert hits[0].score == pytest.approx(0.9, rel=1e-6)


def test_vector_query_ranks_by_cosine_within_gates(engine: MemoryEngine) -> None:
    a = engine.store("a", domain="project", vector=[1.0, 0.0])
    b = engine.store("b", domain="project", vector=[0.6, 0.8])
    engine.store("c", domain="memory", vector=[1.0, 0.0])
    engine.store("no vector", domain="project")
    hits = engine.query(domain="project", vector=[1.0, 0.1])
    assert [h.record.record_id for h in hits] == [a.record_id, b.record_id]
    assert math.isclose(hits[0].score, 1.0 / math.hypot(1.0, 0.1), rel_tol=1e-6)
    assert hits[0].score_parts["cosine"] == hits[0].score
    assert len(engine.query(vector=[1.0, 0.1], limit=2)) == 2


def test_reopen_returns_identical_records(backend_store: str, clock: FakeClock) -> None:
    with MemoryEngine(backend_store, clock=clock) as memory:
        stored = [
            memory.store(f"note {i}", tags=[f"t{i % 3}"], vector=[i + 1.0, 0.5], metadata={"i": i})
            for i in range(20)
        ]
        before = memory.query(tags=["t1"], limit=50)
    with MemoryEngine(backend_store, clock=clock) as memory:
        assert [memory.get(r.record_id) for r in stored] == stored
        assert memory.query(tags=["t1"], limit=50) == before


record_spec = st.fixed_dictionaries(
    {
        "content": st.text(min_size=1, max_size=40).filter(lambda s: s.strip() and "\x00" not in s),
        "tags": st.lists(st.sampled_from(["a", "b", "c", "Ünï", "emoji 🚀"]), max_size=3),
        "domain": st.sampled_from(["memory", "project", "日本"]),
        "importance": st.floats(min_value=0, max_value=1),
        "metadata": st.dictionaries(
            st.text(max_size=5), st.integers() | st.text(max_size=5), max_size=2
        ),
    }
)


def test_reopen_is_identical_for_any_records(
    tmp_path_factory: pytest.TempPathFactory, backend_store: str
) -> None:
    @examples(backend_store, sqlite=25, postgres=15)
    @given(st.lists(record_spec, min_size=1, max_size=15))
    def check(specs: list[dict[str, Any]]) -> None:
        if is_postgres(backend_store):
            path = emptied(backend_store)
        else:
            path = str(tmp_path_factory.mktemp("reopen") / "m.db")
        with MemoryEngine(path) as memory:
            records = memory.store_many(specs)
            ids = {r.record_id for r in records}
            latest = {r.record_id: memory.get(r.record_id) for r in records}
        with MemoryEngine(path) as memory:
            assert memory.stats().records == len(ids)
            for rid, record in latest.items():
                assert memory.get(rid) == record

    check()


def test_closed_engine_says_so(backend_store: str) -> None:
    memory = MemoryEngine(backend_store)
    memory.close()
    with pytest.raises(Exception, match="closed"):
        memory.store("x")


def test_default_store_lives_under_prime_memory_home(memory_home: Path) -> None:
    with MemoryEngine() as memory:
        memory.store("x")
        assert Path(memory.path) == memory_home / "memory.db"
    assert (memory_home / "memory.db").exists()


def test_stats_counts_domains_and_tags(engine: MemoryEngine) -> None:
    engine.store("a", domain="project", tags=["x", "y"])
    engine.store("b", domain="project", tags=["x"])
    engine.store("c", tags=["y"])
    stats = engine.stats()
    assert stats.records == 3
    assert stats.domains == {"memory": 1, "project": 2}
    assert stats.tags == {"x": 2, "y": 2}
    assert stats.store_bytes > 0
    assert stats.embedding_space is None


def test_a_label_gate_sees_labels_added_after_it_first_matched_nothing(
    engine: MemoryEngine, backend_store: str
) -> None:
    engine.store("known", tags=["alpha"])
    assert engine.match_ids(domain="ops") == []
    assert engine.match_ids(any_tags=["alpha", "beta"]) == engine.match_ids(tags=["alpha"])
    assert engine.match_ids(tags=["beta"]) == []

    added = engine.store("added here", tags=["beta"])
    assert engine.match_ids(tags=["beta"]) == [added.record_id]
    assert set(engine.match_ids(any_tags=("alpha", "beta"))) == {
        *engine.match_ids(tags=["alpha"]),
        added.record_id,
    }

    with MemoryEngine(backend_store) as other:
        elsewhere = other.store("added by another connection", domain="ops", tags=["gamma"])
    assert engine.match_ids(domain="ops") == [elsewhere.record_id]
    assert engine.match_ids(tags=["gamma"], exclude_tags=["beta"]) == [elsewhere.record_id]


@pytest.mark.parametrize(
    "gates",
    [{"tags": "alpha"}, {"any_tags": "alpha"}, {"tags": [["alpha"]]}, {"domain": ["ops"]}],
)
def test_a_malformed_label_gate_is_refused_every_time(
    engine: MemoryEngine, gates: dict[str, Any]
) -> None:
    engine.store("known", tags=["alpha"])
    for _ in range(2):
        with pytest.raises(InvalidInput):
            engine.match_ids(**gates)


writes = st.lists(
    st.tuples(
        st.integers(0, 12),  # which content: repeats reinforce an existing record
        st.sampled_from(["memory", "project", "task"]),
        st.lists(st.sampled_from(["a", "b", "c", "d"]), max_size=3, unique=True),
        st.sampled_from([0.1, 0.5, 0.9, 1.0]),
        st.sampled_from([None, "working", "permanent", "bogus"]),
        st.booleans(),  # with a vector
        st.floats(0, 5 * 86_400),  # seconds until this write
    ),
    min_size=1,
    max_size=25,
)


def _index_state(memory: MemoryEngine) -> dict[str, tuple[Any, ...]]:
    index = memory._index
    state = {}
    live = index.select_ids(TagQuery())  # no gate: every live record
    assert len(live) == len(index)
    for rid in live:
        row = index.row_of(rid)
        assert row is not None
        vector = index._vectors[row].tolist() if index._has_vector[row] else None
        state[rid] = (
            index._entry_keys[row],
            index._tag_product[row],
            float(index._importance[row]),
            float(index._strength[row]),
            float(index._updated[row]),
            float(index._reinforced[row]),
            float(index._half_life[row]),
            vector,
        )
    return state


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(writes)
def test_opening_a_store_builds_the_index_its_writer_holds(
    tmp_path_factory: pytest.TempPathFactory,
    steps: list[tuple[int, str, list[str], float, str | None, bool, float]],
) -> None:
    """Loading a whole store at once gives what the writer built record by record."""
    path = tmp_path_factory.mktemp("load") / "m.db"
    clock = FakeClock()
    with MemoryEngine(path, clock=clock, embedder="none") as writer:
        for number, domain, tags, importance, tier, with_vector, wait in steps:
            clock.advance(wait)
            writer.store(
                f"note {number}",
                domain=domain,
                tags=tags,
                importance=importance,
                vector=[1.0, float(number)] if with_vector else None,
                metadata={} if tier is None else {"tier": tier},
            )
        first = writer.match_ids()[0]
        clock.advance(3_600)
        writer.update(first, strength=0.7)
        expected = _index_state(writer)
        clock.advance(10 * 86_400)
        gated = {
            (domain, tag): writer.match_ids(domain=domain, tags=[tag], min_strength=0.4)
            for domain in ("memory", "project", "task")
            for tag in "abcd"
        }
    with MemoryEngine(path, clock=clock, embedder="none") as reader:
        assert _index_state(reader) == expected
        for (domain, tag), ids in gated.items():
            assert reader.match_ids(domain=domain, tags=[tag], min_strength=0.4) == ids


def test_opening_a_store_where_every_record_has_a_vector(tmp_path: Path) -> None:
    """Past 1,024 records with a vector each, the loaded matrix is kept as it is read."""
    path = tmp_path / "m.db"
    items = [
        {"content": f"note {i}", "tags": [f"t{i % 5}"], "vector": [1.0 + i, float(i % 7), 2.0]}
        for i in range(1_100)
    ]
    with MemoryEngine(path, embedder="none") as writer:
        writer.store_many(items)
        expected = _index_state(writer)
        hits = writer.query(vector=[1.0, 3.0, 0.5], limit=20)
    with MemoryEngine(path, embedder="none") as reader:
        assert reader._index._vectors is not None and reader._index._vectors.flags.writeable
        loaded = _index_state(reader)
        assert loaded.keys() == expected.keys()
        for rid, state in expected.items():
            assert loaded[rid][:-1] == state[:-1]
            assert np.allclose(loaded[rid][-1], state[-1], rtol=1e-6)
        assert [h.record.record_id for h in reader.query(vector=[1.0, 3.0, 0.5], limit=20)] == [
            h.record.record_id for h in hits
        ]
        added = reader.store("one more", vector=[0.0, 1.0, 0.0])
        assert reader.query(vector=[0.0, 1.0, 0.0], limit=1)[0].record.record_id == added.record_id


def test_a_storage_that_takes_no_sql_is_refused_at_open() -> None:
    class Bare:
        path = "bare"

    with pytest.raises(InvalidInput, match="takes SQL"):
        MemoryEngine(storage=Bare())  # type: ignore[arg-type]


def test_a_verbatim_write_is_kept_unless_it_is_a_dry_run_and_the_index_takes_it_in(
    store_path: Path,
) -> None:
    with MemoryEngine(store_path, embedder="none") as memory:
        kept = memory.store("one note").record_id

        def forget(storage: Any) -> int:
            storage.delete([kept])
            return 1

        assert memory.write_verbatim(forget, dry_run=True) == 1
        assert memory.get(kept).content == "one note"
        assert memory.write_verbatim(forget) == 1
        assert memory.match_ids() == [] and memory.stats().records == 0
        with pytest.raises(NotFound):
            memory.get(kept)
