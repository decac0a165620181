"""A missing store is created only where it is meant to be: a mistyped --store fails, naming it.

Each test runs the real ``prime-memory`` and ``prime-memory-mcp`` commands in a
subprocess, without the PRIME_MEMORY_CREATE that the other tests set.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from prime_memory_folding.mcp.server import shown_store

BIN = Path(sys.executable).parent
TIMEOUT = 60


@pytest.fixture
def env(memory_home: Path) -> dict[str, str]:
    """The environment of a new user: a data folder not made yet, no store or creation asked."""
    home = memory_home / "data"
    skip = {"PRIME_MEMORY_CREATE", "PRIME_MEMORY_STORE", "PRIME_MEMORY_TOKEN"}
    return {
        **{k: v for k, v in os.environ.items() if k not in skip},
        "PRIME_MEMORY_HOME": str(home),
    }


def prime_memory(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "prime-memory"), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=TIMEOUT,
        stdin=subprocess.DEVNULL,
    )


def mcp_server(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """The stdio server with its input closed: it says what it serves, then ends."""
    return subprocess.run(
        [str(BIN / "prime-memory-mcp"), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=TIMEOUT,
        stdin=subprocess.DEVNULL,
    )


def one_line(done: subprocess.CompletedProcess[str], *fragments: str) -> None:
    assert done.returncode != 0
    [line] = done.stderr.strip().splitlines()
    assert "Traceback" not in done.stderr
    for fragment in fragments:
        assert fragment in line, line


@pytest.mark.parametrize("command", [["store", "We deploy on Fridays"], ["stats"], ["query"]])
def test_a_mistyped_store_is_refused_and_nothing_is_created(
    env: dict[str, str], tmp_path: Path, command: list[str]
) -> None:
    mistyped = tmp_path / "wrok" / "memory.db"
    done = prime_memory(env, "--store", str(mistyped), *command)
    one_line(done, f"no store at {mistyped}", "--create")
    assert not mistyped.parent.exists()
    assert not Path(env["PRIME_MEMORY_HOME"]).exists()


def test_a_store_named_by_the_environment_is_refused_too(
    env: dict[str, str], tmp_path: Path
) -> None:
    mistyped = tmp_path / "wrok" / "memory.db"
    done = prime_memory({**env, "PRIME_MEMORY_STORE": str(mistyped)}, "store", "a fact")
    one_line(done, f"no store at {mistyped}", "--create")
    assert not mistyped.parent.exists()


def test_create_makes_a_new_store_where_asked(env: dict[str, str], tmp_path: Path) -> None:
    new = tmp_path / "team" / "memory.db"
    done = prime_memory(env, "--create", "--store", str(new), "store", "We deploy on Fridays")
    assert done.returncode == 0, done.stderr
    assert new.is_file()
    again = prime_memory(env, "--store", str(new), "stats", "--json")
    assert again.returncode == 0, again.stderr


def test_the_environment_may_ask_for_creation(env: dict[str, str], tmp_path: Path) -> None:
    new = tmp_path / "ci" / "memory.db"
    done = prime_memory({**env, "PRIME_MEMORY_CREATE": "1"}, "--store", str(new), "store", "x y")
    assert done.returncode == 0, done.stderr
    assert new.is_file()


def test_the_default_store_is_created_on_first_store(env: dict[str, str]) -> None:
    done = prime_memory(env, "store", "We deploy on Fridays")
    assert done.returncode == 0, done.stderr
    assert (Path(env["PRIME_MEMORY_HOME"]) / "memory.db").is_file()


def test_the_default_store_given_by_name_is_created_too(env: dict[str, str]) -> None:
    default = Path(env["PRIME_MEMORY_HOME"]) / "memory.db"
    done = prime_memory(env, "--store", str(default), "store", "We deploy on Fridays")
    assert done.returncode == 0, done.stderr
    assert default.is_file()


def test_the_demo_needs_no_create(env: dict[str, str], tmp_path: Path) -> None:
    kept = tmp_path / "demo.db"
    done = prime_memory(env, "demo", "--store", str(kept))
    assert done.returncode == 0, done.stderr
    assert kept.is_file()


def test_the_mcp_server_says_which_store_it_serves_on_stderr(
    env: dict[str, str], tmp_path: Path
) -> None:
    store = tmp_path / "memory.db"
    assert prime_memory(env, "--create", "--store", str(store), "store", "a fact").returncode == 0
    done = mcp_server(env, "--store", str(store))
    assert done.returncode == 0, done.stderr
    assert f"prime-memory-mcp: store {store}" in done.stderr.splitlines()
    assert done.stdout == ""  # stdout is the protocol's


def test_the_mcp_server_refuses_a_missing_store_outside_the_default(
    env: dict[str, str], tmp_path: Path
) -> None:
    mistyped = tmp_path / "wrok" / "memory.db"
    done = mcp_server(env, "--store", str(mistyped))
    assert done.returncode == 2
    one_line(done, f"no store at {mistyped}", "--create")
    assert done.stdout == ""
    assert not mistyped.parent.exists()


def test_the_mcp_server_creates_with_create_and_at_the_default(
    env: dict[str, str], tmp_path: Path
) -> None:
    new = tmp_path / "new" / "memory.db"
    done = mcp_server(env, "--create", "--store", str(new))
    assert done.returncode == 0, done.stderr
    assert f"store {new}" in done.stderr
    default = Path(env["PRIME_MEMORY_HOME"]) / "memory.db"
    done = mcp_server(env)
    assert done.returncode == 0, done.stderr
    assert f"store {default}" in done.stderr


def test_the_server_log_leaves_a_database_password_out() -> None:
    shown = shown_store("postgresql://alice:s3cret@db.example:5432/memory")
    assert "s3cret" not in shown and "db.example" in shown


def test_a_snippet_that_pins_a_missing_store_asks_the_server_to_create_it(
    env: dict[str, str], tmp_path: Path
) -> None:
    new = tmp_path / "team.db"
    done = prime_memory(env, "--store", str(new), "ide-config", "cursor")
    assert done.returncode == 0, done.stderr
    args = json.loads(done.stdout)["mcpServers"]["prime-memory"]["args"]
    assert args[-3:] == ["--create", "--store", str(new.resolve())]
    assert not new.exists()
    assert prime_memory(env, "--create", "--store", str(new), "store", "a fact").returncode == 0
    done = prime_memory(env, "--store", str(new), "ide-config", "cursor")
    args = json.loads(done.stdout)["mcpServers"]["prime-memory"]["args"]
    assert "--create" not in args
