"""Shared fixtures: every test gets its own PRIME_MEMORY_HOME and a fresh store."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import NoReturn
from unittest.mock import patch

import pytest

from prime_memory_folding import MemoryEngine
from tests import pg_helpers
from tests.cli_helpers import run  # noqa: F401  (the command-line tests' fixture)

# Tests, and the servers their module fixtures start, put stores at fresh paths
# everywhere. The rule that refuses a missing store outside the default location
# is tested in test_store_creation.py, whose commands run without this.
os.environ["PRIME_MEMORY_CREATE"] = "1"


def skip_unless_ci(reason: str) -> NoReturn:
    """Skip with ``reason``; but when the ``CI`` environment variable is set, fail.

    For a test that needs a tool this machine may lack: on a workstation it
    skips and says why, while CI, which is meant to have every tool, never
    turns a missing one into a silent pass.
    """
    if os.environ.get("CI"):
        pytest.fail(f"{reason} (CI is set, so this test must run, not skip)")
    pytest.skip(reason)


class FakeClock:
    """A clock that only moves when told to."""

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def anyio_backend() -> str:
    """Async tests run on asyncio, as the server does (the SDK's transports and the
    engine's worker threads); anyio would otherwise add trio wherever it is importable."""
    return "asyncio"


@pytest.fixture(autouse=True)
def memory_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("PRIME_MEMORY_HOME", str(home))
    # Tests are structural unless they opt in to embedding (embedder=...), so that
    # small caller vectors fit and no test pays for loading the built-in model.
    monkeypatch.setenv("PRIME_MEMORY_EMBEDDER", "none")
    # The current scope would otherwise follow the checkout the tests run in;
    # tests of scope resolution clear or set these themselves.
    monkeypatch.setenv("PRIME_MEMORY_SCOPE", "global")
    monkeypatch.delenv("CLAUDE_PROJECT_DIR", raising=False)
    return home


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture(scope="session")
def pg_database() -> Iterator[str]:
    """The run's own PostgreSQL database (dropped at the end); its URL."""
    reason = pg_helpers.unavailable()
    if reason is not None:
        skip_unless_ci(reason)
    with pg_helpers.scratch_database() as url:
        yield url


@pytest.fixture
def pg_url(pg_database: str) -> str:
    """A store URL of its own: a fresh schema in the run's database."""
    return pg_helpers.new_schema(pg_database)


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    return tmp_path / "memory.db"


@pytest.fixture(params=["sqlite", "postgres"])
def backend_store(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A new store on each backend: an SQLite file, then a PostgreSQL schema.

    The contract tests take it, so that every behaviour they check holds on both.
    """
    if request.param == "sqlite":
        return str(tmp_path / "memory.db")
    url: str = request.getfixturevalue("pg_url")
    return url


@pytest.fixture
def another_store(backend_store: str, request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A second new store on ``backend_store``'s backend."""
    if request.node.callspec.params["backend_store"] == "sqlite":
        return str(tmp_path / "another.db")
    return pg_helpers.new_schema(request.getfixturevalue("pg_database"))


@pytest.fixture
def engine(store_path: Path, clock: FakeClock) -> Iterator[MemoryEngine]:
    with MemoryEngine(store_path, clock=clock) as memory:
        yield memory


@pytest.fixture
def backend_engine(backend_store: str, clock: FakeClock) -> Iterator[MemoryEngine]:
    """An engine on a new store of each backend (``backend_store``)."""
    with MemoryEngine(backend_store, clock=clock) as memory:
        yield memory


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "sqlite_only: a test of the embedded store's own workings; of a module whose "
        "fixtures run on both backends, it runs on SQLite only",
    )
    config.addinivalue_line(
        "markers",
        "xfail_on_postgres(reason): expected to fail on the PostgreSQL backend (strict), "
        "until that backend does what the test asks",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Drop the PostgreSQL run of ``sqlite_only`` tests; mark ``xfail_on_postgres`` ones."""
    kept: list[pytest.Item] = []
    dropped: list[pytest.Item] = []
    for item in items:
        callspec = getattr(item, "callspec", None)
        on_postgres = callspec is not None and callspec.params.get("backend_store") == "postgres"
        if on_postgres and item.get_closest_marker("sqlite_only") is not None:
            dropped.append(item)
            continue
        marker = item.get_closest_marker("xfail_on_postgres")
        if on_postgres and marker is not None:
            reason = marker.kwargs.get("reason") or (marker.args[0] if marker.args else "")
            item.add_marker(pytest.mark.xfail(strict=True, reason=reason))
        kept.append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


@pytest.fixture(scope="module", params=["default", "lowered"])
def candidate_paths(request: pytest.FixtureRequest) -> Iterator[int]:
    """The index's exact tag tests, both ways: Python ints and numpy columns.

    Up to ``_PYTHON_TEST_MAX`` candidates, the index tests tag products as
    Python ints; past it, on numpy columns (and as Python ints where a product
    is 2**64 or more). Property tests hold a few dozen records, so with the
    default they only take the first path; lowered to 0, every candidate set
    takes the second. Module-scoped, so hypothesis runs every example of a
    test under one threshold; yields the threshold in force.
    """
    from prime_memory_folding.core import index

    limit = index._PYTHON_TEST_MAX if request.param == "default" else 0
    with patch.object(index, "_PYTHON_TEST_MAX", limit):
        yield limit
