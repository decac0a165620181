"""``prime-memory check``: memories about code checked against the working tree, from the
command line; and a fold's word on the stale memories it archives."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from prime_memory_folding import MemoryEngine
from tests.conftest import FakeClock
from tests.git_repos import CLIENT, make_repo

DAY = 86_400.0


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "project", {"src/client.py": CLIENT})


def remember(store_path: Path, clock: FakeClock, repo: Path, *spans: str) -> list[str]:
    with MemoryEngine(store_path, clock=clock) as engine:
        engine.store("a memory about nothing in particular")
        return [
            engine.store(
                f"the client lines {span} retry with backoff",
                cites=[{"path": "src/client.py", "lines": span}],
                repo=repo,
            ).record_id
            for span in spans
        ]


def test_check_prints_a_summary_and_one_line_per_stale_or_moved_memory(
    run: Any, store_path: Path, clock: FakeClock, repo: Path
) -> None:
    kept, stale = remember(store_path, clock, repo, "20-21", "25-26")
    (repo / "src" / "client.py").write_text(CLIENT.replace("line 25\n", "line 25 changed\n"))
    result = run("check")
    assert result.exit_code == 0, result.output
    lines = result.output.strip().splitlines()
    assert lines[0] == (
        "checked 2 memories citing code, 2 citations: 1 verified, 0 moved, 1 stale, 0 unchecked"
    )
    (line,) = lines[1:]
    assert line.startswith(stale) and kept not in result.output
    assert "the client lines 25-26" in line
    assert "src/client.py stale: the cited lines changed" in line


def test_check_shows_where_moved_lines_went(
    run: Any, store_path: Path, clock: FakeClock, repo: Path
) -> None:
    (moved,) = remember(store_path, clock, repo, "10-12")
    (repo / "src" / "client.py").write_text("a\nb\n" + CLIENT)
    result = run("check")
    assert result.exit_code == 0
    assert "1 moved" in result.output
    assert f"{moved}  " in result.output and "src/client.py:12-14 moved" in result.output


def test_check_says_so_when_everything_matches_and_when_nothing_cites_code(
    run: Any, store_path: Path, clock: FakeClock, repo: Path
) -> None:
    result = run("store", "nothing cited here")
    assert result.exit_code == 0
    result = run("check")
    assert result.exit_code == 0
    assert result.output.strip() == (
        "checked 0 memories citing code, 0 citations: 0 verified, 0 moved, 0 stale, 0 unchecked"
    )
    remember(store_path, clock, repo, "1-3")
    result = run("check")
    assert "1 verified" in result.output and "every citation matches the code" in result.output


def test_check_json(run: Any, store_path: Path, clock: FakeClock, repo: Path) -> None:
    _, stale = remember(store_path, clock, repo, "1-2", "29-30")
    (repo / "src" / "client.py").write_text(CLIENT.replace("line 30\n", "line thirty\n"))
    result = run("check", "--json")
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert (out["memories"], out["citations"], out["verified"], out["stale"]) == (2, 2, 1, 1)
    assert out["verified_memories"] == 1 and out["stale_memories"] == 1
    assert out["checked_at"] == clock.now
    (finding,) = out["findings"]
    assert finding["id"] == stale and "29-30" in finding["content"]
    (cite,) = finding["citations"]
    assert cite["path"] == "src/client.py" and cite["state"] == "stale"
    assert cite["detail"]


def test_strict_exits_1_only_when_something_is_stale(
    run: Any, store_path: Path, clock: FakeClock, repo: Path
) -> None:
    remember(store_path, clock, repo, "10-12")
    assert run("check", "--strict").exit_code == 0
    (repo / "src" / "client.py").write_text("moved down\n" + CLIENT)
    assert run("check", "--strict").exit_code == 0  # moved is not stale
    (repo / "src" / "client.py").write_text(CLIENT.replace("line 11\n", "line eleven\n"))
    assert run("check").exit_code == 0
    result = run("check", "--strict")
    assert result.exit_code == 1 and "1 stale" in result.output


def test_check_reads_the_scopes_given(
    run: Any, store_path: Path, clock: FakeClock, repo: Path
) -> None:
    with MemoryEngine(store_path, clock=clock) as engine:
        engine.store(
            "in another project",
            cites=[{"path": "src/client.py", "lines": "5"}],
            repo=repo,
            scope="project:other",
        )
    assert "checked 0 memories" in run("check").output
    assert "checked 1 memory citing code" in run("check", "--scope", "project:other").output
    assert "checked 1 memory" in run("check", "--all-scopes").output
    assert "checked 1 memory" in run("check", "--scope", "*").output


def test_fold_names_the_stale_memories_it_archives(
    run: Any, store_path: Path, clock: FakeClock, repo: Path
) -> None:
    (stale,) = remember(store_path, clock, repo, "3-4")
    (repo / "src" / "client.py").write_text(CLIENT.replace("line 3\n", "line three\n"))
    clock.advance(29 * DAY)
    preview = run("fold", "--dry-run")
    assert preview.exit_code == 0, preview.output
    assert "1 memory about code would be archived" in preview.output
    assert stale in preview.output and "src/client.py" in preview.output
    done = run("fold", "--json")
    assert done.exit_code == 0, done.output
    report = json.loads(done.output)
    assert report["stale"] == 1 and report["stale_ids"] == [stale]
    assert "src/client.py" in report["stale_details"][stale]
    assert run("restore", stale).exit_code == 0
