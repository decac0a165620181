"""Scopes on the command line: whoami, scopes, rescope, --scope and --project."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from prime_memory_folding import MemoryEngine
from prime_memory_folding.cli import _common, cli
from prime_memory_folding.core.scopes import user_scope
from tests.cli_helpers import one_line_error

ME = user_scope()
REPO = "project:github.com/acme/api"
SCOPE_NAMES = ("global", ME, REPO, "team:core")


def _store(run: Any, content: str, *args: str) -> dict[str, Any]:
    result = run("store", content, *args, "--json")
    assert result.exit_code == 0, result.output
    record: dict[str, Any] = json.loads(result.stdout)["record"]
    return record


def _records(store_path: Path) -> dict[str, str]:
    """Every live record's id and scope, read with the engine itself."""
    with MemoryEngine(store_path, scope="global") as engine:
        ids = engine.match_ids(scopes=["*"])
        return {rid: engine.get(rid).scope for rid in ids}


def _hit_scopes(result: Result) -> list[str]:
    assert result.exit_code == 0, result.output
    return sorted(hit["record"]["scope"] for hit in json.loads(result.stdout))


def _repository(folder: Path, origin: str | None = "git@github.com:Acme/api.git") -> Path:
    """A folder that holds a git repository with this ``origin`` (no git needed)."""
    (folder / ".git").mkdir(parents=True)
    config = "[core]\n\tbare = false\n"
    if origin is not None:
        config += f'[remote "origin"]\n\turl = {origin}\n'
    (folder / ".git" / "config").write_text(config)
    return folder


@pytest.fixture
def four_scopes(run: Any) -> dict[str, str]:
    """One memory tagged ``x`` in each of global, the user's, REPO and another project."""
    ids = {}
    for scope in ("global", ME, REPO, "project:github.com/acme/web"):
        ids[scope] = _store(run, f"a note in {scope}", "-t", "x", "--scope", scope)["record_id"]
    return ids


# -- whoami ----------------------------------------------------------------------------


