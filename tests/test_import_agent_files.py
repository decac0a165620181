"""Importing the files coding agents keep: CLAUDE.md, AGENTS.md, auto memory, basic-memory."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from prime_memory_folding import MemoryEngine
from prime_memory_folding.errors import InvalidInput
from prime_memory_folding.transfer.agent_files import (
    read_agents_md,
    read_basic_memory,
    read_claude_auto_memory,
)
from prime_memory_folding.transfer.packs import write_source
from tests.cli_helpers import one_line_error

# Claude Code's memory docs (code.claude.com/docs/en/memory): CLAUDE.md, `@path` imports.
CLAUDE_MD = """\
# Acme API

See @docs/testing.md for how we test.
@../secrets.md

## Code Style
- Use 4-space indentation
  in every Python file.
- Run the formatter before committing:

  ```sh
  ruff format .
  ```
1. Name tests after behaviour
   - not after the function they call

Never commit generated files.
"""
TESTING_MD = "## Testing\n- Never sleep in a test; inject the clock.\n"
# agents.md: plain Markdown, nested files in subprojects.
AGENTS_MD = "# Web package\n\n## Commands\n- Use pnpm, not npm.\n"

# Claude Code's auto memory: ~/.claude/projects/<project>/memory/MEMORY.md plus topic files.
MEMORY_MD = """\
# Memory

- [Debugging](debugging.md) - how to attach to the worker
- API rules: see `api-conventions.md`
- The user wants short answers.
"""
DEBUGGING_MD = """\
---
name: Debugging
description: how the worker is debugged
type: project
---
# Attaching
- Attach with `py-spy dump --pid PID`.
- Worker logs live in /var/log/acme.
"""
API_MD = "- Endpoints are plural nouns.\n"

# basic-memory (v0.24.0, docs/NOTE-FORMAT.md): front matter, observations, relations.
AUTH_NOTE = """\
---
title: Authentication Design
type: decision
tags: [auth, security]
permalink: authentication-design
---

# Authentication Design

We chose JWT after a two-day spike.

## Observations
- [decision] Use JWT tokens for stateless auth #security #api
- [constraint] Tokens expire after 15 minutes (limits exposure)
- [ ] a task, not an observation

