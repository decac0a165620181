"""Reads run side by side; writes run alone.

The engine's lock (:mod:`prime_memory_folding.engine.locking`) is held for reading
by queries, stats, ``get`` and ``match_ids``, so one caller's long query does
not hold up another's read. These tests check the lock itself, that a read
goes on while another read is stopped half-way, and that reads at once, and
beside writes, give what the same reads give one at a time.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from prime_memory_folding import MemoryEngine
from prime_memory_folding.engine.locking import ReadWriteLock
from prime_memory_folding.storage.sqlite import SQLiteStorage

#: A bound on every wait, so a broken lock fails the test instead of hanging it.
WAIT_S = 60.0

WORDS = ("deploy", "schema", "cache", "token", "review", "index", "build", "queue")


def in_thread(fn: Any) -> Any:
    """``fn()`` in another thread: its result, or the exception it raised."""
    out: dict[str, Any] = {}

    def run() -> None:
        try:
            out["value"] = fn()
        except BaseException as exc:
            out["error"] = exc

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(WAIT_S)
    assert not thread.is_alive(), "the call did not finish"
    if "error" in out:
        raise out["error"]
    return out["value"]


# -- the lock ---------------------------------------------------------------------


def test_readers_share_the_lock_and_keep_writers_out() -> None:
    lock = ReadWriteLock()
    with lock.shared():
        assert in_thread(lambda: _read_once(lock)) == "read"
        assert in_thread(lambda: lock.acquire(blocking=False)) is False
    assert in_thread(lambda: _write_once(lock)) == "wrote"


def test_a_writer_keeps_everyone_else_out_and_may_take_it_again() -> None:
    lock = ReadWriteLock()
    with lock:
        with lock, lock.shared():  # reentrant, and a writer may read
            assert lock.writing()
        assert in_thread(lambda: lock.acquire(blocking=False)) is False
        assert in_thread(lambda: lock.acquire(timeout=0.01)) is False
        assert in_thread(lock.writing) is False
    assert not lock.writing()
    assert in_thread(lambda: _write_once(lock)) == "wrote"


def test_a_reader_cannot_take_it_for_writing() -> None:
    lock = ReadWriteLock()
    with lock.shared(), lock.shared(), pytest.raises(RuntimeError, match="held for reading"):
        lock.acquire()
    assert in_thread(lambda: _write_once(lock)) == "wrote"


class WaitSignals(threading.Condition):
    """The lock's condition, signalling each thread's first wait on it (by name)."""

    def __init__(self) -> None:
        super().__init__(threading.Lock())
        self.waiting: dict[str, threading.Event] = {
            "writer": threading.Event(),
            "reader": threading.Event(),
        }

    def wait(self, timeout: float | None = None) -> bool:
        signal = self.waiting.get(threading.current_thread().name)
        if signal is not None:
            signal.set()
        return super().wait(timeout)


def test_a_waiting_writer_goes_before_readers_that_come_after_it() -> None:
    lock = ReadWriteLock()
    signals = WaitSignals()
    lock._state = signals  # what each thread waits on is visible to the test
    order: list[str] = []

    def write() -> None:
        with lock:
            order.append("writer")

    def read() -> None:
        with lock.shared():
            order.append("reader")

    with lock.shared():  # a read under way
        writer = threading.Thread(target=write, name="writer")
        writer.start()
        assert signals.waiting["writer"].wait(WAIT_S)
        reader = threading.Thread(target=read, name="reader")
        reader.start()
        # The later reader waits too, though only a read holds the lock.
        assert signals.waiting["reader"].wait(WAIT_S)
    writer.join(WAIT_S)
    reader.join(WAIT_S)
    assert order == ["writer", "reader"]


def test_releasing_what_is_not_held_is_an_error() -> None:
    lock = ReadWriteLock()
    with pytest.raises(RuntimeError, match="not held for writing"):
        lock.release()
    with lock, pytest.raises(RuntimeError, match="not held for writing"):
        in_thread(lock.release)


def _read_once(lock: ReadWriteLock) -> str:
    with lock.shared():
        return "read"


def _write_once(lock: ReadWriteLock) -> str:
    with lock:
        return "wrote"


# -- the engine ---------------------------------------------------------------------


class GateEmbedder:
    """One dimension per known word; when ``stop`` is set, an embedding of a text
    holding ``"hold"`` waits inside the query until ``go`` is set."""

    name = "test:gated-words"
    dim = len(WORDS)

    def __init__(self) -> None:
        self.stop = False
        self.inside = threading.Event()
        self.go = threading.Event()

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        if self.stop and any("hold" in t for t in texts):
            self.inside.set()
            assert self.go.wait(WAIT_S)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            for j, word in enumerate(WORDS):
                out[i, j] = 1.0 if word in text.lower() else 0.0
        out[:, 0] += 1e-3
        return out / np.linalg.norm(out, axis=1, keepdims=True)


def memories(n: int) -> list[dict[str, Any]]:
    rng = np.random.default_rng(5)
    out = []
    for k in range(n):
        picked = rng.choice(WORDS, size=3, replace=False)
        out.append(
            {
                "content": f"note {k}: the {picked[0]} step after {picked[1]} and {picked[2]}",
                "domain": ["code", "ops", "team"][k % 3],
                "tags": [str(picked[0]), f"t{k % 5}"],
                "session": f"s{k // 10}",
                "scope": "project:a",
            }
        )
    return out


@pytest.fixture
def gated(backend_store: str) -> Iterator[tuple[MemoryEngine, GateEmbedder]]:
    embedder = GateEmbedder()
    with MemoryEngine(backend_store, scope="project:a", embedder=embedder) as memory:
        memory.store_many(memories(120))
        yield memory, embedder


def test_a_read_goes_on_while_another_read_is_stopped_half_way(
    gated: tuple[MemoryEngine, GateEmbedder],
) -> None:
    memory, embedder = gated
    some = memory.query("deploy schema", limit=3)
    embedder.stop = True
    with ThreadPoolExecutor(1) as pool:
        held = pool.submit(memory.query, "hold the deploy cache", limit=5)
        assert embedder.inside.wait(WAIT_S)
        try:
            # The first query holds the engine's lock for reading; these read beside it.
            first = some[0].record
            assert in_thread(lambda: memory.get(first.record_id)).content == first.content
            assert in_thread(memory.stats).records == 120
            assert len(in_thread(lambda: memory.match_ids(domain="code"))) == 40
            again = in_thread(lambda: memory.query("deploy schema", limit=3))
            assert [h.record.record_id for h in again] == [h.record.record_id for h in some]
            assert not held.done()
        finally:
            embedder.go.set()
        assert len(held.result(WAIT_S)) == 5


QUERIES = ("deploy schema", "cache token review", "index build", "queue", "review the build")


def answers(memory: MemoryEngine) -> list[Any]:
    """What a fixed set of reads gives: each query's ids and scores, stats, one get."""
    out: list[Any] = [
        [(h.record.record_id, round(h.score, 9)) for h in memory.query(q, limit=8)] for q in QUERIES
    ]
    out.append([h.record.record_id for h in memory.query(domain="ops", tags=["t1"], limit=50)])
    out.append(memory.stats(["project:a"]).tags)
    out.append(sorted(memory.match_ids(any_tags=["t2", "t3"])))
    return out


