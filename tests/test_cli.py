"""The ``prime-memory`` command line, through click's runner."""

from __future__ import annotations

import json
import re
import sys
import types
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner

from prime_memory_folding import MemoryEngine, NotAvailable
from prime_memory_folding.cli import cli
from tests.cli_helpers import one_line_error

COMMANDS = sorted(cli.commands)
#: Commands that name their stores as arguments, not with --store.
STORE_ARGUMENTS = {"copy"}


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
    assert ("--store" in result.output) is (name not in STORE_ARGUMENTS)


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
    assert run("forget", rid).stdout.startswith(f"forgot {rid} (archived")
    one_line_error(run("get", rid), "no record")


def test_store_reads_standard_input(run: Any) -> None:
    result = run("store", "-", "-d", "workflow", input="Deploys run on Fridays\n")
    assert result.exit_code == 0
    hits = json.loads(run("query", "-d", "workflow", "--json").stdout)
    assert hits[0]["record"]["content"] == "Deploys run on Fridays"


def test_query_with_no_hits_says_so(run: Any) -> None:
    _store(run, "something else")
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
    _store(run, "an existing store")
    one_line_error(run(*args), fragment)


def test_update_without_changes_is_a_usage_error(run: Any) -> None:
    result = run("update", "0" * 32)
    assert result.exit_code == 2 and "nothing to change" in result.stderr


def test_text_query_that_the_store_cannot_serve_is_one_line(
    run: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(self: MemoryEngine, **_: Any) -> Any:
        raise NotAvailable("text queries are not available in this store")

    _store(run, "We deploy on Fridays")
    monkeypatch.setattr(MemoryEngine, "query", refuse)
    one_line_error(run("query", "how do we deploy"), "text queries are not available")


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


def test_fold_dry_run_prints_a_report(run: Any) -> None:
    _store(run, "one")
    result = run("fold", "--dry-run")
    assert result.exit_code == 0 and "dry run" in result.stdout
    assert run("fold", "--dry-run", "--json").exit_code == 0


@pytest.mark.skipif(not hasattr(MemoryEngine, "fold"), reason="folding is not in this tree")
def test_fold_full_screens_every_record_and_a_plain_fold_only_what_changed(run: Any) -> None:
    _store(run, "one")
    _store(run, "two")
    assert json.loads(run("fold", "--json").stdout)["screened"] == 2
    assert json.loads(run("fold", "--json").stdout)["incremental"] is True
    full = json.loads(run("fold", "--full", "--json").stdout)
    assert (full["incremental"], full["screened"]) == (False, 2)


def test_export_and_import_round_trip(run: Any, tmp_path: Path) -> None:
    rid = _store(run, "We use SQLite", "-d", "decision")
    pack = tmp_path / "pack.jsonl"
    result = run("export", str(pack))
    assert result.exit_code == 0 and "exported 1 records" in result.stderr
    other = tmp_path / "other.db"
    first = run("--store", str(other), "import", str(pack), store=False)
    assert first.exit_code == 0 and "read 1 line" in first.stdout
    assert "1 memory; added 1" in first.stdout
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


def test_export_gates_by_labels_and_time(run: Any, clock: Any) -> None:
    _store(run, "old decision", "-d", "decision", "-t", "a")
    clock.advance(100)
    _store(run, "new decision", "-d", "decision", "-t", "a", "-t", "b")
    _store(run, "a task", "-d", "task", "-t", "c")
    cases = {
        ("-d", "decision"): ["new decision", "old decision"],
        ("-t", "a", "-t", "b"): ["new decision"],
        ("--any-tag", "b", "--any-tag", "c"): ["a task", "new decision"],
        ("--since", "50s"): ["a task", "new decision"],
        ("-d", "decision", "--until", "50s"): ["old decision"],
    }
    for args, expected in cases.items():
        result = run("export", *args)
        assert result.exit_code == 0, result.output
        lines = [json.loads(line) for line in result.stdout.splitlines()]
        assert sorted(line["content"] for line in lines[1:]) == expected, args


def test_import_dry_run_writes_nothing(run: Any, tmp_path: Path) -> None:
    pack = tmp_path / "p.jsonl"
    pack.write_text('{"format": "prime-memory-pack", "version": 1}\n{"content": "x"}\n')
    result = run("import", str(pack), "--dry-run")
    assert result.exit_code == 0 and "would add 1" in result.stdout and "dry run" in result.stdout
    assert json.loads(run("stats", "--json").stdout)["records"] == 0


def test_import_bad_lines_and_skip_bad(run: Any, tmp_path: Path) -> None:
    pack = tmp_path / "p.jsonl"
    pack.write_text('{"format": "prime-memory-pack", "version": 1}\n{"content": "x"}\n{oops\n')
    one_line_error(run("import", str(pack)), "p.jsonl:3", "--skip-bad")
    assert json.loads(run("stats", "--json").stdout)["records"] == 0
    result = run("import", str(pack), "--skip-bad")
    assert result.exit_code == 0 and "1 bad line skipped" in result.stdout


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
    one_line_error(run("import", str(make(tmp_path)), *args), fragment)


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
        assert result.exit_code == 0 and "1 memory; added 1" in result.stdout, result.output
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
    from prime_memory_folding.mcp.args import parser

    seen: list[list[str]] = []
    fake = types.ModuleType("prime_memory_folding.mcp.server")
    fake.main = lambda argv: seen.append(argv) or 0  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "prime_memory_folding.mcp.server", fake)
    # A token that starts with "-" must still reach the server as a value.
    result = run("serve", "--transport", "http", "--port", "9000", "--token=-secret")
    assert result.exit_code == 0
    [argv] = seen
    parsed = parser().parse_args(argv)
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
    monkeypatch.setitem(sys.modules, "prime_memory_folding.mcp.server", None)
    one_line_error(run("serve"), "MCP server")


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


