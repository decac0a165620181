"""The token commands: add prints a secret once, list never shows one, revoke takes effect."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from prime_memory_folding.engine import tokens
from prime_memory_folding.storage import SQLiteStorage
from tests.cli_helpers import one_line_error


def _secret(result: Any) -> str:
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert len(lines) == 1 and lines[0].startswith(tokens.PREFIX)
    return str(lines[0])


def test_add_prints_the_token_once_and_stores_only_its_hash(run: Any, store_path: Path) -> None:
    result = run("token", "add", "Alice", "--scopes", "project:*, global")
    secret = _secret(result)
    assert "Authorization: Bearer" in result.stderr
    storage = SQLiteStorage(store_path)
    row = tokens.verify(storage, secret)
    storage.close()
    assert row is not None
    assert (row.name, row.scopes, row.read_only) == (
        "alice",
        ("project:*", "global", "user:alice"),
        False,
    )
    dump = "\n".join(sqlite3.connect(store_path).iterdump())
    assert secret not in dump and secret[len(tokens.PREFIX) :] not in dump
    assert tokens.hash_secret(secret) in dump


def test_each_add_makes_a_new_secret(run: Any) -> None:
    first = _secret(run("token", "add", "alice"))
    assert run("token", "revoke", "alice").exit_code == 0
    second = _secret(run("token", "add", "alice"))
    assert first != second


def test_list_shows_every_token_but_never_a_secret_or_hash(run: Any, clock: Any) -> None:
    secret = _secret(run("token", "add", "alice", "--read-only"))
    clock.advance(60)
    other = _secret(run("token", "add", "bob", "--scopes", "*"))
    clock.advance(60)
    assert run("token", "revoke", "bob").exit_code == 0
    table = run("token", "list")
    assert table.exit_code == 0, table.output
    for text in ("alice", "bob", "user:alice", "project:*", "yes", "2 tokens"):
        assert text in table.stdout
    listed = json.loads(run("token", "list", "--json").stdout)
    assert [(t["name"], t["read_only"], t["revoked_at"]) for t in listed] == [
        ("alice", True, None),
        ("bob", False, clock.now),
    ]
    assert listed[1]["scopes"] == ["*", "user:bob"]
    for shown in (table.stdout, json.dumps(listed)):
        for hidden in (secret, other, tokens.hash_secret(secret), tokens.hash_secret(other)):
            assert hidden not in shown


def test_revoke_stops_the_token(run: Any, store_path: Path) -> None:
    secret = _secret(run("token", "add", "alice"))
    revoked = run("token", "revoke", "ALICE")
    assert revoked.exit_code == 0 and "revoked the token of alice" in revoked.stdout
    storage = SQLiteStorage(store_path)
    assert tokens.verify(storage, secret) is None
    storage.close()
    one_line_error(run("token", "revoke", "alice"), "no live token is named 'alice'")


def test_a_second_live_token_for_one_name_is_refused(run: Any) -> None:
    _secret(run("token", "add", "alice"))
    one_line_error(run("token", "add", "alice"), "revoke it first")
    assert len(json.loads(run("token", "list", "--json").stdout)) == 1


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["bad name!"], "token name"),
        (["alice", "--scopes", "proj:*"], "names no scope kind"),
        (["alice", "--scopes", "project:acme/*"], "never inside a name"),
        (["alice", "--scopes", "galaxy:x"], "not a scope kind"),
        (["alice", "--scopes", " , "], "at least one scope pattern"),
    ],
)
def test_bad_input_is_one_line_and_creates_no_store(
    run: Any, store_path: Path, args: list[str], fragment: str
) -> None:
    one_line_error(run("token", "add", *args), fragment)
    assert not store_path.exists()


def test_list_and_revoke_need_an_existing_store(run: Any, store_path: Path) -> None:
    one_line_error(run("token", "list"), "no store at")
    one_line_error(run("token", "revoke", "alice"), "no store at")
    assert not store_path.exists()


def test_the_store_option_works_after_the_command_too(run: Any, store_path: Path) -> None:
    secret = _secret(run("token", "add", "alice", "--store", str(store_path), store=False))
    storage = SQLiteStorage(store_path)
    assert tokens.verify(storage, secret) is not None
    storage.close()


# -- ide-config for a shared HTTP server ----------------------------------------------------

URL = "http://memory.lan:8765/mcp"


def _http_headers(client: str, text: str) -> dict[str, str]:
    """The headers a client sends, as its snippet names them."""
    if client == "claude-code":
        import shlex

        words = shlex.split(text)
        assert words[:7] == ["claude", "mcp", "add", "--transport", "http", "prime-memory", URL]
        pairs = [words[i + 1] for i, word in enumerate(words) if word == "--header"]
        return dict(pair.split(": ", 1) for pair in pairs)
    document = json.loads(text)
    if client == "vscode":
        entry = document["servers"]["prime-memory"]
        assert entry["type"] == "http" and entry["url"] == URL
        return dict(entry["headers"])
    entry = document["mcpServers"]["prime-memory"]
    if client == "cursor":
        assert entry["url"] == URL
        return dict(entry["headers"])
    args = entry["args"]
    assert entry["command"] == "npx" and URL in args
    pairs = [args[i + 1] for i, arg in enumerate(args) if arg == "--header"]
    headers = dict(pair.split(":", 1) for pair in pairs)
    # The bridge expands ${VAR} from its env, which must hold the whole header value.
    [variable] = list(entry["env"])
    assert headers["Authorization"] == "${" + variable + "}"
    headers["Authorization"] = entry["env"][variable]
    return headers


@pytest.mark.parametrize(
    ("client", "reference"),
    [
        ("claude-code", "Bearer ${TEAM_TOKEN}"),
        ("cursor", "Bearer ${env:TEAM_TOKEN}"),
        ("vscode", "Bearer ${env:TEAM_TOKEN}"),
        ("jetbrains", "Bearer <token>"),
        ("claude-desktop", "Bearer <token>"),
    ],
)
def test_ide_config_emits_the_http_headers(
    run: Any, tmp_path: Path, client: str, reference: str
) -> None:
    result = run(
        "ide-config",
        client,
        "--url",
        URL,
        "--token-env",
        "TEAM_TOKEN",
        "--scope",
        "project:GitHub.com/acme/api",
    )
    assert result.exit_code == 0, result.output
    assert _http_headers(client, result.stdout) == {
        "Authorization": reference,
        "X-Prime-Memory-Project": "project:github.com/acme/api",
    }
    assert "TEAM_TOKEN" in result.stderr and "project:github.com/acme/api" in result.stderr
    assert "pmf_" not in result.stdout  # never a secret, only where to find it


def test_ide_config_names_the_git_project_here_or_none(
    run: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = tmp_path / "api"
    (repo / ".git").mkdir(parents=True)
    (repo / ".git" / "config").write_text(
        '[remote "origin"]\n\turl = git@github.com:Acme/api.git\n'
    )
    monkeypatch.delenv("PRIME_MEMORY_SCOPE")
    monkeypatch.chdir(repo)
    here = run("ide-config", "vscode", "--url", URL)
    assert _http_headers("vscode", here.stdout)["X-Prime-Memory-Project"] == (
        "project:github.com/acme/api"
    )
    named = run("--project", str(repo), "ide-config", "cursor", "--url", URL)
    assert _http_headers("cursor", named.stdout)["X-Prime-Memory-Project"] == (
        "project:github.com/acme/api"
    )
    monkeypatch.chdir(tmp_path)
    nowhere = run("ide-config", "cursor", "--url", URL)
    assert "X-Prime-Memory-Project" not in _http_headers("cursor", nowhere.stdout)
    assert "token's default scope" in nowhere.stderr


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--url", "memory.lan:8765"], "not an http"),
        (["--url", URL, "--token-env", "BAD-NAME"], "not an environment variable name"),
    ],
)
def test_ide_config_refuses_a_bad_url_or_variable(run: Any, args: list[str], fragment: str) -> None:
    one_line_error(run("ide-config", "cursor", *args), fragment)