def test_reads_at_once_give_what_reads_one_at_a_time_give(
    gated: tuple[MemoryEngine, GateEmbedder],
) -> None:
    memory, _ = gated
    alone = answers(memory)
    with ThreadPoolExecutor(6) as pool:
        together = list(pool.map(lambda _: answers(memory), range(24)))
    assert all(result == alone for result in together)


def test_reads_beside_writes_see_every_write_whole(
    gated: tuple[MemoryEngine, GateEmbedder],
) -> None:
    memory, _ = gated
    stop = threading.Event()
    seen: list[int] = []

    def read() -> None:
        while not stop.is_set():
            hits = memory.query("deploy schema", scopes=["project:b"], limit=100)
            # A write of a batch is one transaction: a read sees all of it or none.
            seen.append(len(hits))
            assert len(hits) % 4 == 0

    def write() -> None:
        for k in range(15):
            batch = [
                {"content": f"deploy schema batch {k} item {j}", "scope": "project:b"}
                for j in range(4)
            ]
            memory.store_many(batch)
        stop.set()

    with ThreadPoolExecutor(4) as pool:
        futures = [pool.submit(read) for _ in range(3)] + [pool.submit(write)]
        for future in futures:
            future.result(WAIT_S)
    assert seen and max(seen) <= 60
    assert len(memory.query("deploy schema", scopes=["project:b"], limit=100)) == 60


# -- SQLite's reading connections ----------------------------------------------------


def test_a_sqlite_read_has_a_read_only_connection_of_its_own(tmp_path: Path) -> None:
    with MemoryEngine(tmp_path / "memory.db", embedder="none") as memory:
        memory.store("one note")
        storage = memory.storage
        assert isinstance(storage, SQLiteStorage)
        main = storage.db
        with storage.reading():
            reader = storage.db
            assert reader is not main
            assert reader.execute("SELECT count(*) FROM records").fetchone() == (1,)
            with pytest.raises(sqlite3.OperationalError, match="readonly"):
                reader.execute("DELETE FROM records")
            with storage.reading():  # nested: the same connection
                assert storage.db is reader
        assert storage.db is main
        with storage.reading():  # the next read takes it again
            assert storage.db is reader
        assert memory.stats().records == 1


def test_a_store_in_memory_reads_on_its_only_connection() -> None:
    with MemoryEngine(":memory:", embedder="none") as memory:
        memory.store("one note")
        storage = memory.storage
        assert isinstance(storage, SQLiteStorage)
        main = storage.db
        with storage.reading():
            assert storage.db is main
        assert [h.record.content for h in memory.query("note")] == ["one note"]
