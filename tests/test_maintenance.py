"""Folding on a live engine: the steps a fold reports, and the archive in the store's summary."""

from __future__ import annotations

from typing import Any

import pytest
from mcp import Client

from prime_memory_folding import MemoryEngine
from prime_memory_folding.mcp_server import build_server
from tests.conftest import FakeClock

DAY = 86_400.0


def _foldable(engine: MemoryEngine, clock: FakeClock) -> tuple[list[str], str]:
    twins = [
        engine.store(text, subdomain="procedural", tags=["lint"], vector=vector).record_id
        for text, vector in (
            ("Run make lint before pushing; CI fails on any warning.", [1.0, 0.0, 0.0]),
            ("Run make lint before you push; CI fails on any warning.", [0.99, 0.1, 0.0]),
        )
    ]
    passing = engine.store("Scratch note", importance=0.1, vector=[0.0, 0.0, 1.0]).record_id
    clock.advance(30 * DAY)
    return twins, passing


@pytest.mark.parametrize(
    ("dry_run", "third"), [(True, "preparing folded records"), (False, "writing")]
)
def test_a_fold_reports_its_steps_in_order(
    engine: MemoryEngine, clock: FakeClock, dry_run: bool, third: str
) -> None:
    _foldable(engine, clock)
    steps: list[tuple[str, int, int]] = []
    report = engine.fold(dry_run=dry_run, progress=lambda *step: steps.append(step))
    assert steps == [
        ("reading records", 0, 5),
        ("decaying and pruning", 1, 5),
        ("finding candidates", 2, 5),
        ("checking candidates", 3, 5),
        (third, 4, 5),
        ("done", 5, 5),
    ]
    assert (report.folded, report.pruned) == (2, 1)


def test_the_summary_counts_the_archive_by_reason(engine: MemoryEngine, clock: FakeClock) -> None:
    assert (engine.stats().archived, engine.stats().archived_by_reason) == (0, {})
    _, passing = _foldable(engine, clock)
    engine.fold()
    summary = engine.stats()
    assert (summary.records, summary.archived) == (1, 3)
    assert summary.archived_by_reason == {"folded": 2, "pruned": 1}
    engine.restore(passing)
    assert engine.stats().archived_by_reason == {"folded": 2}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_the_stats_tool_reports_the_archive(engine: MemoryEngine, clock: FakeClock) -> None:
    _foldable(engine, clock)
    engine.fold()
    async with Client(build_server(engine), mode="legacy") as client:
        result = await client.call_tool("prime_memory_stats", {})
    assert not result.is_error
    out: dict[str, Any] = result.structured_content or {}
    assert (out["records"], out["archived"], out["archived_by_reason"]) == (
        1,
        3,
        {"folded": 2, "pruned": 1},
    )
