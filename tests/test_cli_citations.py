"""``prime-memory store --cite/--supersedes`` and ``query --as-of``, through click's runner."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import click
import pytest

from prime_memory_folding.cli.records import parse_cite
from tests.cli_helpers import one_line_error
from tests.git_repos import CLIENT, git, make_repo

DB = "import sqlite3\n\n\ndef connect(path):\n    return sqlite3.connect(path)\n"
DAY = 86_400.0


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A git repository, and the working directory the commands run in."""
    files = {"src/client.py": CLIENT, "src/db.py": DB, "README.md": "# Project\n"}
    root = make_repo(tmp_path / "project", files)
    monkeypatch.delenv("PRIME_MEMORY_SCOPE")
    monkeypatch.chdir(root)
    return root


def stored(run: Any, *args: str) -> dict[str, Any]:
    result = run("store", *args, "--json")
    assert result.exit_code == 0, result.output
    return dict(json.loads(result.stdout))


def hits(run: Any, *args: str) -> list[dict[str, Any]]:
    result = run("query", *args, "--json")
    assert result.exit_code == 0, result.output
    return list(json.loads(result.stdout))


def records(run: Any) -> int:
    return int(json.loads(run("stats", "--json").stdout)["records"])


@pytest.mark.parametrize(
    ("spec", "cite"),
    [
        ("README.md", {"path": "README.md"}),
        ("src/a.py:70-95", {"path": "src/a.py", "lines": "70-95"}),
        ("src/a.py:7", {"path": "src/a.py", "lines": "7"}),
        ("src/a.py:10-", {"path": "src/a.py", "lines": "10-"}),
        ("src/db.py#connect", {"path": "src/db.py", "symbol": "connect"}),
        ("dir:name/a.py", {"path": "dir:name/a.py"}),
    ],
)
def test_a_cite_option_is_a_path_with_lines_or_a_symbol(spec: str, cite: dict[str, str]) -> None:
    assert parse_cite(spec) == cite


@pytest.mark.parametrize("spec", ["", "  ", "#connect", ":10-12"])
def test_a_cite_option_without_a_path_is_a_usage_error(spec: str) -> None:
    with pytest.raises(click.UsageError, match="names no file"):
        parse_cite(spec)


def test_store_cites_code_and_query_shows_how_it_compares_now(run: Any, repo: Path) -> None:
    out = stored(
        run,
        "the client retries; connect opens the store",
        "--cite",
        "src/client.py:10-12",
        "--cite",
        "src/db.py#connect",
        "--cite",
        "README.md",
    )
    kept = out["record"]["metadata"]["cites"]
    assert [(c["path"], c.get("lines"), c.get("symbol")) for c in kept] == [
        ("src/client.py", "10-12", None),
        ("src/db.py", None, "connect"),
        ("README.md", None, None),
    ]
    [hit] = hits(run)
    assert [(c["path"], c["state"], c["lines"]) for c in hit["citations"]] == [
        ("src/client.py", "verified", "10-12"),
        ("src/db.py", "verified", "4-5"),
        ("README.md", "verified", None),
    ]

    (repo / "src" / "client.py").write_text("new 1\nnew 2\nnew 3\n" + CLIENT)
    (repo / "README.md").write_text("# Project, renamed\n")
    [hit] = hits(run)
    assert [(c["state"], c["lines"]) for c in hit["citations"]] == [
        ("moved", "13-15"),
        ("verified", "4-5"),
        ("stale", None),
    ]
    assert hit["score_parts"]["citations"] == 0.5


