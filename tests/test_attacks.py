"""Attacks by a hostile team member, and by a hostile folder to import (docs/security.md).

Each test here failed before its protection was built: a store's location
reaching MCP clients, an existence oracle for another scope's records, stats
that count what a token may not see, reads that write, imports that follow
links out of their folder, and scope names that only look like others.
"""

from __future__ import annotations

import json
import os
import re
import unicodedata
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from prime_memory_folding import MemoryEngine
from prime_memory_folding.cli import cli
from prime_memory_folding.errors import InvalidInput
from prime_memory_folding.importers import read_markdown
from prime_memory_folding.scopes import normalise_scope

# -- look-alike scope names ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("given_name", "offending"),
    [
        ("project:\u0430", "U+0430"),  # Cyrillic a, alone: reads as project:a
        ("project:\u0430pi", "U+0430"),  # Cyrillic a among Latin letters
        ("project:github.com/\u0430\u0441me/api", "U+0441"),
        ("team:\u03b1lpha", "U+03B1"),  # Greek alpha
        ("user:\u0441\u043e\u0440\u0435", "U+0440"),  # "cope" in Cyrillic look-alikes
    ],
)
def test_a_scope_in_look_alike_letters_is_refused_naming_them(
    given_name: str, offending: str
) -> None:
    with pytest.raises(InvalidInput, match=re.escape(offending)):
        normalise_scope(given_name)


@pytest.mark.parametrize(
    ("given_name", "expected"),
    [
        ("\uff50\uff52\uff4f\uff4a\uff45\uff43\uff54:\uff41", "project:a"),  # fullwidth
        ("project:\ufb01les", "project:files"),  # the fi ligature
        ("project:\u65e5\u672c", "project:\u65e5\u672c"),
        ("project:github.com/acme/\u65e5\u672c\u8a9e\u30c9\u30ad\u30e5\u30e1\u30f3\u30c8", None),
        ("team:\ud55c\uad6d", None),
        ("project:\u043f\u0440\u043e\u0435\u043a\u0442", None),  # Cyrillic, not only look-alikes
        ("project:/home/\u0438\u0432\u0430\u043d/notes", None),  # folders in two scripts
        ("project:github.com/acme/api", None),
        ("user:alice", None),
        ("team:platform", None),
    ],
)
def test_valid_names_keep_working_and_compatibility_forms_are_one_name(
    given_name: str, expected: str | None
) -> None:
    assert normalise_scope(given_name) == (expected or given_name)


@given(st.text(min_size=1, max_size=12))
def test_a_scope_name_normalises_to_a_fixed_point(name: str) -> None:
    try:
        once = normalise_scope(f"team:{name}")
    except InvalidInput:
        return
    assert normalise_scope(once) == once
    assert unicodedata.normalize("NFKC", once) == once


# -- a hostile folder to import -------------------------------------------------------------