## Relations
- implements [[API Security Requirements]]
- depends_on [[User Database Schema]] (for user ids)
"""
COFFEE_NOTE = "---\ntitle: Coffee\n---\n- [method] Pour over gives clarity #brewing\n"


def _agents_folder(tmp_path: Path) -> Path:
    (tmp_path / "secrets.md").write_text("- a rule from outside the folder\n")
    repo = tmp_path / "repo"
    (repo / "docs").mkdir(parents=True)
    (repo / "web").mkdir()
    (repo / "CLAUDE.md").write_text(CLAUDE_MD)
    (repo / "docs" / "testing.md").write_text(TESTING_MD)
    (repo / "web" / "AGENTS.md").write_text(AGENTS_MD)
    (repo / "README.md").write_text("- not an agent file\n")
    return repo


def _auto_memory(tmp_path: Path) -> Path:
    folder = tmp_path / "projects" / "-home-alice-api" / "memory"
    folder.mkdir(parents=True)
    (folder / "MEMORY.md").write_text(MEMORY_MD)
    (folder / "debugging.md").write_text(DEBUGGING_MD)
    (folder / "api-conventions.md").write_text(API_MD)
    return folder


def _basic_memory(tmp_path: Path) -> Path:
    folder = tmp_path / "basic-memory"
    (folder / "design").mkdir(parents=True)
    (folder / "design" / "auth.md").write_text(AUTH_NOTE)
    (folder / "coffee.md").write_text(COFFEE_NOTE)
    return folder


def _by_content(records: Any) -> dict[str, Any]:
    return {record.content: record for record in records}


def test_agents_md_gives_one_convention_per_rule(tmp_path: Path) -> None:
    source = read_agents_md(_agents_folder(tmp_path))
    rules = _by_content(source.records)
    assert set(rules) == {
        "See @docs/testing.md for how we test.",
        "Use 4-space indentation\nin every Python file.",
        "Run the formatter before committing:\n```sh\nruff format .\n```",
        "Name tests after behaviour\n- not after the function they call",
        "Never commit generated files.",
        "Never sleep in a test; inject the clock.",
        "Use pnpm, not npm.",
    }
    style = rules["Use 4-space indentation\nin every Python file."]
    assert (style.domain, style.subdomain) == ("convention", "code-style")
    assert style.tags == ("claude-md", "code-style")
    assert style.metadata == {"source": "CLAUDE.md", "section": "Code Style"}
    pnpm = rules["Use pnpm, not npm."]
    assert (pnpm.subdomain, pnpm.tags) == ("commands", ("agents-md", "commands"))
    assert pnpm.metadata["source"] == "web/AGENTS.md"
    imported = rules["Never sleep in a test; inject the clock."]
    assert imported.tags == ("claude-md", "testing")
    assert imported.metadata["imported_by"] == "CLAUDE.md"
    assert (source.lines, source.unit) == (3, "file")


def test_agents_md_follows_no_import_or_link_out_of_its_folder(tmp_path: Path) -> None:
    repo = _agents_folder(tmp_path)
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "AGENTS.md").write_text("- a linked rule from outside\n")
    (repo / "linked").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    source = read_agents_md(repo)
    contents = " ".join(record.content for record in source.records)
    assert "outside" not in contents
    reasons = {item.path: item.reason for item in source.left_out}
    assert reasons["CLAUDE.md: @../secrets.md"] == "an import from outside the folder"
    assert reasons["linked"] == "a link to outside the folder"


def test_agents_md_reads_one_file_and_imports_only_beside_it(tmp_path: Path) -> None:
    repo = _agents_folder(tmp_path)
    (repo / "CLAUDE.md").write_text("- Rule one\n- See @/etc/passwd.md and @~/notes.md\n")
    source = read_agents_md(repo / "CLAUDE.md")
    assert [r.content for r in source.records] == [
        "Rule one",
        "See @/etc/passwd.md and @~/notes.md",
    ]
    assert [item.reason for item in source.left_out] == ["an import from outside the folder"] * 2


def test_auto_memory_gives_topic_entries_and_skips_index_lines(tmp_path: Path) -> None:
    source = read_claude_auto_memory(_auto_memory(tmp_path))
    entries = _by_content(source.records)
    assert set(entries) == {
        "The user wants short answers.",
        "Attach with `py-spy dump --pid PID`.",
        "Worker logs live in /var/log/acme.",
        "Endpoints are plural nouns.",
    }
    attach = entries["Attach with `py-spy dump --pid PID`."]
    assert (attach.domain, attach.subdomain) == ("debugging", "attaching")
    assert attach.tags == ("attaching", "claude-auto-memory", "project")
    assert attach.metadata["description"] == "how the worker is debugged"
    assert entries["Endpoints are plural nouns."].domain == "api-conventions"
    assert entries["The user wants short answers."].domain == "memory"


def test_auto_memory_takes_the_index_file_as_its_folder(tmp_path: Path) -> None:
    folder = _auto_memory(tmp_path)
    assert len(read_claude_auto_memory(folder / "MEMORY.md").records) == 4


def test_basic_memory_gives_observations_relations_and_the_note_text(tmp_path: Path) -> None:
    source = read_basic_memory(_basic_memory(tmp_path))
    notes = _by_content(source.records)
    assert set(notes) == {
        "Use JWT tokens for stateless auth #security #api",
        "Tokens expire after 15 minutes",
        "Authentication Design implements API Security Requirements",
        "Authentication Design depends_on User Database Schema",
        "We chose JWT after a two-day spike.",
        "Pour over gives clarity #brewing",
    }
    jwt = notes["Use JWT tokens for stateless auth #security #api"]
    assert (jwt.domain, jwt.subdomain, jwt.tags) == (
        "decision",
        "observation",
        ("api", "decision", "security"),
    )
    assert jwt.metadata["permalink"] == "authentication-design"
    expiry = notes["Tokens expire after 15 minutes"]
    assert expiry.metadata["context"] == "limits exposure"
    relation = notes["Authentication Design depends_on User Database Schema"]
    assert (relation.subdomain, relation.tags) == ("relation", ("depends_on", "relation"))
    assert relation.metadata["to"] == "User Database Schema"
    body = notes["We chose JWT after a two-day spike."]
    assert (body.subdomain, body.tags) == ("note", ("auth", "security"))
    coffee = notes["Pour over gives clarity #brewing"]
    assert (coffee.domain, coffee.tags) == ("note", ("brewing", "method"))
    assert (source.lines, source.unit) == (2, "note")


@pytest.mark.parametrize(
    ("fmt", "make", "memories"),
    [
        ("agents-md", _agents_folder, 7),
        ("claude-auto-memory", _auto_memory, 4),
        ("basic-memory", _basic_memory, 6),
    ],
)
def test_import_counts_in_a_dry_run_then_adds_once_into_the_scope_given(
    run: Any, store_path: Path, tmp_path: Path, fmt: str, make: Any, memories: int
) -> None:
    folder = str(make(tmp_path))
    dry = run("import", folder, "--format", fmt, "--dry-run", "--json")
    assert dry.exit_code == 0, dry.output
    report = json.loads(dry.stdout)
    assert (report["read"], report["added"], report["dry_run"]) == (memories, memories, True)
    scoped = ["--scope", "project:github.com/acme/api"]
    added = json.loads(run("import", folder, "--format", fmt, *scoped, "--json").stdout)
    assert added["added"] == memories
    again = json.loads(run("import", folder, "--format", fmt, *scoped, "--json").stdout)
    assert (again["added"], again["already_present"]) == (0, memories)
    with MemoryEngine(store_path) as engine:
        assert engine.scope_counts() == {"project:github.com/acme/api": memories}


@pytest.mark.parametrize(
    ("name", "memories"),
    # MEMORY.md is read with the topic files beside it; CLAUDE.md and AGENTS.md alone.
    [("CLAUDE.md", 1), ("AGENTS.md", 1), ("MEMORY.md", 4)],
)
def test_auto_detects_agent_files_by_name(
    run: Any, tmp_path: Path, name: str, memories: int
) -> None:
    path = _auto_memory(tmp_path) / name
    path.write_text("- One rule\n")
    result = run("import", str(path), "--dry-run", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["read"] == memories


@pytest.mark.parametrize(
    ("fmt", "make", "message"),
    [
        ("agents-md", lambda p: p / "README.md", "is not a CLAUDE.md or AGENTS.md file"),
        ("claude-auto-memory", lambda p: p, "has no MEMORY.md"),
        ("basic-memory", lambda p: p / "missing", "does not exist"),
    ],
)
def test_bad_input_is_a_one_line_error(
    run: Any, tmp_path: Path, fmt: str, make: Any, message: str
) -> None:
    (tmp_path / "README.md").write_text("- hello\n")
    one_line_error(run("import", str(make(tmp_path)), "--format", fmt), message)


def test_a_bad_note_stops_the_import_before_anything_is_written(
    run: Any, store_path: Path, tmp_path: Path
) -> None:
    folder = _basic_memory(tmp_path)
    (folder / "broken.md").write_text("---\ntitle: Broken\n- [x] never closes\n")
    (folder / "latin1.md").write_bytes("- [fact] caf\xe9\n".encode("latin-1"))
    result = run("import", str(folder), "--format", "basic-memory")
    one_line_error(result, "broken.md:1: the front matter never closes", "nothing was imported")
    with MemoryEngine(store_path) as engine:
        assert engine.stats().records == 0
    source = read_basic_memory(folder)
    assert sorted(str(bad) for bad in source.bad) == [
        "broken.md:1: the front matter never closes with ---",
        "latin1.md: not UTF-8 text",
    ]


def test_missing_auto_memory_index_raises_invalid_input(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match=r"no MEMORY\.md"):
        read_claude_auto_memory(tmp_path)


def test_written_memories_keep_what_was_read(tmp_path: Path) -> None:
    with MemoryEngine(tmp_path / "m.db") as engine:
        report = write_source(engine, read_agents_md(_agents_folder(tmp_path)), scope="global")
        assert report.added == 7
        hits = engine.query(domain="convention", tags=["agents-md"], scopes=["*"])
        assert [hit.record.content for hit in hits] == ["Use pnpm, not npm."]
