"""Captured turns cite the files the session edited, and a bad path never loses a turn."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from prime_memory_folding import MemoryEngine
from prime_memory_folding.capture.drain import checked_cites, drain
from prime_memory_folding.capture.keep import MAX_FILE_CITES, memories, tool_capture
from prime_memory_folding.capture.spool import END, Captured, Spool
from prime_memory_folding.errors import InvalidInput
from tests.git_repos import git, make_repo

SCOPE = "project:github.com/acme/api"
#: The console script's code, as the installed ``prime-memory hook`` runs it.
HOOK = [sys.executable, "-c", "from prime_memory_folding.console import main; main()", "hook"]
ANSWER = "Fixed the rounding in the billing module; totals now match the invoices."


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    files = {"src/billing.py": "def total(items):\n    return sum(items)\n", "README.md": "# API\n"}
    return make_repo(tmp_path / "api", files)


def _captured(kind: str, body: dict[str, Any], n: int) -> Captured:
    return Captured(n, "s1", SCOPE, "claude-code", kind, body, 1000.0 + n)


def _edit(cwd: Path | str | None, *paths: str) -> dict[str, Any]:
    body: dict[str, Any] = {"edited": list(paths)}
    if cwd is not None:
        body["cwd"] = str(cwd)
    return body


def _answer_of(captures: list[Captured]) -> dict[str, Any]:
    return next(item for item in memories(captures) if item["subdomain"] == "answer")


# -- what a capture keeps ----------------------------------------------------------


def test_an_edit_keeps_the_hook_s_working_folder_when_it_exists(repo: Path) -> None:
    found = tool_capture("Edit", {"file_path": str(repo / "src" / "billing.py")}, {}, str(repo))
    assert found == {"edited": ["src/billing.py"], "cwd": str(repo)}
    # A folder that is not there (or none) adds nothing.
    assert tool_capture("Edit", {"file_path": "/p/a.py"}, {}, "/p") == {"edited": ["a.py"]}


def test_an_answer_cites_the_files_its_turn_edited_relative_to_the_repository(
    repo: Path,
) -> None:
    sub = repo / "src"
    answer = _answer_of(
        [
            _captured("tool", _edit(repo, "src/billing.py", "README.md"), 1),
            # Relative to a working folder below the root; then an absolute path.
            _captured("tool", _edit(sub, "billing.py", str(repo / "docs" / "new.md")), 2),
            _captured("answer", {"text": ANSWER}, 3),
        ]
    )
    assert answer["repo"] == str(repo.resolve())
    assert answer["cites"] == [
        {"path": "src/billing.py"},
        {"path": "README.md"},
        {"path": "docs/new.md"},
    ]
    assert answer["tags"] == [
        "file:src/billing.py",
        "file:README.md",
        "file:billing.py",
        f"file:{(repo / 'docs' / 'new.md').as_posix()}",
    ]


def test_files_outside_the_repository_are_not_cited(repo: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    git(other, "init", "-q")
    answer = _answer_of(
        [
            _captured("tool", _edit(repo, "../outside.py", "/etc/hosts", ".git/config"), 1),
            _captured("tool", _edit(other, "elsewhere.py"), 2),  # another repository
            _captured("tool", _edit(tmp_path, "loose.py"), 3),  # not in a repository
            _captured("tool", _edit(None, "src/billing.py"), 4),  # no working folder
            _captured("answer", {"text": ANSWER}, 5),
        ]
    )
    assert "cites" not in answer and "repo" not in answer
    assert len(answer["tags"]) == 6


def test_a_memory_cites_at_most_the_engine_s_limit(repo: Path) -> None:
    paths = [f"src/f{n}.py" for n in range(MAX_FILE_CITES + 5)]
    answer = _answer_of(
        [_captured("tool", _edit(repo, *paths), 1), _captured("answer", {"text": ANSWER}, 2)]
    )
    assert len(answer["cites"]) == MAX_FILE_CITES == 32


def test_a_fix_cites_the_files_edited_until_the_command_passed(repo: Path) -> None:
    found = memories(
        [
            _captured("tool", {"command": "pytest", "failed": True, "error": "E boom"}, 1),
            _captured("tool", _edit(repo, "src/billing.py"), 2),
            _captured("tool", {"command": "pytest", "failed": False}, 3),
        ]
    )
    [pitfall] = found
    assert pitfall["cites"] == [{"path": "src/billing.py"}]


# -- what the drain stores ---------------------------------------------------------


def test_checked_cites_keeps_only_what_the_engine_accepts(repo: Path) -> None:
    os.symlink(repo.parent, repo / "src" / "up")
    item = {
        "content": ANSWER,
        "repo": str(repo),
        "cites": [
            {"path": "src/billing.py"},
            {"path": "src/gone.py"},
            {"path": "src/up/x.py"},
            {"path": "src"},
        ],
    }
    assert checked_cites(item)["cites"] == [{"path": "src/billing.py"}]
    none_left = checked_cites({**item, "cites": [{"path": "src/gone.py"}]})
    assert "cites" not in none_left and "repo" not in none_left
    whole = {**item, "cites": [{"path": "README.md"}]}
    assert checked_cites(whole) is whole


def _spool_turn(spool: Spool, edit: dict[str, Any]) -> None:
    for n, (kind, body) in enumerate(
        [
            ("prompt", {"prompt": "Fix the rounding in billing totals"}),
            ("tool", edit),
            ("answer", {"text": ANSWER}),
            (END, {}),
        ]
    ):
        spool.append(session="s1", scope=SCOPE, host="claude-code", kind=kind, body=body, at=n)


def test_a_drained_turn_cites_the_edited_files_that_exist(repo: Path, tmp_path: Path) -> None:
    store = str(tmp_path / "memory.db")
    edit = _edit(repo, "src/billing.py", "src/missing.py", "../outside.py", "README.md")
    with Spool(tmp_path / "spool.db") as spool:
        _spool_turn(spool, edit)
        done = drain(spool, store=store)
    assert (done.captures, done.stored) == (4, 2)
    with MemoryEngine(store) as engine:
        [hit] = engine.query(scopes=[SCOPE], subdomain="answer")
    assert [(c.path, c.state) for c in hit.citations] == [
        ("src/billing.py", "verified"),
        ("README.md", "verified"),
    ]
    assert "file:src/missing.py" in hit.record.tags


def test_a_turn_whose_files_are_all_gone_is_stored_without_citations(
    repo: Path, tmp_path: Path
) -> None:
    store = str(tmp_path / "memory.db")
    with Spool(tmp_path / "spool.db") as spool:
        _spool_turn(spool, _edit(repo, "src/deleted.py"))
        assert drain(spool, store=store).stored == 2
        assert spool.pending() == 0
    with MemoryEngine(store) as engine:
        [hit] = engine.query(scopes=[SCOPE], subdomain="answer")
    assert hit.citations == () and "cites" not in hit.record.metadata


class _RefusesCitations:
    """An engine that refuses any batch with citations (a file changed since the check)."""

    def __init__(self) -> None:
        self.stored: list[dict[str, Any]] = []

    def store_many(self, items: Any) -> Any:
        if any("cites" in item for item in items):
            raise InvalidInput("item 1: citation path 'src/billing.py' is not a file")
        self.stored.extend(items)
        return []

    def close(self) -> None:
        pass


def test_a_batch_refused_for_its_citations_is_stored_without_them(
    repo: Path, tmp_path: Path
) -> None:
    writer = _RefusesCitations()
    with Spool(tmp_path / "spool.db") as spool:
        _spool_turn(spool, _edit(repo, "src/billing.py"))
        done = drain(spool, store=str(tmp_path / "memory.db"), open_engine=lambda _: writer)
        assert spool.pending() == 0
    assert done.stored == 2
    assert [item["content"] for item in writer.stored][1] == ANSWER
    assert all("cites" not in item and "repo" not in item for item in writer.stored)


def test_a_hook_session_s_edit_is_cited_by_the_stored_turn(repo: Path, tmp_path: Path) -> None:
    """Claude Code's hooks, each a process of its own, with the drain in the hook's process."""
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PRIME_MEMORY_SCOPE",)}
    env.update(PRIME_MEMORY_HOME=str(home), PRIME_MEMORY_HOOK_FOREGROUND="1")
    base = {"session_id": "s1", "cwd": str(repo), "transcript_path": str(tmp_path / "t.jsonl")}
    calls: list[tuple[str, dict[str, Any]]] = [
        (
            "tool",
            {
                "hook_event_name": "PostToolUse",
                "tool_name": "Edit",
                "tool_input": {"file_path": str(repo / "src" / "billing.py")},
                "tool_response": {"filePath": str(repo / "src" / "billing.py")},
            },
        ),
        ("stop", {"hook_event_name": "Stop", "last_assistant_message": ANSWER}),
    ]
    for event, payload in calls:
        done = subprocess.run(
            [*HOOK, event, "--host", "claude-code"],
            input=json.dumps({**base, **payload}).encode(),
            capture_output=True,
            env=env,
            timeout=60,
            check=False,
        )
        assert (done.returncode, done.stderr) == (0, b"")
    with MemoryEngine(home / "memory.db") as engine:
        [hit] = engine.query(scopes=["*"], subdomain="answer")
    assert hit.record.content == ANSWER
    assert [(c.path, c.state) for c in hit.citations] == [("src/billing.py", "verified")]
