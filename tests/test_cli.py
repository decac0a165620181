"""The ``prime-memory`` command line, through click's runner."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner, Result

from prime_memory_folding import MemoryEngine, NotAvailable
from prime_memory_folding.cli import cli

COMMANDS = sorted(cli.commands)


@pytest.fixture
def run(store_path: Path, clock: Any) -> Any:
    runner = CliRunner()

    def invoke(*args: str, store: bool = True, input: str | None = None) -> Result:
        argv = (["--store", str(store_path)] if store else []) + list(args)
        return runner.invoke(cli, argv, obj={"clock": clock}, input=input)

    return invoke


def _one_line_error(result: Result, *fragments: str) -> None:
    assert result.exit_code != 0
    assert result.exception is None or isinstance(result.exception, SystemExit)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.output, result.output
    for fragment in fragments:
        assert fragment in lines[0]


def _store(run: Any, content: str, *args: str) -> str:
    result = run("store", content, *args, "--json")
    assert result.exit_code == 0, result.output
    return str(json.loads(result.stdout)["record"]["record_id"])


@pytest.mark.parametrize("name", COMMANDS)
def test_every_command_has_help_text_and_examples(name: str) -> None:
    command = cli.commands[name]
    assert command.help and command.help.strip()
    result = CliRunner().invoke(cli, [name, "--help"])
    assert result.exit_code == 0
    assert "Examples:" in result.output and f"prime-memory {name}" in result.output
    assert "--store" in result.output or name == "demo"


def test_the_group_help_lists_every_command() -> None:
    result = CliRunner().invoke(cli, ["--help"])
    assert result.exit_code == 0
    assert all(name in result.output for name in COMMANDS)


def test_store_then_get_query_update_and_forget(run: Any) -> None:
    rid = _store(run, "We use SQLite in WAL mode", "-d", "decision", "-t", "architecture")
    assert (
        run("store", "We use SQLite in WAL mode", "-d", "decision", "-t", "architecture").stdout
        == f"reinforced {rid}\n"
    )
    got = run("get", rid)
    assert got.exit_code == 0 and "We use SQLite in WAL mode" in got.stdout
    table = run("query", "-d", "decision", "-t", "architecture")
    assert table.exit_code == 0 and rid in table.stdout
    hits = json.loads(run("query", "--any-tag", "architecture", "--json").stdout)
    assert [hit["record"]["record_id"] for hit in hits] == [rid]
    updated = run("update", rid, "-i", "0.9", "-t", "db", "--json")
    assert json.loads(updated.stdout)["importance"] == 0.9
    assert json.loads(run("get", rid, "--json").stdout)["tags"] == ["db"]
    assert run("forget", rid).stdout == f"forgot {rid}\n"
    _one_line_error(run("get", rid), "no record")


def test_store_reads_standard_input(run: Any) -> None:
    result = run("store", "-", "-d", "workflow", input="Deploys run on Fridays\n")
    assert result.exit_code == 0
    hits = json.loads(run("query", "-d", "workflow", "--json").stdout)
    assert hits[0]["record"]["content"] == "Deploys run on Fridays"


def test_query_with_no_hits_says_so(run: Any) -> None:
    result = run("query", "-t", "nothing_has_this")
    assert result.exit_code == 0 and "no memories match" in result.stderr


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["get", "not-an-id"], "malformed"),
        (["forget", "0" * 32], "no record"),
        (["store", "   "], "content is empty"),
        (["store", "x", "-i", "2"], "importance"),
        (["query", "--min-strength", "5"], "min_strength"),
        (["update", "0" * 32, "-i", "0.1"], "no record"),
        (["store", "x", "--metadata", "[1]"], "JSON object"),
        (["export", "--since", "yesterday-ish"], "not a time"),
    ],
)
def test_errors_are_one_line_and_non_zero(run: Any, args: list[str], fragment: str) -> None:
    _one_line_error(run(*args), fragment)


def test_update_without_changes_is_a_usage_error(run: Any) -> None:
    result = run("update", "0" * 32)
    assert result.exit_code == 2 and "nothing to change" in result.stderr


def test_text_query_that_the_store_cannot_serve_is_one_line(
    run: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(self: MemoryEngine, **_: Any) -> Any:
        raise NotAvailable("text queries are not available in this store")

    monkeypatch.setattr(MemoryEngine, "query", refuse)
    _one_line_error(run("query", "how do we deploy"), "text queries are not available")


def test_store_option_works_after_the_command_and_home_is_the_default(
    tmp_path: Path, memory_home: Path
) -> None:
    runner = CliRunner()
    elsewhere = tmp_path / "elsewhere.db"
    assert runner.invoke(cli, ["store", "a", "--store", str(elsewhere)]).exit_code == 0
    assert runner.invoke(cli, ["store", "b"]).exit_code == 0
    assert elsewhere.exists() and (memory_home / "memory.db").exists()
    result = runner.invoke(cli, ["query", "--json"])
    assert [hit["record"]["content"] for hit in json.loads(result.stdout)] == ["b"]


def test_encode_and_stats(run: Any) -> None:
    _store(run, "x", "-d", "decision", "-t", "sqlite")
    encoded = json.loads(run("encode", "-d", "decision", "-t", "sqlite", "--json").stdout)
    assert encoded["domain_prime"] == 11 and not encoded["provisional"]
    assert "record id" in run("encode", "-d", "newone").stdout
    stats = json.loads(run("stats", "--json").stdout)
    assert stats["records"] == 1 and stats["domains"] == {"decision": 1}
    text = run("stats").stdout
    assert "1 records" in text and "sqlite" in text


@pytest.mark.parametrize(
    "command", [["fold"], ["fold", "--dry-run"], ["unfold", "0" * 32], ["restore", "0" * 32]]
)
def test_folding_commands_without_folding_are_one_line(
    run: Any, monkeypatch: pytest.MonkeyPatch, command: list[str]
) -> None:
    for name in ("fold", "unfold", "restore"):
        monkeypatch.delattr(MemoryEngine, name, raising=False)
    _one_line_error(run(*command), "folding is not available")


@pytest.mark.skipif(not hasattr(MemoryEngine, "fold"), reason="folding is not in this tree")
def test_fold_dry_run_prints_a_report(run: Any) -> None:
    _store(run, "one")
    result = run("fold", "--dry-run")
    assert result.exit_code == 0 and "dry run" in result.stdout
    assert run("fold", "--dry-run", "--json").exit_code == 0


def test_export_and_import_round_trip(run: Any, tmp_path: Path) -> None:
    rid = _store(run, "We use SQLite", "-d", "decision")
    pack = tmp_path / "pack.jsonl"
    result = run("export", str(pack))
    assert result.exit_code == 0 and "exported 1 records" in result.stderr
    other = tmp_path / "other.db"
    first = run("--store", str(other), "import", str(pack), store=False)
    assert first.exit_code == 0 and "added 1 of 1" in first.stdout
    again = run("import", str(pack), "--store", str(other), "--json", store=False)
    assert json.loads(again.stdout)["already_present"] == 1
    copy = json.loads(run("get", rid, "--json", "--store", str(other), store=False).stdout)
    assert copy["content"] == "We use SQLite"


def test_export_to_a_pipe_is_pure_json_lines(run: Any) -> None:
    _store(run, "one")
    _store(run, "two")
    result = run("export")
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert lines[0]["format"] == "prime-memory-pack" and len(lines) == 3


def test_import_dry_run_writes_nothing(run: Any, tmp_path: Path) -> None:
    pack = tmp_path / "p.jsonl"
    pack.write_text('{"format": "prime-memory-pack", "version": 1}\n{"content": "x"}\n')
    result = run("import", str(pack), "--dry-run")
    assert result.exit_code == 0 and "would add 1" in result.stdout and "dry run" in result.stdout
    assert json.loads(run("stats", "--json").stdout)["records"] == 0


def test_import_bad_lines_and_skip_bad(run: Any, tmp_path: Path) -> None:
    pack = tmp_path / "p.jsonl"
    pack.write_text('{"format": "prime-memory-pack", "version": 1}\n{"content": "x"}\n{oops\n')
    _one_line_error(run("import", str(pack)), "p.jsonl:3", "--skip-bad")
    assert json.loads(run("stats", "--json").stdout)["records"] == 0
    result = run("import", str(pack), "--skip-bad")
    assert result.exit_code == 0 and "skipped 1 bad lines" in result.stdout


@pytest.mark.parametrize(
    ("make", "args", "fragment"),
    [
        (lambda p: p / "missing.jsonl", [], "does not exist"),
        (lambda p: p, ["--format", "pack"], "is a directory"),
        (lambda p: p, ["--format", "knowledge-graph"], "is a directory"),
        (lambda p: p / "f.txt", [], "cannot tell the format"),
        (lambda p: p / "v9.jsonl", [], "newer"),
    ],
)
def test_import_input_errors_are_one_line(
    run: Any, tmp_path: Path, make: Any, args: list[str], fragment: str
) -> None:
    (tmp_path / "f.txt").write_text("hello\n")
    (tmp_path / "v9.jsonl").write_text('{"format": "prime-memory-pack", "version": 9}\n')
    _one_line_error(run("import", str(make(tmp_path)), *args), fragment)


def test_import_detects_markdown_graphs_and_json_stores(run: Any, tmp_path: Path) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "a.md").write_text("A note #idea")
    graph = tmp_path / "memory.jsonl"
    graph.write_text(
        '{"type": "entity", "name": "Bob", "entityType": "person", "observations": ["Likes tea"]}\n'
    )
    legacy = tmp_path / "store.json"
    legacy.write_text(
        json.dumps(
            {
                "format": "prime-memory-folding-store-v1",
                "records": [{"content": "old", "domain": "memory"}],
            }
        )
    )
    for source in (notes, graph, legacy):
        result = run("import", str(source))
        assert result.exit_code == 0 and "added 1 of 1" in result.stdout, result.output
    assert json.loads(run("stats", "--json").stdout)["records"] == 3


@pytest.mark.parametrize(
    "client", ["claude-code", "cursor", "vscode", "jetbrains", "claude-desktop"]
)
def test_ide_config_prints_absolute_commands(run: Any, client: str, store_path: Path) -> None:
    result = run("ide-config", client)
    assert result.exit_code == 0 and result.stderr
    if client == "claude-code":
        assert result.stdout.startswith("claude mcp add prime-memory -- /")
        assert str(store_path) in result.stdout
        return
    config = json.loads(result.stdout)
    servers = config["servers" if client == "vscode" else "mcpServers"]
    entry = servers["prime-memory"]
    assert Path(entry["command"]).is_absolute()
    assert entry["args"][-2:] == ["--store", str(store_path.resolve())]


def test_ide_config_rejects_an_unknown_client(run: Any) -> None:
    result = run("ide-config", "notepad")
    assert result.exit_code == 2 and "notepad" in result.stderr


def test_serve_passes_the_store_and_transport_to_the_server(
    run: Any, monkeypatch: pytest.MonkeyPatch, store_path: Path
) -> None:
    from prime_memory_folding.mcp_server import _parser

    seen: list[list[str]] = []
    fake = types.ModuleType("prime_memory_folding.mcp_server")
    fake.main = lambda argv: seen.append(argv) or 0  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "prime_memory_folding.mcp_server", fake)
    # A token that starts with "-" must still reach the server as a value.
    result = run("serve", "--transport", "http", "--port", "9000", "--token=-secret")
    assert result.exit_code == 0
    [argv] = seen
    parsed = _parser().parse_args(argv)
    assert (parsed.transport, parsed.store, parsed.host, parsed.port, parsed.token) == (
        "streamable-http",
        str(store_path),
        "127.0.0.1",
        9000,
        "-secret",
    )


def test_serve_without_the_server_module_is_one_line(
    run: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "prime_memory_folding.mcp_server", None)
    _one_line_error(run("serve"), "MCP server")


def test_doctor_passes_on_a_healthy_store(run: Any) -> None:
    _store(run, "one")
    result = run("doctor", "--processes", "2", "--writes", "3")
    assert result.exit_code == 0, result.output
    assert "6/6 survived" in result.stdout and "FAIL" not in result.stdout
    assert json.loads(run("doctor", "--processes", "0", "--json").stdout)[0]["name"] == "opens"


def test_doctor_fails_on_a_missing_or_damaged_store(run: Any, store_path: Path) -> None:
    assert run("doctor").exit_code == 1
    store_path.write_bytes(b"this is not a database" * 100)
    result = run("doctor", "--processes", "0")
    assert result.exit_code == 1 and "FAIL" in result.stdout


def test_demo_runs_offline_on_a_temporary_store(run: Any, store_path: Path) -> None:
    result = run("demo")
    assert result.exit_code == 0, result.output
    for heading in ("1. store", "2. query by labels", "3. query by text", "4. fold"):
        assert heading in result.stdout
    assert "WAL mode" in result.stdout
    assert not store_path.exists()


def test_main_is_the_console_entry_point() -> None:
    from prime_memory_folding.cli import main

    with pytest.raises(SystemExit) as stopped:
        main(["--version"])
    assert stopped.value.code == 0
    assert isinstance(cli, click.Group)


def test_reembed_moves_the_store_into_the_builtin_space(run: Any) -> None:
    _store(run, "We deploy on Fridays after the freeze lifts")
    assert json.loads(run("stats", "--json").stdout)["embedding_space"] is None
    result = run("reembed", "--embedder", "builtin")
    assert result.exit_code == 0, result.output
    assert "re-embedded 1 memories" in result.stdout
    assert json.loads(run("stats", "--json").stdout)["embedding_space"].startswith("builtin:")


def test_reembed_with_a_missing_model_is_one_line_and_changes_nothing(
    run: Any, tmp_path: Path
) -> None:
    _store(run, "We deploy on Fridays")
    result = run("reembed", "--embedder", f"model2vec:{tmp_path / 'no-such-model'}")
    _one_line_error(result, "no-such-model")
    assert json.loads(run("stats", "--json").stdout)["embedding_space"] is None
