"""``prime-memory fold``, ``unfold`` and ``restore`` through the installed command in a subprocess:
groups kept apart for one fold or after an unfold, a dry run that shows what it would
merge, and restore's word on an updated memory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from prime_memory_folding import MemoryEngine
from tests.conftest import FakeClock

PROGRAM = Path(sys.executable).with_name("prime-memory")
TERMINAL_SETTINGS = ("COLUMNS", "LINES", "TTY_COMPATIBLE", "TTY_INTERACTIVE", "FORCE_COLOR")
LONG = (
    "Run the integration tests with pytest -n 0 when debugging the flaky sync test, "
    "because parallel workers interleave their output and hide which test wrote what"
)


def prime_memory(store: Path, *args: str, columns: int = 80) -> subprocess.CompletedProcess[str]:
    """The installed command on ``store``, its output as wide as ``columns``."""
    env = {k: v for k, v in os.environ.items() if k not in TERMINAL_SETTINGS}
    env["COLUMNS"] = str(columns)
    return subprocess.run(
        [str(PROGRAM), "--store", str(store), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def one_line_error(done: subprocess.CompletedProcess[str], *fragments: str) -> None:
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def near(centre: np.ndarray[Any, Any], seed: int) -> list[float]:
    return (centre + np.random.default_rng(seed).normal(scale=0.02, size=len(centre))).tolist()


@pytest.fixture
def groups(store_path: Path, clock: FakeClock) -> dict[str, list[str]]:
    """Two groups of near-duplicates in the test's store: their ids by group."""
    found: dict[str, list[str]] = {}
    with MemoryEngine(store_path, clock=clock) as memory:
        for name, seed, texts in (
            ("tests", 1, [f"{LONG}.", f"{LONG}, always."]),
            ("deploy", 2, ["Deploys run on Fridays after the freeze lifts.",
                           "Deploys run on Fridays after the freeze lifts, say ops."]),
        ):  # fmt: skip
            centre = np.random.default_rng(seed).normal(size=8)
            found[name] = [
                memory.store(text, vector=near(centre, i), tags=[name]).record_id
                for i, text in enumerate(texts)
            ]
    return found


def live(store_path: Path) -> set[str]:
    with MemoryEngine(store_path) as memory:
        return set(memory.match_ids())


def test_a_dry_run_shows_each_group_with_its_memories_cut_to_the_width(
    store_path: Path, groups: dict[str, list[str]]
) -> None:
    done = prime_memory(store_path, "fold", "--dry-run", columns=70)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "would fold:" in done.stdout
    for rid in [*groups["tests"], *groups["deploy"]]:
        (line,) = [line for line in lines if rid in line]
        assert len(line) <= 70
    cut = next(line for line in lines if groups["tests"][0] in line)
    assert "Run the integration tests" in cut and cut.endswith("\u2026")
    assert "Deploys run on Fridays" in done.stdout
    assert live(store_path) == {*groups["tests"], *groups["deploy"]}


def test_keep_apart_leaves_that_group_unmerged_for_one_fold(
    store_path: Path, groups: dict[str, list[str]]
) -> None:
    done = prime_memory(
        store_path, "fold", "--keep-apart", groups["deploy"][1], "--json", columns=200
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["clustered"] == 1
    assert [sorted(m) for m in report["folded_from"].values()] == [sorted(groups["tests"])]
    assert set(groups["deploy"]) <= live(store_path)
    # Only for that fold: the next one merges the group.
    again = json.loads(prime_memory(store_path, "fold", "--json").stdout)
    assert [sorted(m) for m in again["folded_from"].values()] == [sorted(groups["deploy"])]


def test_keep_apart_twice_keeps_both_groups(store_path: Path, groups: dict[str, list[str]]) -> None:
    done = prime_memory(
        store_path,
        "fold",
        "--keep-apart",
        groups["deploy"][0],
        "--keep-apart",
        groups["tests"][1],
        "--json",
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["clustered"] == 0
    assert live(store_path) == {*groups["tests"], *groups["deploy"]}


def test_a_bad_id_is_one_line_and_changes_nothing(
    store_path: Path, groups: dict[str, list[str]]
) -> None:
    one_line_error(prime_memory(store_path, "fold", "--keep-apart", "not-an-id"), "not-an-id")
    one_line_error(
        prime_memory(store_path, "fold", "--merge-again", groups["tests"][0]),
        "kept apart from nothing",
    )
    assert live(store_path) == {*groups["tests"], *groups["deploy"]}


def test_an_unfold_is_remembered_until_merge_again(
    store_path: Path, groups: dict[str, list[str]]
) -> None:
    report = json.loads(prime_memory(store_path, "fold", "--json").stdout)
    into = next(rid for rid, m in report["folded_from"].items() if set(m) == set(groups["tests"]))
    done = prime_memory(store_path, "unfold", into)
    assert done.returncode == 0, done.stderr
    again = json.loads(prime_memory(store_path, "fold", "--full", "--json").stdout)
    assert again["clustered"] == 0
    assert set(groups["tests"]) <= live(store_path)
    preview = prime_memory(store_path, "fold", "--dry-run", "--merge-again", groups["tests"][0])
    assert preview.returncode == 0 and "would fold:" in preview.stdout
    assert set(groups["tests"]) <= live(store_path)
    merged = json.loads(
        prime_memory(store_path, "fold", "--merge-again", groups["tests"][0], "--json").stdout
    )
    assert [sorted(m) for m in merged["folded_from"].values()] == [sorted(groups["tests"])]


def test_restore_of_an_updated_memory_says_what_happened(store_path: Path, clock: Any) -> None:
    with MemoryEngine(store_path, clock=clock) as memory:
        rid = memory.store("Deploys run on Fridays").record_id
    updated = prime_memory(store_path, "update", rid, "--content", "Deploys run on Thursdays")
    assert updated.returncode == 0, updated.stderr
    done = prime_memory(store_path, "restore", rid)
    one_line_error(done, rid, "updated", "history")
    assert "stored again" not in done.stderr
    with MemoryEngine(store_path) as memory:
        assert memory.get(rid).content == "Deploys run on Thursdays"
