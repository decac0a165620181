"""The contract tests' view of a store on either backend.

A contract test takes the ``backend_store`` fixture (tests/conftest.py): an
SQLite file path, then a PostgreSQL URL. What it needs beyond the engine is
here: which backend a store is on, every row it holds (to prove a refused
call changed nothing), and an empty store for each hypothesis example.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, settings

from prime_memory_folding import MemoryEngine, RankingSettings
from prime_memory_folding.core.primes import DEFAULT_LABELS

__all__ = ["dump", "emptied", "examples", "is_postgres", "twins"]


def is_postgres(store: str | Path) -> bool:
    """Whether ``store`` names a PostgreSQL store (a URL) rather than a file."""
    return str(store).startswith(("postgresql://", "postgres://"))


def dump(store: str | Path) -> list[tuple[Any, ...]]:
    """Every row of every table of the store, in a stable order."""
    if not is_postgres(store):
        db = sqlite3.connect(store)
        try:
            tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")]
            return [(t, *row) for t in sorted(tables) for row in db.execute(f'SELECT * FROM "{t}"')]
        finally:
            db.close()
    import psycopg

    with psycopg.connect(str(store), autocommit=True) as conn:
        tables = _pg_tables(conn)
        rows: list[tuple[Any, ...]] = []
        for table in tables:
            for row in conn.execute(f'SELECT * FROM "{table}" ORDER BY 1'):
                rows.append((table, *row))
        return rows


def _pg_tables(conn: Any) -> list[str]:
    return sorted(
        row[0]
        for row in conn.execute(
            "SELECT table_name FROM information_schema.tables "
            "WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'"
        )
    )


def emptied(store: str) -> str:
    """An empty store for one hypothesis example: ``":memory:"``, or ``store`` emptied.

    A PostgreSQL store is too slow to make afresh for every example, so the
    test's one store loses every row (the registries keep only the labels a
    new store starts with) and is handed back.
    """
    if not is_postgres(store):
        return ":memory:"
    import psycopg

    defaults = [(kind.value, label) for kind, labels in DEFAULT_LABELS.items() for label in labels]
    with psycopg.connect(store, autocommit=True) as conn, conn.transaction():
        tables = _pg_tables(conn)
        if "primes" not in tables:
            return store  # no engine opened it yet: the schema is still empty
        for table in tables:
            if table not in ("schema_migrations", "primes"):
                conn.execute(f'DELETE FROM "{table}"')
        kept = conn.execute("SELECT kind, label FROM primes").fetchall()
        stale = [(kind, label) for kind, label in kept if (kind, label) not in defaults]
        if stale:
            conn.cursor().executemany("DELETE FROM primes WHERE kind = %s AND label = %s", stale)
    return store


def examples(store: str, sqlite: int, postgres: int) -> settings:
    """Hypothesis settings for a property run on ``store``'s backend.

    Each PostgreSQL example writes through the network, so the PostgreSQL run
    takes fewer examples than the embedded one.
    """
    return settings(
        max_examples=postgres if is_postgres(store) else sqlite,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )


@contextlib.contextmanager
def twins(
    lite_path: Path,
    pg_url: str,
    clocks: tuple[Callable[[], float], Callable[[], float]],
    rankings: tuple[RankingSettings, RankingSettings],
) -> Iterator[tuple[MemoryEngine, MemoryEngine]]:
    """An SQLite store at ``lite_path`` and the emptied PostgreSQL store, both in
    scope ``project:a`` with the built-in model, each with its clock and ranking."""
    with (
        MemoryEngine(
            lite_path, clock=clocks[0], scope="project:a", ranking=rankings[0], embedder="builtin"
        ) as lite,
        MemoryEngine(
            emptied(pg_url),
            clock=clocks[1],
            scope="project:a",
            ranking=rankings[1],
            embedder="builtin",
        ) as pg,
    ):
        yield lite, pg
