"""Scopes through the real stdio server: the server works out the project, with no bleed."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from prime_memory_folding.core.scopes import SCOPE_ENV, resolve
from prime_memory_folding.mcp.server import build_server
from tests.stdio_client import StdioServer

#: Neither the scope variable nor Claude Code's project variable: the working directory decides.
NO_SCOPE_ENV = {SCOPE_ENV: "", "CLAUDE_PROJECT_DIR": ""}


def _repo(path: Path, origin: str) -> Path:
    path.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    subprocess.run(["git", "-C", str(path), "remote", "add", "origin", origin], check=True)
    return path


@contextmanager
def served(
    store: Path, cwd: Path, env: dict[str, str] | None = None, args: tuple[str, ...] = ()
) -> Iterator[StdioServer]:
    server = StdioServer(store, {**NO_SCOPE_ENV, **(env or {})}, cwd=cwd, args=args)
    try:
        server.handshake()
        yield server
    finally:
        assert server.close() == 0
        assert not server.stray, server.stray  # nothing but protocol frames on stdout


def contents(server: StdioServer, **arguments: Any) -> set[str]:
    result = server.call("prime_memory_query", {"limit": 50, **arguments})
    assert not result.get("isError"), result
    return {hit["content"] for hit in result["structuredContent"]["hits"]}


def stored(server: StdioServer, content: str, **arguments: Any) -> dict[str, Any]:
    result = server.call("prime_memory_store", {"content": content, **arguments})
    assert not result.get("isError"), result
    record: dict[str, Any] = result["structuredContent"]["record"]
    return record


def test_two_projects_share_one_store_without_bleed(tmp_path: Path) -> None:
    store = tmp_path / "memory.db"
    a = _repo(tmp_path / "work" / "api", "git@github.com:Acme/api.git")
    a_again = _repo(tmp_path / "elsewhere" / "api-clone", "https://github.com/acme/api")
    b = _repo(tmp_path / "work" / "web", "https://github.com/acme/web.git")
    (a / "src").mkdir()
    with served(store, a / "src") as in_a, served(store, b) as in_b:
        note = stored(in_a, "the api uses postgres 15", domain="decision")
        assert note["scope"] == "project:github.com/acme/api"
        stats = in_a.call("prime_memory_stats", {})["structuredContent"]
        assert stats["current_scope"] == "project:github.com/acme/api"
        assert "git origin" in stats["scope_reason"]
        assert stored(in_b, "tabs, not spaces", scope="global")["scope"] == "global"
        assert stored(in_b, "the web app uses vite")["scope"] == "project:github.com/acme/web"
        assert contents(in_b) == {"tabs, not spaces", "the web app uses vite"}
        assert contents(in_a) == {"the api uses postgres 15", "tabs, not spaces"}
        assert contents(in_b, scopes=["*"]) == {
            "the api uses postgres 15",
            "tabs, not spaces",
            "the web app uses vite",
        }
    with served(store, a_again) as clone:
        assert contents(clone) == {"the api uses postgres 15", "tabs, not spaces"}
        assert contents(clone, text="which database does the api use") >= {
            "the api uses postgres 15"
        }
        frame = clone.request("resources/read", {"uri": "memory://scope"})
        scope = json.loads(frame["result"]["contents"][0]["text"])
        assert scope["current"] == "project:github.com/acme/api"
        assert scope["source"] == "git"


# Three servers one after another: slow. test_scopes.py checks the same order of
# rules (flag, CLAUDE_PROJECT_DIR, git) in process.
@pytest.mark.slow
def test_server_flags_and_claude_project_dir_choose_the_project(tmp_path: Path) -> None:
    store = tmp_path / "memory.db"
    api = _repo(tmp_path / "api", "https://github.com/acme/api")
    home = tmp_path / "home"
    home.mkdir()
    with served(store, home, args=("--project", str(api))) as flagged:
        assert stored(flagged, "a")["scope"] == "project:github.com/acme/api"
    with served(store, home, env={"CLAUDE_PROJECT_DIR": str(api)}) as claude:
        assert stored(claude, "b")["scope"] == "project:github.com/acme/api"
        stats = claude.call("prime_memory_stats", {})["structuredContent"]
        assert stats["scopes"] == {"project:github.com/acme/api": 2}
        assert "CLAUDE_PROJECT_DIR" in stats["scope_reason"]
    with served(store, home, args=("--scope", "team:core")) as team:
        assert stored(team, "c")["scope"] == "team:core"
        assert contents(team) == {"c"}


def test_a_malformed_scope_is_refused_at_start_and_in_calls(tmp_path: Path) -> None:
    store = tmp_path / "memory.db"
    bad = StdioServer(store, NO_SCOPE_ENV, cwd=tmp_path, args=("--scope", "planet:earth"))
    assert bad.proc.wait(timeout=60) == 2
    bad.close()
    assert b"not a scope kind" in bad.stderr
    with served(store, tmp_path) as server:
        result = server.call("prime_memory_store", {"content": "x", "scope": "user:\x07"})
        assert result["isError"]
        assert "control" in result["content"][0]["text"]
        query = server.call("prime_memory_query", {"scopes": ["nope"]})
        assert query["isError"] and "no kind" in query["content"][0]["text"]
        assert server.call("prime_memory_stats", {})["structuredContent"]["records"] == 0


def test_roots_are_a_fallback_when_no_project_is_found(tmp_path: Path) -> None:
    store = tmp_path / "memory.db"
    api = _repo(tmp_path / "api", "https://github.com/acme/api")
    outside = tmp_path / "outside"
    outside.mkdir()
    server = StdioServer(store, NO_SCOPE_ENV, cwd=outside)
    try:
        server.handshake(capabilities={"roots": {"listChanged": False}})
        server.send(
            {
                "jsonrpc": "2.0",
                "id": 7,
                "method": "tools/call",
                "params": {"name": "prime_memory_store", "arguments": {"content": "from roots"}},
            }
        )
        ask = server.recv()
        assert ask["method"] == "roots/list", ask
        server.send(
            {
                "jsonrpc": "2.0",
                "id": ask["id"],
                "result": {"roots": [{"uri": api.as_uri(), "name": "api"}]},
            }
        )
        reply = server.recv()
        assert reply["id"] == 7, reply
        assert reply["result"]["structuredContent"]["record"]["scope"] == (
            "project:github.com/acme/api"
        )
        stats = server.call("prime_memory_stats", {})["structuredContent"]
        assert "MCP roots" in stats["scope_reason"]
    finally:
        assert server.close() == 0


def test_tools_describe_scope_arguments_as_ones_to_leave_out(tmp_path: Path) -> None:
    server = build_server(lambda: None, resolve("global", user="u"))  # type: ignore[arg-type,return-value]
    import anyio

    tools = {tool.name: tool for tool in anyio.run(server.list_tools)}
    store_scope = tools["prime_memory_store"].input_schema["properties"]["scope"]
    query_scopes = tools["prime_memory_query"].input_schema["properties"]["scopes"]
    assert "Leave this out" in store_scope["description"]
    assert "global" in store_scope["description"]
    assert "Leave this out" in query_scopes["description"]
    assert "ctx" not in tools["prime_memory_store"].input_schema["properties"]


@pytest.mark.parametrize("flag", ["--scope", "--project"])
def test_the_server_help_names_the_scope_flags(flag: str) -> None:
    from prime_memory_folding.mcp.args import parser

    assert flag in parser().format_help()
