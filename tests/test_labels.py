from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from prime_memory_folding import InvalidInput, StoreError
from prime_memory_folding.core.index import TagQuery
from prime_memory_folding.core.labels import LabelRegistry
from prime_memory_folding.core.primes import Kind


class Store:
    """A registry table that another writer may add to, counting reads."""

    def __init__(self) -> None:
        self.tables: dict[Kind, dict[str, int]] = {
            Kind.DOMAIN: {"memory": 2},
            Kind.SUBDOMAIN: {"general": 2},
            Kind.TAG: {"alpha": 2, "beta": 3},
        }
        self.reads = 0

    def load(self) -> dict[Kind, dict[str, int]]:
        self.reads += 1
        return {kind: dict(table) for kind, table in self.tables.items()}


@pytest.fixture
def store() -> Store:
    return Store()


@pytest.fixture
def registry(store: Store) -> LabelRegistry:
    labels = LabelRegistry(store.load, "test.db")
    labels.reload()
    return labels


def test_a_label_another_writer_added_is_found_by_reloading(
    store: Store, registry: LabelRegistry
) -> None:
    assert registry.get(Kind.TAG, "gamma") is None
    store.tables[Kind.TAG]["gamma"] = 5
    assert registry.get(Kind.TAG, "gamma") == 5
    assert registry.labels[Kind.TAG][5] == "gamma"


def test_a_known_label_is_answered_without_reading_the_store(
    store: Store, registry: LabelRegistry
) -> None:
    reads = store.reads
    assert registry.get(Kind.TAG, "beta") == 3
    assert registry.tag_primes(("beta", "alpha")) == (3, 2)
    assert store.reads == reads


def test_a_stored_label_without_a_prime_means_a_damaged_store(registry: LabelRegistry) -> None:
    with pytest.raises(StoreError, match=r"test\.db.*'delta'.*damaged"):
        registry.known(Kind.TAG, "delta")
    with pytest.raises(StoreError, match="damaged"):
        registry.tag_primes(("alpha", "delta"))


def test_gates_turn_labels_into_primes(registry: LabelRegistry) -> None:
    assert registry.gates("Memory", None, ["Beta", "alpha"], ["gamma", "beta"], ["alpha"]) == (
        TagQuery(domain_prime=2, all_of=(2, 3), any_of=(3,), none_of=(2,))
    )


@pytest.mark.parametrize(
    "gates",
    [
        ("ops", None, [], [], []),
        (None, "code", [], [], []),
        (None, None, ["alpha", "gamma"], [], []),
        (None, None, [], ["gamma"], []),
    ],
)
def test_an_unknown_required_label_means_nothing_can_match(
    registry: LabelRegistry, gates: tuple[object, ...]
) -> None:
    assert registry.gates(*gates) is None  # type: ignore[arg-type]


def test_the_gate_memo_forgets_once_this_process_adds_a_label(registry: LabelRegistry) -> None:
    assert registry.gates(None, None, ["gamma"], [], []) is None
    registry.add({Kind.TAG: {"gamma": 5}})
    assert registry.gates(None, None, ["gamma"], [], []) == TagQuery(all_of=(5,))


def test_the_gate_memo_forgets_once_a_record_brings_another_writers_label(
    store: Store, registry: LabelRegistry
) -> None:
    # An unknown optional label is left out of the gate, and that is memoised...
    assert registry.gates(None, None, [], ["alpha", "gamma"], ["gamma"]) == TagQuery(any_of=(2,))
    store.tables[Kind.TAG]["gamma"] = 5
    # ...until a record carrying the label reaches the index, which looks it up.
    assert registry.tag_primes(("gamma",)) == (5,)
    assert registry.gates(None, None, [], ["alpha", "gamma"], ["gamma"]) == TagQuery(
        any_of=(2, 5), none_of=(5,)
    )


@pytest.mark.parametrize("tags", ["alpha", [["alpha"]], [None]])
def test_a_malformed_gate_is_refused_every_time(registry: LabelRegistry, tags: object) -> None:
    for _ in range(2):
        with pytest.raises(InvalidInput):
            registry.gates(None, None, tags, [], [])  # type: ignore[arg-type]


LABELS = st.lists(st.sampled_from(["alpha", "beta", "gamma", "delta", "ALPHA "]), max_size=3)


@given(
    steps=st.lists(
        st.one_of(
            st.tuples(st.just("ask"), LABELS, LABELS, LABELS, st.booleans()),
            st.tuples(st.just("add"), st.sampled_from(["gamma", "delta"])),
        ),
        max_size=30,
    )
)
def test_the_gate_memo_never_changes_an_answer(steps: list[tuple[object, ...]]) -> None:
    store = Store()
    registry = LabelRegistry(store.load, "test.db")
    registry.reload()
    fresh = LabelRegistry(store.load, "test.db")
    for step in steps:
        if step[0] == "add":
            label = str(step[1])
            if label not in store.tables[Kind.TAG]:
                store.tables[Kind.TAG][label] = {"gamma": 5, "delta": 7}[label]
            # The engine looks up the label of every record it indexes.
            registry.known(Kind.TAG, label)
            continue
        _, tags, any_tags, exclude, as_tuples = step
        args = [tuple(x) if as_tuples else x for x in (tags, any_tags, exclude)]  # type: ignore[union-attr]
        fresh.reload()
        assert registry.gates(None, None, *args) == fresh.gates(None, None, *args)
