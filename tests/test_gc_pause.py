"""The cyclic collector is paused inside bulk work and restored after it."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from prime_memory_folding import MemoryEngine
from prime_memory_folding.fold.gc_pause import paused_gc


@pytest.fixture(autouse=True)
def collector_on() -> Iterator[None]:
    was = gc.isenabled()
    gc.enable()
    yield
    if not was:
        gc.disable()


def test_paused_inside_and_restored_after() -> None:
    with paused_gc():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_nested_pauses_restore_only_at_the_outermost() -> None:
    with paused_gc():
        with paused_gc():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()


def test_restored_after_an_exception() -> None:
    with pytest.raises(RuntimeError), paused_gc():
        raise RuntimeError("boom")
    assert gc.isenabled()


def test_a_disabled_collector_stays_disabled() -> None:
    gc.disable()
    with paused_gc():
        pass
    assert not gc.isenabled()


def test_overlapping_pauses_in_threads() -> None:
    inside = threading.Barrier(2)
    leave_first = threading.Event()
    states: list[bool] = []

    def first() -> None:
        with paused_gc():
            inside.wait()
            leave_first.wait()

    thread = threading.Thread(target=first)
    thread.start()
    with paused_gc():
        inside.wait()
        leave_first.set()
        thread.join()
        # The other thread's pause ended, but this one is still open.
        states.append(gc.isenabled())
    states.append(gc.isenabled())
    assert states == [False, True]


def test_fold_defers_collections_and_restores_the_collector(tmp_path: Path) -> None:
    with MemoryEngine(tmp_path / "s.db", embedder="none") as engine:
        engine.store_many(
            {"content": f"fact number {i}", "domain": "project", "vector": [1.0, float(i % 3)]}
            for i in range(300)
        )
        before = gc.get_stats()[0]["collections"]
        engine.fold()
        during = gc.get_stats()[0]["collections"] - before
    # A fold this size allocates enough to start many collections; at most the
    # one deferred to the end of the pause may run.
    assert during <= 1
    assert gc.isenabled()