def test_whoami_shows_the_scope_from_the_environment_and_needs_no_store(
    run: Any, store_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PRIME_MEMORY_SCOPE", "User:Alice")
    text = run("whoami")
    assert text.exit_code == 0, text.output
    assert "current scope  user:alice" in text.stdout
    assert "PRIME_MEMORY_SCOPE" in text.stdout and "not created yet" in text.stdout
    found = json.loads(run("whoami", "--json").stdout)
    assert found["current"] == "user:alice" and found["source"] == "env"
    assert found["user"] == ME
    assert found["visible"] == list(dict.fromkeys(["user:alice", ME, "global"]))
    assert not store_path.exists()


def test_whoami_names_a_project_by_its_git_origin(
    run: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PRIME_MEMORY_SCOPE")
    repo = _repository(tmp_path / "api")
    (repo / "src").mkdir()
    for argv in (
        ["whoami", "--project", str(repo / "src"), "--json"],
        ["--project", str(repo), "whoami", "--json"],
    ):
        found = json.loads(run(*argv).stdout)
        assert (found["current"], found["source"]) == (REPO, "project")
        assert "git@github.com:Acme/api.git" in found["reason"]
    # A repository without an origin is named by its path.
    bare = _repository(tmp_path / "scratch", origin=None)
    found = json.loads(run("whoami", "--project", str(bare), "--json").stdout)
    assert found["current"] == f"project:{str(bare.resolve()).lower()}"


def test_whoami_follows_the_working_directory_and_claude_project_dir(
    run: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PRIME_MEMORY_SCOPE")
    repo = _repository(tmp_path / "api")
    web = _repository(tmp_path / "web", origin="https://github.com/acme/web")
    monkeypatch.chdir(repo)
    found = json.loads(run("whoami", "--json").stdout)
    assert (found["current"], found["source"]) == (REPO, "git")
    monkeypatch.setenv("CLAUDE_PROJECT_DIR", str(web))
    found = json.loads(run("whoami", "--json").stdout)
    assert (found["current"], found["source"]) == (
        "project:github.com/acme/web",
        "claude_project_dir",
    )
    # An explicit --scope wins over everything.
    found = json.loads(run("whoami", "--scope", "global", "--json").stdout)
    assert (found["current"], found["source"]) == ("global", "argument")


def test_whoami_with_a_missing_project_folder_is_one_line(
    run: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PRIME_MEMORY_SCOPE")
    one_line_error(run("whoami", "--project", str(tmp_path / "nowhere")), "does not exist")


# -- store, query, get, encode -------------------------------------------------------


def test_store_writes_to_the_scope_given_before_or_after_the_command(
    run: Any, store_path: Path
) -> None:
    after = _store(run, "tabs, not spaces", "-d", "preference", "--scope", "User:Bob")
    before = run("--scope", REPO, "store", "we use SQLite", "--json")
    assert before.exit_code == 0, before.output
    default = _store(run, "shared fact")
    assert after["scope"] == "user:bob" and default["scope"] == "global"
    assert json.loads(before.stdout)["record"]["scope"] == REPO
    assert sorted(_records(store_path).values()) == sorted(["user:bob", REPO, "global"])


def test_the_same_memory_in_two_scopes_is_two_records(run: Any) -> None:
    first = _store(run, "deploys run on Fridays", "-d", "workflow", "--scope", REPO)
    second = _store(run, "deploys run on Fridays", "-d", "workflow", "--scope", "global")
    assert first["record_id"] != second["record_id"]
    again = run("store", "deploys run on Fridays", "-d", "workflow", "--scope", REPO)
    assert again.stdout == f"reinforced {first['record_id']}\n"


def test_store_follows_the_project_folder(
    run: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PRIME_MEMORY_SCOPE")
    repo = _repository(tmp_path / "clone")
    assert _store(run, "a project note", "--project", str(repo))["scope"] == REPO


@pytest.mark.usefixtures("four_scopes")
def test_query_sees_the_visible_scopes_by_default_and_exactly_the_scopes_given(
    run: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PRIME_MEMORY_SCOPE", REPO)
    seen = _hit_scopes(run("query", "-t", "x", "--json"))
    assert seen == sorted([REPO, ME, "global"])
    # A --scope, before or after the command, reads exactly the scopes given.
    assert _hit_scopes(run("--scope", REPO, "query", "-t", "x", "--json")) == [REPO]
    only = _hit_scopes(run("query", "-t", "x", "--scope", "project:github.com/acme/web", "--json"))
    assert only == ["project:github.com/acme/web"]
    two = _hit_scopes(run("--scope", "global", "query", "-t", "x", "--scope", REPO, "--json"))
    assert two == sorted(["global", REPO])
    every = _hit_scopes(run("query", "-t", "x", "--all-scopes", "--json"))
    assert every == sorted(["global", ME, REPO, "project:github.com/acme/web"])
    assert _hit_scopes(run("query", "-t", "x", "--scope", "*", "--json")) == every
    # A well-formed scope that holds nothing matches nothing; it is not an error.
    assert _hit_scopes(run("query", "--scope", "team:nobody", "--json")) == []


@pytest.mark.usefixtures("four_scopes")
def test_query_default_follows_the_project(
    run: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PRIME_MEMORY_SCOPE")
    repo = _repository(tmp_path / "web", origin="ssh://git@github.com:22/acme/web.git")
    seen = _hit_scopes(run("query", "-t", "x", "--project", str(repo), "--json"))
    assert seen == sorted(["project:github.com/acme/web", ME, "global"])


def test_query_with_scope_and_all_scopes_is_a_usage_error(run: Any) -> None:
    _store(run, "one")
    result = run("query", "--scope", "global", "--all-scopes")
    assert result.exit_code == 2 and "--scope or --all-scopes" in result.stderr


def _table_rows(text: str) -> list[list[str]]:
    """The cells of a rich table's body rows."""
    return [
        [cell.strip() for cell in line.strip().strip("│").split("│")]
        for line in text.splitlines()
        if line.startswith("│")
    ]


def test_query_table_and_get_show_the_scope(run: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    rid = _store(run, "we use SQLite", "-d", "decision", "--scope", REPO)["record_id"]
    table = run("query", "-d", "decision", "--all-scopes")
    assert table.exit_code == 0, table.output
    assert "┃ scope" in table.stdout
    assert [row[:2] for row in _table_rows(table.stdout)] == [[rid, REPO]]
    shown = run("get", rid)
    assert f"scope      {REPO}" in shown.stdout
    assert json.loads(run("get", rid, "--json").stdout)["scope"] == REPO


def test_encode_puts_the_scope_in_the_address(run: Any) -> None:
    _store(run, "anything", "-d", "decision")

    def encoded(*args: str) -> dict[str, Any]:
        result = run("encode", "-d", "decision", "-t", "sqlite", "--json", *args)
        assert result.exit_code == 0, result.output
        found: dict[str, Any] = json.loads(result.stdout)
        return found

    here, there = encoded(), encoded("--scope", REPO)
    assert (here["scope"], there["scope"]) == ("global", REPO)
    assert here["domain_prime"] == there["domain_prime"]
    assert here["concept_bucket"] != there["concept_bucket"]
    stored = _store(run, "sqlite it is", "-d", "decision", "-t", "sqlite", "--scope", REPO)
    assert stored["record_id"][8:24] == there["record_id"][8:24]


# -- bad input ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["store", "x", "--scope", "nokind"], "has no kind"),
        (["store", "x", "--scope", "planet:mars"], "not a scope kind"),
        (["store", "x", "--scope", "   "], "scope is empty"),
        (["store", "x", "--scope", "user:a\x07b"], "control"),
        (["store", "x", "--scope", "user:" + "a" * 600], "over the limit"),
        (["store", "x", "--scope", "*"], "names none to write to"),
        (["--scope", "user:", "store", "x"], "needs a name"),
        (["query", "--scope", "global", "--scope", "bad kind:x"], "malformed"),
        (["export", "--scope", "nokind"], "has no kind"),
        (["import", "{pack}", "--scope", "nokind"], "has no kind"),
        (["import", "{pack}", "--only-scope", "planet:mars"], "not a scope kind"),
        (["stats", "--scope", "nokind"], "has no kind"),
        (["scopes", "--scope", "nokind"], "has no kind"),
        (["rescope", "{id}", "--to", "nokind"], "has no kind"),
        (["rescope", "--from", "nokind", "--to", "global", "--yes"], "has no kind"),
        (["--scope", "nokind", "update", "{id}", "-i", "0.9"], "has no kind"),
    ],
)
def test_a_malformed_scope_is_one_line_and_changes_nothing(
    run: Any, store_path: Path, tmp_path: Path, args: list[str], fragment: str
) -> None:
    rid = _store(run, "an existing memory", "--scope", REPO)["record_id"]
    pack = tmp_path / "pack.jsonl"
    assert run("export", str(pack)).exit_code == 0
    before = _records(store_path)
    stats = json.loads(run("stats", "--json").stdout)
    result = run(*(arg.format(pack=pack, id=rid) for arg in args))
    one_line_error(result, fragment)
    assert _records(store_path) == before
    after = json.loads(run("stats", "--json").stdout)
    assert after["records"] == stats["records"] and after["scopes"] == {REPO: 1}


def test_a_malformed_scope_on_a_new_store_creates_nothing(tmp_path: Path) -> None:
    target = tmp_path / "new" / "memory.db"
    result = CliRunner().invoke(cli, ["--store", str(target), "store", "x", "--scope", "x:"])
    one_line_error(result, "not a scope kind")
    assert not (tmp_path / "new").exists()


@pytest.mark.parametrize(
    "command",
    [
        ["store", "x"],
        ["stats"],
        ["scopes"],
        ["whoami"],
        ["encode"],
        ["serve"],
        ["ide-config", "vscode"],
    ],
)
def test_commands_that_take_one_scope_refuse_several(run: Any, command: list[str]) -> None:
    _store(run, "one")
    result = run(*command, "--scope", "global", "--scope", REPO)
    assert result.exit_code == 2 and "give one --scope" in result.stderr
    assert _hit_scopes(run("query", "--all-scopes", "--json")) == ["global"]


# -- stats and scopes -------------------------------------------------------------------


@pytest.mark.usefixtures("four_scopes")
def test_stats_shows_counts_per_scope_and_the_current_scope_with_its_reason(
    run: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    _store(run, "a second project note", "--scope", REPO)
    summary = json.loads(run("stats", "--scope", REPO, "--json").stdout)
    assert summary["scopes"] == {
        "global": 1,
        ME: 1,
        REPO: 2,
        "project:github.com/acme/web": 1,
    }
    assert summary["current_scope"] == REPO and "explicitly" in summary["scope_reason"]
    assert summary["visible_scopes"] == [REPO, ME, "global"]
    text = run("stats").stdout
    assert "current scope: global - from PRIME_MEMORY_SCOPE" in text
    assert f"a query sees: global, {ME}" in text
    rows = {row[0]: row[1:] for row in _table_rows(text) if row[0] in SCOPE_NAMES}
    assert rows[REPO] == ["2", ""] and rows["global"] == ["1", "current"]
    assert rows[ME] == ["1", "visible"]


@pytest.mark.usefixtures("four_scopes")
def test_scopes_lists_each_scope_with_its_count_and_marks(
    run: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    listed = json.loads(run("--scope", "team:platform", "scopes", "--json").stdout)
    assert listed["current"] == "team:platform" and listed["source"] == "argument"
    rows = {row["scope"]: row for row in listed["scopes"]}
    assert set(rows) == {"global", ME, REPO, "project:github.com/acme/web", "team:platform"}
    assert rows["team:platform"] == {
        "scope": "team:platform",
        "records": 0,
        "current": True,
        "visible": True,
    }
    assert rows[REPO]["records"] == 1 and not rows[REPO]["visible"]
    assert rows["global"]["visible"] and not rows["global"]["current"]
    text = run("scopes").stdout
    assert "current scope: global - from PRIME_MEMORY_SCOPE" in text
    rows = {row[0]: row[1:] for row in _table_rows(text)}
    assert rows == {
        "global": ["1", "current"],
        ME: ["1", "visible"],
        REPO: ["1", ""],
        "project:github.com/acme/web": ["1", ""],
    }


def test_scopes_on_a_missing_store_is_one_line(tmp_path: Path) -> None:
    missing = tmp_path / "none.db"
    result = CliRunner().invoke(cli, ["--store", str(missing), "scopes"])
    one_line_error(result, "no store at")
    assert not missing.exists()


# -- rescope ------------------------------------------------------------------------------


def test_rescope_by_id_moves_records_and_keeps_their_ids(
    run: Any, store_path: Path, four_scopes: dict[str, str]
) -> None:
    rid = four_scopes[REPO]
    result = run("rescope", rid, four_scopes["global"], "--to", "Global")
    assert result.exit_code == 0, result.output
    assert result.stdout == "moved 1 record to global (1 already there)\n"
    assert _records(store_path)[rid] == "global"
    assert json.loads(run("get", rid, "--json").stdout)["scope"] == "global"
    again = run("rescope", rid, "--to", "global", "--json")
    assert json.loads(again.stdout)["moved"] == 0 and json.loads(again.stdout)["already_there"] == 1


def test_rescope_by_id_is_all_or_nothing(
    run: Any, store_path: Path, four_scopes: dict[str, str]
) -> None:
    before = _records(store_path)
    result = run("rescope", four_scopes[REPO], "0" * 32, "--to", "global")
    one_line_error(result, "no record")
    one_line_error(run("rescope", four_scopes[REPO], "not-an-id", "--to", "global"), "malformed")
    assert _records(store_path) == before


def test_rescope_that_would_make_a_duplicate_moves_nothing(run: Any, store_path: Path) -> None:
    here = _store(run, "deploys run on Fridays", "--scope", REPO)["record_id"]
    _store(run, "deploys run on Fridays", "--scope", "global")
    other = _store(run, "another note", "--scope", REPO)["record_id"]
    before = _records(store_path)
    one_line_error(run("rescope", other, here, "--to", "global"), "Nothing was moved")
    assert _records(store_path) == before


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--to", "global"], "nothing to move"),
        (["-d", "decision", "--to", "global"], "need --from"),
        (["{id}", "--from", "global", "--to", REPO], "not both"),
        (["{id}", "-t", "x", "--to", REPO], "not both"),
        (["{id}"], "Missing option '--to'"),
    ],
)
def test_rescope_usage_errors_are_one_line_with_status_2(
    run: Any, four_scopes: dict[str, str], args: list[str], fragment: str
) -> None:
    result = run("rescope", *(arg.format(id=four_scopes[REPO]) for arg in args))
    assert result.exit_code == 2
    one_line_error(result, fragment)


def _filter_move(run: Any, *extra: str, input: str | None = None) -> Result:
    return run(
        "rescope", "--from", REPO, "--from", ME, "-t", "x", "--to", "team:core", *extra,
        input=input,
    )  # fmt: skip


def test_rescope_by_filter_refuses_without_a_terminal_unless_yes(
    run: Any, store_path: Path, four_scopes: dict[str, str]
) -> None:
    before = _records(store_path)
    refused = _filter_move(run)
    one_line_error(refused, "move 2 records", "not a terminal", "--yes")
    assert _records(store_path) == before
    moved = _filter_move(run, "--yes")
    assert moved.exit_code == 0 and moved.stdout == "moved 2 records to team:core\n"
    after = _records(store_path)
    assert after[four_scopes[REPO]] == after[four_scopes[ME]] == "team:core"
    assert after[four_scopes["global"]] == "global"
    assert set(after) == set(before)


@pytest.mark.parametrize(("answer", "moves"), [("y\n", True), ("n\n", False), ("\n", False)])
def test_rescope_by_filter_asks_with_the_count(
    run: Any,
    store_path: Path,
    four_scopes: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
    answer: str,
    moves: bool,
) -> None:
    monkeypatch.setattr(_common, "stdin_is_terminal", lambda: True)
    result = _filter_move(run, input=answer)
    assert "Move 2 records from" in result.stderr and "team:core?" in result.stderr
    assert four_scopes[REPO] in result.stderr
    scopes = _records(store_path)
    if moves:
        assert result.exit_code == 0 and "moved 2 records to team:core" in result.stdout
        assert scopes[four_scopes[REPO]] == "team:core"
    else:
        assert result.exit_code == 1 and "nothing was moved" in result.stderr
        assert scopes[four_scopes[REPO]] == REPO and "team:core" not in scopes.values()


def test_rescope_dry_run_shows_what_would_move_and_moves_nothing(
    run: Any, store_path: Path, four_scopes: dict[str, str]
) -> None:
    before = _records(store_path)
    shown = _filter_move(run, "--dry-run")
    assert shown.exit_code == 0, shown.output
    assert shown.stdout.startswith("would move 2 records from ")
    assert four_scopes[REPO] in shown.stdout and four_scopes[ME] in shown.stdout
    assert "dry run: nothing was moved" in shown.stdout
    plan = json.loads(_filter_move(run, "--dry-run", "--json").stdout)
    assert plan["dry_run"] and plan["would_move"] == 2 and plan["moved"] == 0
    assert sorted(plan["ids"]) == sorted([four_scopes[REPO], four_scopes[ME]])
    by_id = json.loads(
        run("rescope", four_scopes[REPO], "--to", "global", "--dry-run", "--json").stdout
    )
    assert by_id["ids"] == [four_scopes[REPO]]
    assert _records(store_path) == before


def test_rescope_by_filter_respects_the_label_gates(run: Any, store_path: Path) -> None:
    keep = _store(run, "a task", "-d", "task", "-t", "x", "--scope", REPO)["record_id"]
    move = _store(run, "a preference", "-d", "preference", "-t", "x", "--scope", REPO)["record_id"]
    other = _store(run, "untagged preference", "-d", "preference", "--scope", REPO)["record_id"]
    result = run(
        "rescope", "--from", REPO, "-d", "preference", "-t", "x", "--to", ME, "--yes", "--json"
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["ids"] == [move] and report["moved"] == 1
    assert _records(store_path) == {keep: REPO, move: ME, other: REPO}
    none = run("rescope", "--from", REPO, "-d", "nothing_here", "--to", ME, "--yes")
    assert none.exit_code == 0 and "no records match" in none.stderr


def test_rescope_from_every_scope(run: Any, store_path: Path, four_scopes: dict[str, str]) -> None:
    result = run("rescope", "--from", "*", "-t", "x", "--to", "global", "--yes")
    assert result.exit_code == 0 and "moved 3 records to global (1 already there)" in result.stdout
    assert set(_records(store_path).values()) == {"global"}
    assert set(_records(store_path)) == set(four_scopes.values())


# -- export and import --------------------------------------------------------------------


def _pack_scopes(path: Path) -> list[str]:
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    return sorted(line["scope"] for line in lines[1:])


def test_export_selects_scopes_and_import_keeps_them(
    run: Any, tmp_path: Path, four_scopes: dict[str, str]
) -> None:
    everything, some = tmp_path / "all.jsonl", tmp_path / "some.jsonl"
    assert run("export", str(everything)).exit_code == 0
    assert _pack_scopes(everything) == sorted(four_scopes)
    assert run("export", str(some), "--scope", REPO, "--scope", ME).exit_code == 0
    assert _pack_scopes(some) == sorted([REPO, ME])
    assert run("export", str(some), "--all-scopes").exit_code == 0
    assert _pack_scopes(some) == sorted(four_scopes)
    other = tmp_path / "other.db"
    report = json.loads(
        run("--store", str(other), "import", str(everything), "--json", store=False).stdout
    )
    assert report["added_per_scope"] == {scope: 1 for scope in four_scopes}
    assert set(_records(other).values()) == set(four_scopes)
    assert set(_records(other)) == set(four_scopes.values())


def test_import_into_one_scope_and_of_chosen_scopes(
    run: Any, tmp_path: Path, four_scopes: dict[str, str]
) -> None:
    pack = tmp_path / "all.jsonl"
    assert run("export", str(pack)).exit_code == 0
    into = tmp_path / "into.db"
    result = run("--store", str(into), "import", str(pack), "--scope", "team:core", store=False)
    assert result.exit_code == 0, result.output
    assert "per scope: team:core 4" in result.stdout
    assert set(_records(into).values()) == {"team:core"}
    chosen = tmp_path / "chosen.db"
    result = run(
        "--store", str(chosen), "import", str(pack), "--only-scope", REPO, "--only-scope", "global",
        store=False,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "2 memories in other scopes left out" in result.stdout
    assert sorted(_records(chosen).values()) == sorted([REPO, "global"])
    both_at = tmp_path / "both.db"
    both = run(
        "--store", str(both_at), "import", str(pack), "--scope", "team:core", "--only-scope", REPO,
        store=False,
    )  # fmt: skip
    assert both.exit_code == 0, both.output
    assert list(_records(both_at).values()) == ["team:core"]  # selected by REPO, then moved


def test_imported_notes_go_to_the_current_scope(
    run: Any, store_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PRIME_MEMORY_SCOPE")
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "a.md").write_text("A note #idea")
    repo = _repository(tmp_path / "api")
    result = run("import", str(notes), "--project", str(repo))
    assert result.exit_code == 0, result.output
    assert set(_records(store_path).values()) == {REPO}


# -- serve and ide-config ------------------------------------------------------------------


def test_serve_passes_the_scope_and_project_to_the_server(
    run: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from prime_memory_folding.mcp.args import parser

    seen: list[list[str]] = []
    fake = types.ModuleType("prime_memory_folding.mcp.server")
    fake.main = lambda argv: seen.append(argv) or 0  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "prime_memory_folding.mcp.server", fake)
    project = tmp_path / "my project"
    project.mkdir()
    result = run("--scope", "User:Alice", "serve", "--project", str(project))
    assert result.exit_code == 0, result.output
    parsed = parser().parse_args(seen[-1])
    assert (parsed.scope, parsed.project) == ("user:alice", str(project.resolve()))
    assert run("serve").exit_code == 0
    assert not any(arg.startswith(("--scope", "--project")) for arg in seen[-1])
    # A client's unexpanded variable is the server's to handle.
    assert run("serve", "--project", "${workspaceFolder}").exit_code == 0
    assert parser().parse_args(seen[-1]).project == "${workspaceFolder}"
    one_line_error(run("serve", "--scope", "nokind"), "has no kind")
    one_line_error(run("serve", "--project", str(tmp_path / "nowhere")), "not a folder")
    assert len(seen) == 3


@pytest.mark.parametrize(
    ("client", "expected", "note"),
    [
        ("claude-code", [], "CLAUDE_PROJECT_DIR"),
        ("vscode", ["--project", "${workspaceFolder}"], "${workspaceFolder}"),
        ("cursor", ["--project", "${workspaceFolder}"], "home folder"),
        ("jetbrains", [], "--project DIR"),
        ("claude-desktop", [], "--scope user:NAME"),
    ],
)
def test_ide_config_emits_what_makes_scope_resolution_work(
    run: Any, store_path: Path, client: str, expected: list[str], note: str
) -> None:
    result = run("ide-config", client)
    assert result.exit_code == 0, result.output
    assert note in result.stderr and "Scopes:" in result.stderr
    args = _snippet_args(client, result.stdout)
    assert args[-2:] == ["--store", str(store_path.resolve())]
    assert [
        arg for arg in args if arg in ("--project", "${workspaceFolder}", "--scope")
    ] == expected


def _snippet_args(client: str, text: str) -> list[str]:
    if client == "claude-code":
        import shlex

        words = shlex.split(text)
        return words[words.index("--") + 2 :]
    document = json.loads(text)
    servers = document["servers" if client == "vscode" else "mcpServers"]
    args: list[str] = servers["prime-memory"]["args"]
    return args


@pytest.mark.parametrize(
    "client", ["claude-code", "vscode", "cursor", "jetbrains", "claude-desktop"]
)
def test_ide_config_pins_a_given_scope_or_project(run: Any, tmp_path: Path, client: str) -> None:
    pinned = run("ide-config", client, "--scope", "User:Me")
    assert _snippet_args(client, pinned.stdout)[:2] == ["--scope", "user:me"]
    assert "${workspaceFolder}" not in pinned.stdout and "pins --scope user:me" in pinned.stderr
    project = tmp_path / "code"
    project.mkdir()
    fixed = run("--project", str(project), "ide-config", client)
    assert _snippet_args(client, fixed.stdout)[:2] == ["--project", str(project.resolve())]
    one_line_error(run("ide-config", client, "--project", str(tmp_path / "nope")), "not a folder")


# -- a property ------------------------------------------------------------------------------


@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    placed=st.lists(st.tuples(st.sampled_from(SCOPE_NAMES), st.booleans()), min_size=1, max_size=8),
    read=st.lists(st.sampled_from(SCOPE_NAMES), min_size=1, max_size=3),
)
def test_query_hits_are_exactly_the_records_of_the_scopes_read(
    tmp_path_factory: pytest.TempPathFactory,
    placed: list[tuple[str, bool]],
    read: list[str],
) -> None:
    path = tmp_path_factory.mktemp("prop") / "memory.db"
    expected = set()
    with MemoryEngine(path, scope="global") as engine:
        for n, (scope, tagged) in enumerate(placed):
            rec = engine.store(f"note {n}", tags=["x"] if tagged else [], scope=scope)
            if tagged and scope in read:
                expected.add(rec.record_id)
    argv = ["--store", str(path), "query", "-t", "x", "--limit", "100", "--json"]
    for scope in read:
        argv += ["--scope", scope]
    result = CliRunner().invoke(cli, argv)
    assert result.exit_code == 0, result.output
    hits = json.loads(result.stdout)
    assert {hit["record"]["record_id"] for hit in hits} == expected
    assert all(hit["record"]["scope"] in read for hit in hits)
