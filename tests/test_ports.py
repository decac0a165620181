"""The two HTTP servers' ports: apart by default, and a port in use is one line, not a traceback."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from prime_memory_folding import MemoryEngine
from prime_memory_folding.cli import cli
from prime_memory_folding.mcp.args import parser
from prime_memory_folding.net.announce import INSPECTOR_PORT, MCP_HTTP_PORT

TIMEOUT = 60  # seconds; the servers exit as soon as the bind fails


@pytest.fixture
def taken_port() -> Iterator[int]:
    """A loopback port another process already listens on."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen(1)
        yield holder.getsockname()[1]


def test_the_inspector_and_the_mcp_server_default_to_different_ports() -> None:
    assert parser().parse_args([]).port == MCP_HTTP_PORT == 8765
    assert INSPECTOR_PORT != MCP_HTTP_PORT
    shown = CliRunner().invoke(cli, ["ui", "--help"]).output
    assert f"default: {INSPECTOR_PORT}" in shown


@pytest.mark.parametrize(
    ("command", "prefix"),
    [
        (["-m", "prime_memory_folding.cli", "ui", "--no-browser"], "Error: "),
        (["-m", "prime_memory_folding.mcp.server", "--transport", "streamable-http"], ""),
        (["-m", "prime_memory_folding.cli", "serve", "--transport", "http"], ""),
    ],
    ids=["ui", "prime-memory-mcp", "serve"],
)
def test_a_port_in_use_is_one_line_that_says_what_to_do(
    store_path: Path, taken_port: int, command: list[str], prefix: str
) -> None:
    MemoryEngine(store_path).close()
    done = subprocess.run(
        [sys.executable, *command, "--store", str(store_path), "--port", str(taken_port)],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    [line] = done.stderr.splitlines()
    assert line.startswith(prefix)
    assert f"cannot listen on 127.0.0.1:{taken_port}: the port is in use" in line
    assert "--port N" in line and "--port 0" in line