def _hostile_folder(tmp_path: Path) -> Path:
    """Notes beside a private key, links out of and around the folder, and tools' folders."""
    secret = tmp_path / "home" / ".ssh" / "id_ed25519"
    secret.parent.mkdir(parents=True)
    secret.write_text("-----BEGIN OPENSSH PRIVATE KEY----- KEYBYTES\n")
    (tmp_path / "home" / "diary").mkdir()
    (tmp_path / "home" / "diary" / "today.md").write_text("## Private\nDIARYTEXT\n")
    notes = tmp_path / "notes"
    (notes / "guides").mkdir(parents=True)
    (notes / "readme.md").write_text("## Setup\nRun make.\n")
    (notes / "guides" / "deploy.md").write_text("## Deploy\nShip on Fridays.\n")
    (notes / "key.md").symlink_to(secret)  # a link to a file outside
    (notes / "diary").symlink_to(tmp_path / "home" / "diary")  # a link to a folder outside
    (notes / "escape.md").symlink_to(Path("..") / "home" / "diary" / "today.md")
    (notes / "guides" / "loop").symlink_to(notes)  # a loop back to the top
    (notes / "same.md").symlink_to(notes / "guides" / "deploy.md")  # inside: read once
    (notes / "broken.md").symlink_to(notes / "missing.md")
    for tool in (".git", ".venv", "venv", "node_modules", "site-packages", "__pycache__"):
        (notes / tool).mkdir()
        (notes / tool / "TOOLTEXT.md").write_text(f"## {tool}\nTOOLTEXT in {tool}\n")
    for output in ("dist", "build"):
        (notes / "guides" / output).mkdir()
        (notes / "guides" / output / "x.md").write_text("## Built\nTOOLTEXT built\n")
    env = notes / "env"
    env.mkdir()
    (env / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (env / "README.md").write_text("## Env\nTOOLTEXT venv\n")
    (notes / ".gitignore").write_text(
        "# private notes\nsecret.md\nprivate/\n*.draft.md\n!keep.draft.md\n/top-only.md\n"
        "guides/**/tmp.md\n"
    )
    (notes / "secret.md").write_text("## Secret\nIGNOREDTEXT top\n")
    (notes / "private").mkdir()
    (notes / "private" / "a.md").write_text("## A\nIGNOREDTEXT private\n")
    (notes / "idea.draft.md").write_text("## Idea\nIGNOREDTEXT draft\n")
    (notes / "keep.draft.md").write_text("## Kept\nA draft that is kept.\n")
    (notes / "top-only.md").write_text("## Top\nIGNOREDTEXT anchored\n")
    (notes / "guides" / "top-only.md").write_text("## Not top\nAnchored patterns stay put.\n")
    (notes / "guides" / "a" / "b").mkdir(parents=True)
    (notes / "guides" / "a" / "b" / "tmp.md").write_text("## Tmp\nIGNOREDTEXT deep\n")
    (notes / "guides" / ".gitignore").write_text("local.md\n")
    (notes / "guides" / "local.md").write_text("## Local\nIGNOREDTEXT nested\n")
    (notes / "peek.md").symlink_to(notes / "private" / "a.md")  # inside, into an ignored folder
    (notes / "tools").symlink_to(notes / "node_modules")  # inside, into a tools' folder
    return notes


def test_a_markdown_import_stays_inside_its_folder_and_leaves_out_tools_and_ignored(
    tmp_path: Path,
) -> None:
    notes = _hostile_folder(tmp_path)
    read = read_markdown(notes)
    contents = "\n".join(record.content for record in read.records)
    for text in ("Run make.", "Ship on Fridays.", "A draft that is kept.", "Anchored patterns"):
        assert text in contents
    for leaked in ("KEYBYTES", "DIARYTEXT", "TOOLTEXT", "IGNOREDTEXT"):
        assert leaked not in contents
    assert contents.count("Ship on Fridays.") == 1  # the link to it, and the loop, add nothing
    left = {item.path: item.reason for item in read.left_out}
    assert left["key.md"] == left["diary"] == left["escape.md"] == "a link to outside the folder"
    assert left["broken.md"] == "a broken or looping link"
    assert left["same.md"] == "a link to a note read already"
    assert left["guides/loop"] == "a link to a folder read already"
    for name, reason in (
        (".git", "version control"),
        (".venv", "a virtual environment"),
        ("venv", "a virtual environment"),
        ("env", "a virtual environment"),
        ("node_modules", "dependencies"),
        ("site-packages", "dependencies"),
        ("__pycache__", "build output"),
        ("guides/dist", "build output"),
        ("guides/build", "build output"),
        ("secret.md", "ignored by .gitignore"),
        ("private", "ignored by .gitignore"),
        ("idea.draft.md", "ignored by .gitignore"),
        ("top-only.md", "ignored by .gitignore"),
        ("guides/a/b/tmp.md", "ignored by .gitignore"),
        ("guides/local.md", "ignored by .gitignore"),
    ):
        assert left[name] == reason, name
    assert left["peek.md"] == "a link into private, ignored by .gitignore"
    assert left["tools"] == "a link into node_modules, dependencies"


def test_a_fifo_named_like_a_note_neither_blocks_nor_is_read(tmp_path: Path) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "a.md").write_text("## A\nfine\n")
    os.mkfifo(notes / "pipe.md")
    read = read_markdown(notes)
    assert [record.content for record in read.records] == ["## A\nfine"]


