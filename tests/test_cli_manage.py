"""list, history, retag, forget by filter and purge, through the real ``prime-memory`` command."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from prime_memory_folding import MemoryEngine
from prime_memory_folding.cli import _common

PRIME_MEMORY = str(Path(sys.executable).with_name("prime-memory"))
MISSING = "0000000b0000000200c0ffee12345678"

Run = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def pm(store_path: Path) -> Run:
    """``pm(*args, input="")``: the installed command on the test's store, in scope global.

    Standard input is a pipe, never a terminal, so confirmations refuse unless --yes.
    """

    def run(*args: str, input: str = "") -> subprocess.CompletedProcess[str]:
        argv = [PRIME_MEMORY, "--store", str(store_path), "--scope", "global", *args]
        env = {**os.environ, "COLUMNS": "160"}
        return subprocess.run(
            argv, input=input, capture_output=True, text=True, timeout=60, env=env
        )

    return run


@pytest.fixture
def ids(store_path: Path) -> dict[str, str]:
    """Three memories in global: two decisions and a note holding a secret."""
    with MemoryEngine(str(store_path), scope="global") as engine:
        return {
            "wal": engine.store(
                "We use SQLite in WAL mode", domain="decision", tags=["db"]
            ).record_id,
            "deploy": engine.store(
                "Deploys run on Fridays", domain="decision", tags=["ops"]
            ).record_id,
            "secret": engine.store(
                "The API key is sk-live-123", domain="note", importance=0.9
            ).record_id,
        }


def _live(store_path: Path) -> dict[str, tuple[str, ...]]:
    with MemoryEngine(str(store_path), scope="global") as engine:
        page = engine.browse(scopes=["*"], limit=1000)
        return {hit.record.record_id: hit.record.tags for hit in page.hits}


def _archived(store_path: Path) -> int:
    with MemoryEngine(str(store_path), scope="global") as engine:
        return engine.stats().archived


def _one_line(result: subprocess.CompletedProcess[str], *fragments: str) -> None:
    assert result.returncode != 0 and result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def test_list_shows_ids_tags_strength_and_content_page_by_page(
    pm: Run, ids: dict[str, str]
) -> None:
    shown = pm("list")
    assert shown.returncode == 0, shown.stderr
    for rid in ids.values():
        assert rid in shown.stdout
    assert "ops" in shown.stdout and "1.00" in shown.stdout and "Deploys run" in shown.stdout
    assert "1-3 of 3" in shown.stderr
    page = json.loads(pm("list", "-d", "decision", "--order", "newest", "--json").stdout)
    assert page["total"] == 2 and page["order"] == "newest"
    assert [r["record"]["record_id"] for r in page["records"]] == [ids["deploy"], ids["wal"]]
    assert "vector" not in page["records"][0]["record"]
    second = json.loads(
        pm("list", "--order", "oldest", "--limit", "1", "--offset", "1", "--json").stdout
    )
    assert second["total"] == 3
    assert [r["record"]["record_id"] for r in second["records"]] == [ids["deploy"]]


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--order", "given"], "--order"),
        (["--limit", "0"], "--limit"),
        (["--offset", "-1"], "--offset"),
        (["--since", "someday"], "--since"),
    ],
)
def test_list_refuses_a_bad_option_in_one_line(
    pm: Run, ids: dict[str, str], args: list[str], fragment: str
) -> None:
    _one_line(pm("list", *args), fragment)


def test_history_shows_the_versions_an_update_replaced(
    pm: Run, ids: dict[str, str], store_path: Path
) -> None:
    with MemoryEngine(str(store_path), scope="global") as engine:
        engine.update(ids["wal"], content="We use SQLite in WAL mode, synchronous=FULL")
    shown = pm("history", ids["wal"])
    assert shown.returncode == 0 and "replaced" in shown.stdout
    assert "We use SQLite in WAL mode" in shown.stdout and "synchronous" not in shown.stdout
    versions = json.loads(pm("history", ids["wal"], "--json").stdout)
    assert [v["record"]["content"] for v in versions] == ["We use SQLite in WAL mode"]
    assert isinstance(versions[0]["replaced_at"], float)
    never = pm("history", ids["deploy"], "--json")
    assert never.returncode == 0 and json.loads(never.stdout) == []


@pytest.mark.parametrize(("rid", "fragment"), [("zz", "malformed"), (MISSING, MISSING)])
def test_history_of_a_bad_id_is_one_line(
    pm: Run, ids: dict[str, str], rid: str, fragment: str
) -> None:
    _one_line(pm("history", rid), fragment)


def test_retag_adds_and_removes_tags_on_several_records(
    pm: Run, ids: dict[str, str], store_path: Path
) -> None:
    done = pm("retag", ids["wal"], ids["deploy"], "--add", "reviewed", "--remove", "ops")
    assert done.returncode == 0 and done.stdout == "retagged 2 records\n"
    tags = _live(store_path)
    assert tags[ids["wal"]] == ("db", "reviewed") and tags[ids["deploy"]] == ("reviewed",)
    again = json.loads(pm("retag", ids["wal"], "--add", "reviewed", "--json").stdout)
    assert again == {"changed": 0, "records": []}


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        ([MISSING, "--add", "x"], MISSING),
        (["zz", "--add", "x"], "malformed"),
        (["WAL", "--add", "x", "--remove", "x"], "both added and removed"),
        (["WAL"], "--add"),
    ],
)
def test_retag_with_a_bad_id_or_option_changes_nothing(
    pm: Run, ids: dict[str, str], store_path: Path, args: list[str], fragment: str
) -> None:
    before = _live(store_path)
    argv = [ids["wal"] if arg == "WAL" else arg for arg in args]
    _one_line(pm("retag", ids["deploy"], *argv), fragment)
    assert _live(store_path) == before


def test_forget_by_filter_refuses_without_a_terminal_unless_yes(
    pm: Run, ids: dict[str, str], store_path: Path
) -> None:
    refused = pm("forget", "-d", "decision")
    _one_line(refused, "forget 2 records", "not a terminal", "--yes")
    assert len(_live(store_path)) == 3
    plan = pm("forget", "-d", "decision", "--dry-run", "--json")
    assert json.loads(plan.stdout)["would_forget"] == 2 and len(_live(store_path)) == 3
    done = json.loads(pm("forget", "-d", "decision", "--yes", "--json").stdout)
    assert done["forgotten"] == 2 and done["dry_run"] is False
    assert sorted(done["ids"]) == sorted([ids["wal"], ids["deploy"]])
    assert list(_live(store_path)) == [ids["secret"]] and _archived(store_path) == 2
    nothing = pm("forget", "-d", "decision", "--yes")
    assert nothing.returncode == 0 and "no memories match" in nothing.stderr


def test_forget_by_id_still_works_and_refuses_mixing_with_filters(
    pm: Run, ids: dict[str, str], store_path: Path
) -> None:
    _one_line(pm("forget", ids["wal"], "-d", "decision"), "not both")
    _one_line(pm("forget"), "give an ID")
    _one_line(pm("forget", "--all-scopes"), "give an ID")
    _one_line(pm("forget", MISSING), MISSING)
    assert len(_live(store_path)) == 3
    done = pm("forget", ids["wal"])
    assert done.returncode == 0 and f"forgot {ids['wal']}" in done.stdout
    assert ids["wal"] not in _live(store_path)


@pytest.mark.parametrize(("answer", "forgets"), [("y\n", True), ("n\n", False), ("\n", False)])
def test_forget_by_filter_asks_with_the_count_on_a_terminal(
    run: Any,
    ids: dict[str, str],
    store_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    answer: str,
    forgets: bool,
) -> None:
    monkeypatch.setattr(_common, "stdin_is_terminal", lambda: True)
    result = run("--scope", "global", "forget", "-d", "decision", input=answer)
    assert "Forget 2 records?" in result.stderr and ids["wal"] in result.stderr
    if forgets:
        assert result.exit_code == 0 and "forgot 2 records" in result.stdout
        assert list(_live(store_path)) == [ids["secret"]]
    else:
        assert result.exit_code == 1 and "nothing was forgotten" in result.stderr
        assert len(_live(store_path)) == 3


def test_a_secret_forgotten_then_purged_is_gone_for_good(
    pm: Run, ids: dict[str, str], store_path: Path
) -> None:
    assert pm("forget", ids["secret"]).returncode == 0
    refused = pm("purge", "--reason", "forgotten")
    _one_line(refused, "purge 1 forgotten archive entry", "cannot be undone", "--yes")
    assert _archived(store_path) == 1
    done = pm("purge", "--reason", "forgotten", "--yes", "--json")
    assert done.returncode == 0 and json.loads(done.stdout) == {"purged": 1}
    assert _archived(store_path) == 0
    assert b"sk-live-123" not in store_path.read_bytes()
    restored = pm("restore", ids["secret"])
    assert restored.returncode != 0


def test_a_secret_is_purged_by_its_id_and_nothing_else(
    pm: Run, ids: dict[str, str], store_path: Path
) -> None:
    live = pm("purge", ids["secret"], "--yes")
    _one_line(live, f"record {ids['secret']} is live", "forget it first")
    assert pm("forget", "-t", "db", "--yes").returncode == 0
    assert pm("forget", ids["secret"]).returncode == 0
    archived = _archived(store_path)
    refused = pm("purge", ids["secret"])
    _one_line(refused, "purge every archived version of 1 record", "--yes")
    done = pm("purge", ids["secret"], "--yes", "--json")
    assert done.returncode == 0 and json.loads(done.stdout) == {"purged": 1}
    assert _archived(store_path) == archived - 1
    assert b"sk-live-123" not in store_path.read_bytes()
    again = pm("purge", ids["secret"], "--yes")
    _one_line(again, "no archive entries of", "nothing was purged")
    _one_line(pm("purge", "not-an-id", "--yes"), "not-an-id")


def test_purge_before_a_time_keeps_what_came_later(
    pm: Run, ids: dict[str, str], store_path: Path
) -> None:
    assert pm("forget", "-t", "db", "--yes").returncode == 0
    kept = pm("purge", "--before", "2000-01-01", "--yes")
    assert kept.returncode == 0 and "nothing was purged" in kept.stderr
    assert _archived(store_path) == 1
    done = pm("purge", "--all", "--yes")
    assert done.stdout == "purged 1 archive entry for good\n" and _archived(store_path) == 0


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        ([], "IDs, --before WHEN, --reason REASON, or --all"),
        (["--reason", "lost"], "--reason"),
        (["--before", "someday", "--yes"], "--before"),
        (["--all", "--reason", "pruned"], "not both"),
    ],
)
def test_purge_with_a_bad_option_is_one_line_and_purges_nothing(
    pm: Run, ids: dict[str, str], store_path: Path, args: list[str], fragment: str
) -> None:
    assert pm("forget", ids["secret"]).returncode == 0
    _one_line(pm("purge", *args), fragment)
    assert _archived(store_path) == 1


def test_purge_help_says_it_cannot_be_undone(pm: Run) -> None:
    shown = pm("purge", "--help")
    assert shown.returncode == 0 and "cannot be undone" in shown.stdout