def test_demo_runs_offline_on_a_temporary_store_and_folds_near_duplicates(
    run: Any, memory_home: Path
) -> None:
    result = run("demo", store=False)
    assert result.exit_code == 0, result.output
    for heading in ("1. store", "2. query by labels", "3. query by text", "4. fold"):
        assert heading in result.stdout
    assert "WAL mode" in result.stdout
    merged = re.search(r"(\d+) were folded into (\d+)", result.stdout)
    assert merged is not None, result.stdout
    assert int(merged.group(1)) >= 2 and int(merged.group(2)) >= 1
    assert list(memory_home.iterdir()) == []


def test_demo_with_a_store_keeps_it_there_and_never_reuses_one(run: Any, store_path: Path) -> None:
    result = run("demo", "--store", str(store_path), store=False)
    assert result.exit_code == 0, result.output
    with MemoryEngine(store_path) as kept:
        summary = kept.stats()
    assert summary.records > 10 and summary.archived_by_reason["folded"] >= 2
    before = store_path.read_bytes()
    one_line_error(run("demo"), "already exists")
    assert store_path.read_bytes() == before


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
    one_line_error(result, "no-such-model")
    assert json.loads(run("stats", "--json").stdout)["embedding_space"] is None


# -- JSON output of records with vectors --------------------------------------------


def _seed_with_vectors(store_path: Path, clock: Any) -> list[str]:
    with MemoryEngine(store_path, clock=clock) as engine:
        return [
            engine.store(
                f"Vector memory {n}", domain="decision", tags=["db"], vector=[1.0, float(n), 0.5]
            ).record_id
            for n in range(2)
        ]


def test_json_output_of_records_with_vectors_parses_and_leaves_vectors_out(
    run: Any, store_path: Path, clock: Any
) -> None:
    rid, other = _seed_with_vectors(store_path, clock)
    outputs = {
        "get": run("get", rid, "--json"),
        "query": run("query", "-d", "decision", "--json"),
        "update": run("update", rid, "-i", "0.7", "--json"),
        "forget": run("forget", other, "--json"),
    }
    for name, result in outputs.items():
        assert result.exit_code == 0, (name, result.output)
        assert '"vector"' not in result.stdout, name
        json.loads(result.stdout)
    full = json.loads(run("get", rid, "--json", "--vectors").stdout)
    assert full["vector"] == pytest.approx([1.0, 0.0, 0.5])
    hit = json.loads(run("query", "-d", "decision", "--json", "--vectors").stdout)[0]
    assert hit["record"]["vector"] == pytest.approx([1.0, 0.0, 0.5])