def test_the_import_summary_lists_what_was_not_read(run: Any, tmp_path: Path) -> None:
    notes = _hostile_folder(tmp_path)
    result = run("import", str(notes), "--format", "markdown")
    assert result.exit_code == 0, result.output
    assert "not read: " in result.output
    assert "key.md: a link to outside the folder" in result.output
    assert "node_modules: dependencies" in result.output
    as_json = run("import", str(notes), "--format", "markdown", "--json", "--dry-run")
    report = json.loads(as_json.output)
    assert {"path": "private", "reason": "ignored by .gitignore"} in report["left_out"]
    listed = run("query", "--scopes", "*", "--limit", "100", "--json")
    for leaked in ("KEYBYTES", "DIARYTEXT", "TOOLTEXT", "IGNOREDTEXT"):
        assert leaked not in listed.output


# -- stats that count only what a token sees ------------------------------------------------


def _two_projects(memory: MemoryEngine) -> dict[str, str]:
    """Records in project:a and project:b, one forgotten in each, and an update in b."""
    ids = {
        "a": memory.store(
            "alpha note", domain="work", tags=["shared", "a-tag"], scope="project:a"
        ).record_id,
        "b": memory.store(
            "SECRET-B-CONTENT",
            domain="secret-b-domain",
            tags=["shared", "secret-b-tag"],
            scope="project:b",
        ).record_id,
    }
    for scope in ("project:a", "project:b"):
        memory.forget(memory.store(f"gone from {scope}", scope=scope).record_id)
    memory.update(ids["b"], importance=0.9)
    return ids


def test_scoped_stats_count_only_those_scopes_and_their_labels(backend_store: str) -> None:
    with MemoryEngine(backend_store, embedder="none", scope="global") as memory:
        _two_projects(memory)
        mine = memory.stats(["project:a"])
        assert (mine.records, mine.scopes) == (1, {"project:a": 1})
        assert mine.domains == {"work": 1}
        assert mine.subdomains == {"general": 1}
        assert mine.tags == {"a-tag": 1, "shared": 1}
        assert set(mine.registries["tag"]) == {"a-tag", "shared"}
        assert set(mine.registries["domain"]) == {"work"}
        assert mine.archived_by_reason == {"forgotten": 1}
        whole = memory.stats()
        assert whole.records == 2 and whole.tags["secret-b-tag"] == 1
        assert whole.archived_by_reason == {"forgotten": 2, "replaced": 1}
        assert memory.stats(["*"]).tags == whole.tags
        assert memory.stats([]).records == 0


# -- the store's location, on the local command line ---------------------------------------

SECRET = "S3cretPw"


def _with_query(url: str, item: str) -> str:
    return f"{url}{'&' if '?' in url else '?'}{item}"


@pytest.mark.parametrize("form", ["userinfo", "parameter", "encoded name", "sslpassword"])
def test_the_command_line_masks_a_password_in_every_form(
    pg_url: str, form: str, tmp_path: Path
) -> None:
    if form == "userinfo":
        url = pg_url.replace("postgres@", f"postgres:{SECRET}@", 1)
        assert SECRET in url
    elif form == "parameter":
        url = _with_query(pg_url, f"password={SECRET}")
    elif form == "encoded name":
        url = _with_query(pg_url, f"pass%77ord={SECRET}")
    else:
        url = _with_query(pg_url, f"sslpassword={SECRET}")
    runner = CliRunner()
    said = []
    for args in (
        ["store", "a note"],
        ["stats"],
        ["whoami"],
        ["scopes"],
        ["doctor"],
        ["query", "--text", "note"],
    ):
        result = runner.invoke(cli, ["--store", url, *args])
        said.append(result.output + (result.stderr if result.stderr_bytes else ""))
    assert "***" in "".join(said)
    assert SECRET not in "".join(said)


def test_a_malformed_url_is_refused_without_quoting_its_password() -> None:
    for url in (
        "postgresql://postgres@127.0.0.1:5432/db?password=S3%zzcret",
        "postgresql://postgres:S3%zzcret@127.0.0.1:5432/db",
    ):
        result = CliRunner().invoke(cli, ["--store", url, "stats"])
        assert result.exit_code != 0
        assert "S3%zzcret" not in result.output + result.stderr and "***" in result.stderr
