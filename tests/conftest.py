"""Shared fixtures: every test gets its own PRIME_MEMORY_HOME and a fresh store."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from prime_memory_folding import MemoryEngine


class FakeClock:
    """A clock that only moves when told to."""

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


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


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    return tmp_path / "memory.db"


@pytest.fixture
def engine(store_path: Path, clock: FakeClock) -> Iterator[MemoryEngine]:
    with MemoryEngine(store_path, clock=clock) as memory:
        yield memory


# The command-line tests' ``run`` fixture lives with their other helpers.
from tests.cli_helpers import run  # noqa: E402, F401
