"""The token commands: add prints a secret once, list never shows one, revoke takes effect."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from prime_memory_folding import tokens
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
