"""A record's vector reads like the tuple of its float32 values."""

from __future__ import annotations

import pickle
import struct

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from prime_memory_folding import MemoryEngine, Vector


@pytest.fixture
def engine(backend_engine: MemoryEngine) -> MemoryEngine:
    """The engine of these tests runs on each backend."""
    return backend_engine


float32s = st.floats(width=32, allow_nan=False, allow_infinity=False)


@given(st.lists(float32s, max_size=64))
def test_a_vector_behaves_like_the_tuple_of_its_values(values: list[float]) -> None:
    vector = Vector(values)
    as_tuple = tuple(values)
    assert vector == as_tuple and vector == list(values) and as_tuple == vector
    assert hash(vector) == hash(as_tuple)
    assert len(vector) == len(values) and list(vector) == values
    assert vector[1:3] == as_tuple[1:3]
    if values:
        assert vector[-1] == values[-1]
    assert np.array_equal(np.asarray(vector), np.asarray(values, dtype=np.float32))
    assert pickle.loads(pickle.dumps(vector)) == vector
    blob = struct.pack(f"<{len(values)}f", *values)
    assert Vector.from_blob(blob) == vector
    assert Vector(np.asarray(values, dtype=np.float32)) == vector


def test_vectors_differ_when_a_value_does() -> None:
    assert Vector([1.0, 2.0]) != Vector([1.0, 2.5])
    assert Vector([1.0, 2.0]) != (1.0, 2.0, 3.0)
    assert Vector([1.0]) != "1.0"


def test_records_carry_their_vector_compactly(engine: MemoryEngine) -> None:
    stored = engine.store("with a vector", vector=[0.5, 0.25, 1.0])
    assert isinstance(stored.vector, Vector)
    assert stored.vector == (0.5, 0.25, 1.0)
    assert engine.get(stored.record_id) == stored
