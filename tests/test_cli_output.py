"""What ``prime-memory query`` prints, through the installed command in a subprocess.

A terminal of any width shows every hit's whole content and its tags, in a
table where one fits and a block per hit where it does not; a pipe gets one
tab-separated line per hit.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

PROGRAM = Path(sys.executable).with_name("prime-memory")
#: rich reads these to tell a terminal and its width; each case sets its own.
TERMINAL_SETTINGS = ("COLUMNS", "LINES", "TTY_COMPATIBLE", "TTY_INTERACTIVE", "FORCE_COLOR")
ANSI = re.compile(r"\x1b\[[0-9;]*m")
LONG_URL = "https://wiki.example.com/" + "architecture/decisions/" * 4 + "0007-sqlite-wal.html"
MEMORIES = [
    (
        "We use SQLite in WAL mode with synchronous=FULL, because losing a decision "
        "after a crash would be worse than slower commits; the benchmark shows the cost "
        f"is about eight percent on writes and nothing on reads. See {LONG_URL} for the "
        "whole discussion and the numbers behind it.",
        ["-d", "decision", "-s", "architecture", "-t", "sqlite", "-t", "storage"],
    ),
    (
        "Deploys run on Fridays\nafter the\tfreeze \\ lifts",
        ["-d", "workflow", "-t", "deploy", "-t", "release-train", "-t", "ops"],
    ),
    (
        "The API answers in JSON only",
        ["-d", "convention", "-t", "api", "--scope", "project:github.com/acme/api"],
    ),
    ("A memory without tags", []),
]


@pytest.fixture
def stored(run: Any) -> list[dict[str, Any]]:
    """The memories, stored in the test's store; each record as ``query --json`` gives it."""
    for content, args in MEMORIES:
        result = run("store", content, *args)
        assert result.exit_code == 0, result.output
    hits = run("query", "--all-scopes", "--limit", "20", "--json")
    assert hits.exit_code == 0, hits.output
    records = [hit["record"] for hit in json.loads(hits.stdout)]
    assert len(records) == len(MEMORIES)
    return records


def query(store_path: Path, **settings: str) -> str:
    """``prime-memory query`` on the store, with rich's terminal settings as given."""
    env = {k: v for k, v in os.environ.items() if k not in TERMINAL_SETTINGS}
    env.update(TERM="xterm-256color", **settings)
    done = subprocess.run(
        [str(PROGRAM), "--store", str(store_path), "query", "--all-scopes", "--limit", "20"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return ANSI.sub("", done.stdout)


def squeezed(text: str) -> str:
    """The text without whitespace, so wrapping it anywhere changes nothing."""
    return "".join(text.split())


def table_cells(output: str) -> dict[str, dict[str, str]]:
    """A rich table's cells per record id, each cell's wrapped lines joined, whitespace out."""
    header: list[str] = []
    records: dict[str, dict[str, str]] = {}
    current: dict[str, str] = {}
    for line in output.splitlines():
        if line.startswith(("┃", "│")):
            cells = line.strip()[1:-1].split(line[0])
            if line[0] == "┃":
                header = [a + b.strip() for a, b in zip(header or [""] * len(cells), cells)]
                continue
            row = dict(zip(header, (cell.strip() for cell in cells), strict=True))
            if row["id"]:
                current = records[row["id"]] = dict.fromkeys(header, "")
            for name, cell in row.items():
                current[name] += squeezed(cell)
    return records


def blocks(output: str, ids: list[str]) -> dict[str, str]:
    """Each record's block: its lines from the one its id begins to the next id's."""
    found: dict[str, str] = {}
    current = None
    for line in output.splitlines():
        leading = line.split(" ", 1)[0]
        if leading in ids:
            current = leading
            found[current] = ""
        if current is not None:
            found[current] += line + "\n"
    return found


@pytest.mark.parametrize("columns", [60, 80, 120, 200])
def test_a_terminal_of_any_width_shows_every_memory_whole_with_its_tags(
    stored: list[dict[str, Any]], store_path: Path, columns: int
) -> None:
    output = query(store_path, TTY_COMPATIBLE="1", NO_COLOR="1", COLUMNS=str(columns))
    assert max(len(line) for line in output.splitlines()) <= columns, "cut at the right edge"
    is_table = output.startswith("┏")
    if columns <= 80:
        assert not is_table
    if columns >= 200:
        assert is_table
    if is_table:
        cells = table_cells(output)
        assert sorted(cells) == sorted(rec["record_id"] for rec in stored)
        for rec in stored:
            shown = cells[rec["record_id"]]
            assert shown["content"] == squeezed(rec["content"])
            assert shown["tags"] == ",".join(rec["tags"])
            assert shown["scope"] == rec["scope"]
        return
    found = blocks(output, [rec["record_id"] for rec in stored])
    assert len(found) == len(stored)
    for rec in stored:
        block = found[rec["record_id"]]
        assert squeezed(block).endswith(squeezed(rec["content"]))
        assert "tags" + (",".join(rec["tags"]) or "-") in squeezed(block)
        assert rec["scope"] in squeezed(block)


def test_a_pipe_gets_one_tab_separated_line_per_memory(
    stored: list[dict[str, Any]], store_path: Path
) -> None:
    lines = query(store_path).splitlines()
    assert len(lines) == len(stored)
    by_id = {rec["record_id"]: rec for rec in stored}
    for line in lines:
        record_id, score, scope, labels, tags, content = line.split("\t")
        rec = by_id.pop(record_id)
        assert float(score) >= 0
        assert scope == rec["scope"]
        assert labels == f"{rec['domain']}/{rec['subdomain']}"
        assert tags == ",".join(rec["tags"])
        unescaped = re.sub(
            r"\\(.)", lambda m: {"n": "\n", "t": "\t", "r": "\r"}.get(m[1], m[1]), content
        )
        assert unescaped == rec["content"]
    assert not by_id
    assert "Deploys run on Fridays\\nafter the\\tfreeze \\\\ lifts" in "\n".join(lines)


def test_a_pipe_given_a_width_gets_the_terminal_layout(
    stored: list[dict[str, Any]], store_path: Path
) -> None:
    narrow = query(store_path, COLUMNS="80")
    assert not narrow.startswith("┏") and "\t" not in narrow
    assert sorted(blocks(narrow, [rec["record_id"] for rec in stored])) == sorted(
        rec["record_id"] for rec in stored
    )
    assert query(store_path, COLUMNS="200").startswith("┏")
