"""pgvector's path: the HNSW index finds candidates, numpy ranks them exactly.

Debian's PostgreSQL has no pgvector, so these tests run a server from PyPI's
``pgserver`` wheel, which carries PostgreSQL and the extension.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
import pytest

from prime_memory_folding import Filters, MemoryEngine, RankingSettings
from prime_memory_folding.core.index import TagQuery
from tests import pg_helpers
from tests.conftest import FakeClock, skip_unless_ci

DIM = 16


class VectorServer:
    """pgserver's PostgreSQL with pgvector; a new one should its postmaster die.

    The wheel's server is this module's tool, not the code under test. A
    postmaster that is gone (killed from outside, its socket left behind) is
    replaced, before the next database is made or dropped, by a new server on
    new data, and what the old one's log last said goes to stderr. A backend
    that crashes on a query is a different matter: the postmaster restarts it
    by itself, and the test that sent the query fails.
    """

    def __init__(self, folders: pytest.TempPathFactory) -> None:
        self.folders = folders
        self.server = self._start()

    def _start(self) -> Any:
        import pgserver

        return pgserver.get_server(self.folders.mktemp("pgdata"), cleanup_mode="stop")

    def url(self) -> str:
        """The URL of a server whose postmaster is running."""
        import psutil  # pgserver's own dependency

        postmaster = self.server.get_postmaster_info().process
        try:
            alive = postmaster.status() != psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            alive = False
        if not alive:
            log = (self.server.pgdata / "log").read_text(errors="replace").splitlines()
            print("pgserver's postmaster was gone; its log ended with:", *log[-20:], sep="\n  ")
            with contextlib.suppress(psutil.Error):  # it cannot stop what is gone
                self.server.cleanup()
            self.server = self._start()
        return str(self.server.get_uri())

    def close(self) -> None:
        self.server.cleanup()


@pytest.fixture(scope="module")
def vector_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[VectorServer]:
    """A PostgreSQL server with pgvector, for this module."""
    # pgserver finds its lock folder through platformdirs, which warns without this.
    os.environ.setdefault("XDG_RUNTIME_DIR", str(tmp_path_factory.mktemp("runtime")))
    try:
        import pgserver  # noqa: F401
    except ImportError:
        skip_unless_ci("pgserver (PostgreSQL with pgvector from PyPI) is not installed")
    server = VectorServer(tmp_path_factory)
    try:
        yield server
    finally:
        server.close()


@pytest.fixture
def vector_store(vector_server: VectorServer) -> Iterator[str]:
    """A database of its own on the pgvector server, dropped afterwards."""
    name = "pmf_test_" + secrets.token_hex(6)
    with psycopg.connect(vector_server.url(), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    yield pg_helpers.with_database(vector_server.url(), name)
    with psycopg.connect(vector_server.url(), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


def _items(count: int, seed: int) -> list[dict[str, object]]:
    rng = np.random.default_rng(seed)
    return [
        {
            "content": f"note {i} about {'alpha' if i % 3 else 'beta'}",
            "tags": ["even" if i % 2 == 0 else "odd"],
            "vector": rng.normal(size=DIM).tolist(),
        }
        for i in range(count)
    ]


def _ids(hits: list) -> list[str]:  # type: ignore[type-arg]
    return [hit.record.record_id for hit in hits]


def _nearest_by_pgvector(pg: MemoryEngine) -> bool:
    """Whether a vector query's nearest records come from pgvector (else numpy scores them).

    The store has pgvector's column once it holds a vector of ``DIM``.
    """
    unit = np.zeros(DIM, dtype=np.float32)
    unit[0] = 1.0
    return pg.storage.nearest(TagQuery(), unit, 1) is not None  # type: ignore[attr-defined]


def test_nearest_by_hnsw_then_exact_equals_sqlite(vector_store: str, tmp_path: Path) -> None:
    """Past one window, vector queries go through HNSW and still rank as SQLite does."""
    items = _items(300, seed=7)
    queries = np.random.default_rng(8).normal(size=(12, DIM))
    clock = FakeClock()
    with (
        MemoryEngine(vector_store, clock=clock, ranking=RankingSettings(window_max=40)) as pg,
        MemoryEngine(tmp_path / "m.db", clock=clock) as lite,
    ):
        pg.store_many(items)
        lite.store_many(items)
        assert _nearest_by_pgvector(pg)
        for q in queries:
            for tags in ([], ["odd"]):
                want = _ids(lite.query(vector=q.tolist(), tags=tags, limit=10))
                got = _ids(pg.query(vector=q.tolist(), tags=tags, limit=10))
                assert got == want
        # Past one window, a text query's vector side asks HNSW too: the
        # nearest memory is found even when it is not among the newest.
        for q in queries[:4]:
            nearest = _ids(lite.query(vector=q.tolist(), limit=1))[0]
            assert nearest in _ids(pg.query(text="alpha note", vector=q.tolist(), limit=10))


def test_rows_written_without_embedding_are_filled(vector_store: str) -> None:
    """A row that reached ``records`` without its embedding gets one before a search."""
    items = _items(30, seed=3)
    with MemoryEngine(vector_store) as pg:
        pg.store_many(items)
        storage = pg.storage
        storage.run("UPDATE records SET embedding = NULL")  # type: ignore[attr-defined]
        missing = storage.run(  # type: ignore[attr-defined]
            "SELECT count(*) FROM records WHERE embedding IS NULL"
        ).fetchone()[0]
        assert missing == 30
        unit = np.asarray(items[5]["vector"], dtype=np.float32)
        unit /= np.linalg.norm(unit)
        found = storage.nearest(pg._reader.gates(Filters()), unit, 5)  # type: ignore[attr-defined]
        assert (
            found is not None
            and found[0] == pg.query(vector=unit.tolist(), limit=1)[0].record.record_id
        )
        left = storage.run(  # type: ignore[attr-defined]
            "SELECT count(*) FROM records WHERE embedding IS NULL"
        ).fetchone()[0]
        assert left == 0


def test_off_switch_scores_with_numpy(vector_store: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PRIME_MEMORY_PGVECTOR", "off")
    with MemoryEngine(vector_store) as pg:
        pg.store_many(_items(20, seed=1))
        assert not _nearest_by_pgvector(pg)
        assert len(pg.query(vector=[1.0] * DIM, limit=5)) == 5


def test_system_server_without_the_extension_falls_back(pg_url: str) -> None:
    """Where the server lacks pgvector, the store opens and scores with numpy."""
    with MemoryEngine(pg_url) as pg:
        with psycopg.connect(pg_url.split("?")[0]) as conn:
            has = conn.execute(
                "SELECT 1 FROM pg_available_extensions WHERE name = 'vector'"
            ).fetchone()
        pg.store_many(_items(20, seed=2))
        assert _nearest_by_pgvector(pg) == (has is not None)
        assert len(pg.query(vector=[0.5] * DIM, limit=3)) == 3