def test_store_json_with_the_builtin_embedder_parses(
    run: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PRIME_MEMORY_EMBEDDER", "builtin")
    result = run("store", "We deploy on Fridays", "--json")
    assert result.exit_code == 0, result.output
    assert "vector" not in json.loads(result.stdout)["record"]
    rid = json.loads(result.stdout)["record"]["record_id"]
    with_vector = json.loads(run("get", rid, "--json", "--vectors").stdout)
    assert len(with_vector["vector"]) > 1 and all(
        isinstance(v, float) for v in with_vector["vector"]
    )


# -- fold, unfold and restore through the command line -------------------------------


def _seed_for_folding(store_path: Path, clock: Any) -> tuple[list[str], str]:
    """Two near-duplicates that fold together, and a working memory that decays away."""
    with MemoryEngine(store_path, clock=clock) as engine:
        twins = [
            engine.store(
                text, domain="workflow", subdomain="procedural", tags=["lint"], vector=vector
            ).record_id
            for text, vector in (
                ("Run make lint before pushing; CI fails on any warning.", [1.0, 0.0, 0.0]),
                ("Run make lint before you push; CI fails on any warning.", [0.99, 0.1, 0.0]),
            )
        ]
        passing = engine.store(
            "Scratch note for today", domain="session", importance=0.1, vector=[0.0, 0.0, 1.0]
        ).record_id
    clock.advance(30 * 86_400)
    return twins, passing


def _live_ids(store_path: Path) -> set[str]:
    with MemoryEngine(store_path) as engine:
        return {hit.record.record_id for hit in engine.query(limit=100)}


def test_fold_merges_and_prunes_then_unfold_and_restore_bring_records_back(
    run: Any, store_path: Path, clock: Any
) -> None:
    twins, passing = _seed_for_folding(store_path, clock)
    result = run("fold")
    assert result.exit_code == 0, result.output
    assert "records  3 -> 1" in result.stdout and "folded 2 into 1" in result.stdout
    assert re.search(r"store +[\d.]+ (KiB|MiB) -> [\d.]+ (KiB|MiB)", result.stdout)
    assert re.search(r"as of +\d{4}-\d\d-\d\d \d\d:\d\d", result.stdout)
    assert "bytes" not in result.stdout and "e+09" not in result.stdout
    [folded] = _live_ids(store_path)
    assert f"{folded} <- 2 records" in result.stdout and passing in result.stdout

    stats = json.loads(run("stats", "--json").stdout)
    assert (stats["records"], stats["archived"]) == (1, 3)
    assert stats["archived_by_reason"] == {"folded": 2, "pruned": 1}
    assert "archive: 3 records (folded 2, pruned 1)" in run("stats").stdout

    unfolded = run("unfold", folded)
    assert unfolded.exit_code == 0, unfolded.output
    assert "2 records back" in unfolded.stdout
    assert "Run make lint before you push" in unfolded.stdout
    assert re.search(r"created +\d{4}-\d\d-\d\d \d\d:\d\d", unfolded.stdout)
    assert "address" not in unfolded.stdout and "[1.0" not in unfolded.stdout
    assert _live_ids(store_path) == set(twins)

    restored = run("restore", passing)
    assert restored.exit_code == 0, restored.output
    assert f"restored {passing}" in restored.stdout and "Scratch note" in restored.stdout
    assert "e+09" not in restored.stdout
    assert _live_ids(store_path) == {*twins, passing}
    assert json.loads(run("stats", "--json").stdout)["archived"] == 0


def test_unfold_and_restore_json_parse_with_vectors(run: Any, store_path: Path, clock: Any) -> None:
    twins, passing = _seed_for_folding(store_path, clock)
    report = json.loads(run("fold", "--json").stdout)
    [folded] = report["created_ids"]
    unfolded = run("unfold", folded, "--json")
    assert unfolded.exit_code == 0, unfolded.output
    assert sorted(r["record_id"] for r in json.loads(unfolded.stdout)) == sorted(twins)
    assert '"vector"' not in unfolded.stdout
    restored = json.loads(run("restore", passing, "--json", "--vectors").stdout)
    assert restored["vector"] == pytest.approx([0.0, 0.0, 1.0])


# -- errors ---------------------------------------------------------------------------


def test_a_time_out_of_range_in_a_pack_is_a_bad_line_not_a_crash(run: Any, tmp_path: Path) -> None:
    pack = tmp_path / "p.jsonl"
    pack.write_text(
        '{"format": "prime-memory-pack", "version": 1}\n'
        '{"content": "far past", "created_at": -1e20}\n'
        '{"content": "fine"}\n'
    )
    one_line_error(run("import", str(pack)), "p.jsonl:2", "created_at")
    result = run("import", str(pack), "--skip-bad")
    assert result.exit_code == 0 and "1 bad line skipped" in result.stdout
    [hit] = json.loads(run("query", "--json").stdout)
    assert run("get", hit["record"]["record_id"]).exit_code == 0


@pytest.mark.parametrize(
    ("vector", "fragment"),
    [
        ("[0, 0, 0]", "all zeros"),
        ("[1e39, 1, 1]", "too large for float32"),
        ("[NaN, 1, 1]", "finite"),
    ],
)
def test_skip_bad_skips_a_bad_vector_by_its_line(
    run: Any, tmp_path: Path, vector: str, fragment: str
) -> None:
    pack = tmp_path / "p.jsonl"
    pack.write_text(
        '{"format": "prime-memory-pack", "version": 1}\n'
        '{"content": "good", "vector": [1, 0, 0]}\n'
        f'{{"content": "bad", "vector": {vector}}}\n'
    )
    one_line_error(run("import", str(pack)), "p.jsonl:3", fragment)
    result = run("import", str(pack), "--skip-bad")
    assert result.exit_code == 0, result.output
    assert "2 memories" not in result.stdout and "added 1" in result.stdout
    assert "p.jsonl:3" in result.stdout
    assert json.loads(run("stats", "--json").stdout)["records"] == 1


def test_unexpected_errors_are_one_line_with_their_type(
    run: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    _store(run, "one")

    def broken(self: MemoryEngine) -> Any:
        raise OverflowError("timestamp out of range for platform time_t")

    monkeypatch.setattr(MemoryEngine, "stats", broken)
    result = run("stats")
    one_line_error(result, "Error: OverflowError: timestamp out of range", "PRIME_MEMORY_DEBUG")
    assert result.exit_code == 1
    monkeypatch.setenv("PRIME_MEMORY_DEBUG", "1")
    assert isinstance(run("stats").exception, OverflowError)


def test_an_interrupt_is_not_turned_into_an_error_line(
    run: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    _store(run, "one")

    def interrupted(self: MemoryEngine) -> Any:
        raise KeyboardInterrupt

    monkeypatch.setattr(MemoryEngine, "stats", interrupted)
    result = run("stats")
    assert result.exit_code == 1 and "Aborted!" in result.stderr
    assert "KeyboardInterrupt" not in result.output


@pytest.mark.parametrize(
    "command",
    [
        ["stats"],
        ["query", "-t", "x"],
        ["get", "0" * 32],
        ["export"],
        ["encode"],
        ["fold"],
        ["scopes"],
        ["rescope", "0" * 32, "--to", "global"],
        ["rescope", "--from", "global", "--to", "user:x", "--yes"],
    ],
)
def test_read_commands_on_a_missing_store_fail_and_create_nothing(
    tmp_path: Path, command: list[str]
) -> None:
    missing = tmp_path / "no" / "such" / "dir" / "x.db"
    result = CliRunner().invoke(cli, ["--store", str(missing), *command])
    one_line_error(result, f"no store at {missing}", "prime-memory store")
    assert not (tmp_path / "no").exists()


def test_write_commands_create_a_missing_store(tmp_path: Path) -> None:
    target = tmp_path / "new" / "x.db"
    result = CliRunner().invoke(cli, ["--store", str(target), "store", "first memory"])
    assert result.exit_code == 0 and target.exists()


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (["nosuch"], ["No such command 'nosuch'", "(see prime-memory --help)"]),
        (["get"], ["Missing argument", "(see prime-memory get --help)"]),
        (["query", "--min-strength", "abc"], ["'abc' is not a valid float"]),
        (["export", "{tmp}"], ["is a directory", "(see prime-memory export --help)"]),
        (["--no-such-option"], ["No such option", "(see prime-memory --help)"]),
    ],
)
def test_usage_errors_are_one_line_with_status_2(
    run: Any, tmp_path: Path, args: list[str], fragments: list[str]
) -> None:
    result = run(*(arg.format(tmp=tmp_path) for arg in args))
    assert result.exit_code == 2
    one_line_error(result, "Error: ", *fragments)
    assert "Usage:" not in result.output


def test_no_arguments_show_the_whole_help(run: Any) -> None:
    result = run(store=False)
    assert "Usage: prime-memory" in result.output and "Commands:" in result.output
    assert "Error" not in result.output


def test_help_and_version_still_exit_zero(capsys: pytest.CaptureFixture[str]) -> None:
    from prime_memory_folding.cli import main

    for argv, expected in ((["--help"], "Usage:"), (["--version"], "prime-memory")):
        with pytest.raises(SystemExit) as stopped:
            main(argv)
        assert stopped.value.code == 0
        assert expected in capsys.readouterr().out
    with pytest.raises(SystemExit) as stopped:
        main(["nosuch"])
    assert stopped.value.code == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        "Error: No such command 'nosuch'. (see prime-memory --help)"
    ]