def test_the_query_table_lists_each_citation_under_the_content(
    run: Any, repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stored(run, "the client retries", "--cite", "src/client.py:10-12")
    (repo / "src" / "client.py").write_text("new 1\n" + CLIENT)
    monkeypatch.setenv("COLUMNS", "250")
    table = run("query").stdout
    assert "the client retries" in table
    assert "cites moved src/client.py:11-13: the lines moved" in table
    monkeypatch.setenv("COLUMNS", "60")  # too narrow for the table: a block per hit
    assert "cites moved src/client.py:11-13" in run("query").stdout


def test_a_hit_that_cites_nothing_has_no_citations(run: Any, repo: Path) -> None:
    stored(run, "no code here")
    [hit] = hits(run)
    assert "citations" not in hit


def test_a_renamed_file_is_followed_and_a_deleted_one_is_stale(run: Any, repo: Path) -> None:
    stored(run, "a", "--cite", "src/client.py:3-4")
    stored(run, "b", "--cite", "src/db.py#connect")
    git(repo, "mv", "src/client.py", "src/http.py")
    (repo / "src" / "db.py").unlink()
    found = {hit["record"]["content"]: hit["citations"][0] for hit in hits(run)}
    assert (found["a"]["path"], found["a"]["state"]) == ("src/http.py", "moved")
    assert found["b"]["state"] == "stale"


@pytest.mark.parametrize(
    ("spec", "fragment"),
    [
        ("../outside.py", "'..'"),
        ("/etc/passwd", "absolute"),
        ("src/link.py", "leaves the repository"),
        ("src/client.py:29-31", "past the end"),
        ("src/client.py:12-10", "src/client.py"),
        ("src/db.py#nothing", "not in the file"),
        ("src/missing.py", "not a file"),
        ("#connect", "names no file"),
    ],
)
def test_a_bad_cite_is_one_line_and_stores_nothing(
    run: Any, repo: Path, spec: str, fragment: str
) -> None:
    outside = repo.parent / "outside.py"
    outside.write_text("secret = 1\n")
    os.symlink(outside, repo / "src" / "link.py")
    stored(run, "something already stored")
    one_line_error(run("store", "about code", "--cite", "README.md", "--cite", spec), fragment)
    assert records(run) == 1


def test_project_names_the_repository_citations_are_in(
    run: Any, repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    one_line_error(run("store", "x", "--cite", "README.md"), "git repository")
    out = stored(run, "x", "--cite", "README.md", "--project", str(repo))
    assert out["record"]["metadata"]["cites"][0]["root"] == str(repo)
    # --scope names where it goes; --project still names the repository.
    out = stored(run, "y", "--cite", "README.md", "--project", str(repo), "--scope", "global")
    assert out["record"]["scope"] == "global"
    assert out["record"]["metadata"]["cites"][0]["root"] == str(repo)


def test_supersedes_closes_the_older_memory_and_as_of_finds_it(run: Any, clock: Any) -> None:
    old = stored(run, "The main database runs PostgreSQL 15")["record"]["record_id"]
    clock.advance(DAY)
    result = run("store", "The main database runs PostgreSQL 16", "--supersedes", old.upper())
    assert result.exit_code == 0, result.output
    verb, new = result.stdout.splitlines()[0].split()
    assert verb == "stored"
    assert f"superseded {old}" in result.stdout
    clock.advance(DAY)
    assert [h["record"]["record_id"] for h in hits(run, "main database")] == [new]
    assert [h["record"]["record_id"] for h in hits(run, "main database", "--as-of", "36h")] == [old]
    assert [h["record"]["record_id"] for h in hits(run, "--as-of", "1h")] == [new]
    piped = run("query", "--as-of", "36h").stdout
    assert piped.startswith(old)


def test_supersedes_in_json_names_the_closed_memory(run: Any) -> None:
    old = stored(run, "Builds run on Jenkins")["record"]["record_id"]
    out = stored(run, "Builds run on Buildkite", "--supersedes", old)
    assert out["superseded"] == old
    assert "superseded" not in stored(run, "something else")


@pytest.mark.parametrize(
    ("supersedes", "fragment"), [("not-an-id", "malformed"), ("0" * 32, "no record")]
)
def test_a_bad_supersedes_is_one_line_and_stores_nothing(
    run: Any, supersedes: str, fragment: str
) -> None:
    stored(run, "Builds run on Jenkins")
    one_line_error(run("store", "Builds run on Buildkite", "--supersedes", supersedes), fragment)
    assert records(run) == 1


def test_a_bad_as_of_is_one_line(run: Any) -> None:
    stored(run, "anything")
    one_line_error(run("query", "--as-of", "the day after never"), "--as-of")


def test_store_says_what_a_memory_possibly_supersedes(run: Any, clock: Any) -> None:
    old = stored(run, "The CI pipeline uses Node 18 for every job")["record"]["record_id"]
    clock.advance(60)
    result = run("store", "The CI pipeline uses Node 20 for every job")
    assert result.exit_code == 0, result.output
    first, second = result.stdout.splitlines()
    assert first.startswith("stored ")
    assert second.startswith(f"possibly supersedes {old} (") and "18" in second
    assert records(run) == 2  # a hint, never applied


def test_cite_commit_takes_the_code_as_it_was_then(run: Any, repo: Path) -> None:
    first = git(repo, "rev-parse", "HEAD").strip()
    (repo / "src" / "client.py").write_text(CLIENT.replace("line 11\n", "line eleven\n"))
    git(repo, "commit", "-q", "-am", "second")
    out = stored(
        run, "reviewed at the first commit", "--cite", "src/client.py:10-12",
        "--cite-commit", first[:8],
    )  # fmt: skip
    assert out["record"]["metadata"]["cites"][0]["commit"] == first
    [hit] = hits(run)
    assert [c["state"] for c in hit["citations"]] == ["stale"]
    bad = run("store", "x", "--cite", "README.md", "--cite-commit", "no-such-branch")
    assert bad.exit_code != 0 and "no-such-branch" in bad.output
    alone = run("store", "x", "--cite-commit", first)
    assert alone.exit_code != 0 and "--cite" in alone.output
    assert records(run) == 1
