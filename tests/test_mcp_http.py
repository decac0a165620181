"""Streamable HTTP: the bearer token gate, Host/Origin checks, and the bind rule.

The server runs as a real process on 127.0.0.1 with an OS-chosen port.
"""

from __future__ import annotations

import http.client
import json
import os
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from prime_memory_folding.mcp.http import http_bind_problem
from tests.inspector_process import ignore_sigint

TIMEOUT = 60
TOKEN = "s3cret-token-0123456789"
INITIALIZE = json.dumps(
    {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "pytest", "version": "1"},
        },
    }
)


class HttpServer:
    """The server process; ``port`` is read from the line it prints to stderr."""

    def __init__(
        self,
        store: Path | str,
        *args: str,
        env: dict[str, str] | None = None,
        sigint_ignored: bool = False,
    ) -> None:
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "prime_memory_folding.mcp.server",
                "--store",
                str(store),
                "--transport",
                "streamable-http",
                "--port",
                "0",
                *args,
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env=env,
            preexec_fn=ignore_sigint if sigint_ignored else None,
        )
        lines: queue.Queue[bytes] = queue.Queue()
        self.reader = threading.Thread(target=self._drain, args=(lines,), daemon=True)
        self.reader.start()
        #: What the server printed on stderr up to the line that says where it serves.
        self.said = b""
        while True:
            line = lines.get(timeout=TIMEOUT)
            assert line, "server exited before it was ready"
            self.said += line
            if b"serving streamable HTTP on" in line:
                self.url = line.decode().rsplit(" ", 1)[1].strip()
                break
        self.port = int(self.url.split(":")[-1].split("/")[0])

    def _drain(self, lines: queue.Queue[bytes]) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            lines.put(line)
        lines.put(b"")

    def post(self, body: str = INITIALIZE, **headers: str) -> tuple[int, str]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=TIMEOUT)
        try:
            conn.request(
                "POST",
                "/mcp",
                body=body,
                headers={
                    "Content-Type": "application/json",
                    "Accept": "application/json, text/event-stream",
                    **{name.replace("_", "-"): value for name, value in headers.items()},
                },
            )
            response = conn.getresponse()
            return response.status, response.read().decode(errors="replace")
        finally:
            conn.close()

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=TIMEOUT)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            self.reader.join(timeout=TIMEOUT)
            if self.proc.stderr is not None:
                self.proc.stderr.close()


@pytest.mark.parametrize(
    "rounds", [pytest.param(1, id="once"), pytest.param(3, id="3-times", marks=pytest.mark.slow)]
)
def test_ctrl_c_as_soon_as_it_serves_stops_a_background_server(tmp_path: Path, rounds: int) -> None:
    # It says where it serves only once it handles Ctrl-C itself.
    for _ in range(rounds):
        server = HttpServer(tmp_path / "memory.db", sigint_ignored=True)
        try:
            server.proc.send_signal(signal.SIGINT)
            assert server.proc.wait(timeout=TIMEOUT) == 0  # stopped by itself
        finally:
            server.stop()


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    server = HttpServer(tmp_path_factory.mktemp("http") / "memory.db", "--token", TOKEN)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def open_loopback(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    env = {k: v for k, v in os.environ.items() if k != "PRIME_MEMORY_TOKEN"}
    server = HttpServer(tmp_path_factory.mktemp("http") / "memory.db", env=env)
    yield server
    server.stop()


def test_the_server_binds_loopback_by_default(guarded: HttpServer) -> None:
    assert guarded.url.startswith("http://127.0.0.1:")
    assert guarded.url.endswith("/mcp")


@pytest.mark.parametrize("scheme", ["Bearer", "bearer"])
def test_a_request_with_the_token_is_served(guarded: HttpServer, scheme: str) -> None:
    status, body = guarded.post(Authorization=f"{scheme} {TOKEN}")
    assert status == 200
    assert '"protocolVersion":"2025-11-25"' in body


@pytest.mark.parametrize(
    "authorization",
    [None, "Bearer wrong", f"Bearer {TOKEN}x", TOKEN, f"Basic {TOKEN}", f"Bearer  {TOKEN}", ""],
)
def test_a_request_without_the_right_token_gets_401(
    guarded: HttpServer, authorization: str | None
) -> None:
    headers = {} if authorization is None else {"Authorization": authorization}
    status, body = guarded.post(**headers)
    assert status == 401
    assert "Authorization: Bearer" in body


def test_a_foreign_host_header_is_refused(guarded: HttpServer) -> None:
    status, _ = guarded.post(Authorization=f"Bearer {TOKEN}", Host="evil.example")
    assert status == 421


def test_a_foreign_origin_is_refused(guarded: HttpServer) -> None:
    status, _ = guarded.post(Authorization=f"Bearer {TOKEN}", Origin="http://evil.example")
    assert status == 403


def test_a_loopback_origin_is_allowed(guarded: HttpServer) -> None:
    status, _ = guarded.post(
        Authorization=f"Bearer {TOKEN}", Origin=f"http://localhost:{guarded.port}"
    )
    assert status == 200


def test_loopback_without_a_token_needs_none(open_loopback: HttpServer) -> None:
    status, _ = open_loopback.post()
    assert status == 200


def test_loopback_without_a_token_still_checks_the_host(open_loopback: HttpServer) -> None:
    status, _ = open_loopback.post(Host="attacker.example:80")
    assert status == 421


@pytest.mark.parametrize("origin", ["http://evil.example", "null", "http://localhost.evil.example"])
def test_loopback_without_a_token_refuses_a_foreign_origin(
    open_loopback: HttpServer, origin: str
) -> None:
    # With no token, the Origin check is all that stops a web page the user visits
    # from calling the server through the browser.
    status, _ = open_loopback.post(Origin=origin)
    assert status == 403


@pytest.mark.parametrize("name", ["127.0.0.1", "localhost"])
def test_loopback_without_a_token_accepts_a_loopback_origin(
    open_loopback: HttpServer, name: str
) -> None:
    status, body = open_loopback.post(Origin=f"http://{name}:{open_loopback.port}")
    assert status == 200
    assert '"protocolVersion":"2025-11-25"' in body


# A server process for each host: one in the default run, the rest slow;
# test_bind_rule checks the rule itself in process.
@pytest.mark.parametrize(
    "host",
    [
        "0.0.0.0",
        *(pytest.param(h, marks=pytest.mark.slow) for h in ("::", "192.168.1.20", "memory.lan")),
    ],
)
def test_binding_beyond_loopback_without_a_token_refuses_to_start(
    tmp_path: Path, host: str
) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PRIME_MEMORY_TOKEN"}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "prime_memory_folding.mcp.server",
            "--store",
            str(tmp_path / "m.db"),
            "--transport",
            "streamable-http",
            "--host",
            host,
        ],
        capture_output=True,
        timeout=TIMEOUT,
        env=env,
    )
    assert done.returncode == 2
    assert b"refusing to serve HTTP" in done.stderr
    assert b"PRIME_MEMORY_TOKEN" in done.stderr
    assert done.stdout == b""


@pytest.mark.parametrize(
    ("host", "token", "allowed"),
    [
        ("127.0.0.1", None, True),
        ("localhost", None, True),
        ("::1", None, True),
        ("127.0.0.2", None, True),
        ("0.0.0.0", None, False),
        ("0.0.0.0", "", False),
        ("0.0.0.0", "t", True),
        ("10.0.0.5", "t", True),
    ],
)
def test_bind_rule(host: str, token: str | None, allowed: bool) -> None:
    assert (http_bind_problem(host, token) is None) is allowed