# -- import summaries and progress ----------------------------------------------------


def _graph(tmp_path: Path) -> Path:
    graph = tmp_path / "memory.jsonl"
    graph.write_text(
        '{"type": "entity", "name": "Bob", "entityType": "person", '
        '"observations": ["Likes tea", "Works nights"]}\n'
        '{"type": "entity", "name": "Acme", "entityType": "company", "observations": []}\n'
        '{"type": "relation", "from": "Bob", "to": "Acme", "relationType": "works_at"}\n'
        "{oops\n"
        '{"type": "mystery"}\n'
    )
    return graph


def test_import_summary_counts_lines_and_memories_apart(run: Any, tmp_path: Path) -> None:
    result = run("import", str(_graph(tmp_path)), "--skip-bad")
    assert result.exit_code == 0, result.output
    assert (
        f"read 5 lines from {tmp_path / 'memory.jsonl'}: 4 memories, 2 bad lines skipped; "
        "added 4" in result.stdout
    )
    report = json.loads(run("import", str(_graph(tmp_path)), "--skip-bad", "--json").stdout)
    assert (report["lines"], report["read"], report["added"], report["already_present"]) == (
        5,
        4,
        0,
        4,
    )


@pytest.fixture
def terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make progress think standard error is a terminal."""
    from rich.console import Console

    from prime_memory_folding.cli import _common

    def forced(stderr: bool = False) -> Console:
        return Console(stderr=stderr, force_terminal=True, highlight=False, soft_wrap=False)

    monkeypatch.setattr(_common, "console", forced)


@pytest.mark.usefixtures("terminal")
def test_progress_shows_on_a_terminal(
    run: Any, tmp_path: Path, store_path: Path, clock: Any
) -> None:
    imported = run("import", str(_graph(tmp_path)), "--skip-bad")
    assert imported.exit_code == 0, imported.output
    assert "reading memory.jsonl" in imported.stderr and "importing" in imported.stderr
    _seed_for_folding(store_path, clock)
    folded = run("fold")
    assert folded.exit_code == 0, folded.output
    assert "folding: " in folded.stderr


def test_progress_stays_quiet_when_piped(
    run: Any, tmp_path: Path, store_path: Path, clock: Any
) -> None:
    imported = run("import", str(_graph(tmp_path)), "--skip-bad")
    assert imported.exit_code == 0 and imported.stderr == ""
    _seed_for_folding(store_path, clock)
    folded = run("fold")
    assert folded.exit_code == 0 and folded.stderr == ""


@pytest.mark.parametrize("stamp", [-1e20, 1e20, float("nan")])
def test_short_time_shows_a_time_no_calendar_holds_without_failing(stamp: float) -> None:
    from prime_memory_folding.cli._common import short_time

    assert "out of range" in short_time(stamp)
    assert short_time(0.0)[:4] in {"1969", "1970"}


def test_get_shows_the_versions_an_update_replaced(run: Any) -> None:
    rid = _store(run, "we use postgres 14", "-t", "db")
    assert run("update", rid, "-c", "we use postgres 15").exit_code == 0
    shown = run("get", rid, "--history")
    assert shown.exit_code == 0
    assert "we use postgres 15" in shown.stdout and "replaced" in shown.stdout
    assert "we use postgres 14" in shown.stdout
    both = json.loads(run("get", rid, "--history", "--json").stdout)
    assert [v["record"]["content"] for v in both["history"]] == ["we use postgres 14"]
    assert "replaced" not in run("get", rid).stdout


def test_query_fills_a_token_budget(run: Any) -> None:
    for n in range(6):
        _store(run, f"note {n} " + "with quite a few words " * 20, "-t", "t")
    result = run("query", "-t", "t", "--max-tokens", "300", "--json")
    assert result.exit_code == 0
    assert 1 <= len(json.loads(result.stdout)) < 6
    table = run("query", "-t", "t", "--max-tokens", "300")
    assert "did not fit 300 tokens" in table.stderr
    one_line_error(run("query", "-t", "t", "--max-tokens", "5"), "max_tokens")
