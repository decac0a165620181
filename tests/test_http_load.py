"""Streamable HTTP under concurrent load, and the token gate on every method.

``test_mcp_http.py`` covers the token, Host and Origin checks on POST and the
bind rule; this adds the other HTTP methods, Nagle off on served connections,
and the load run of ``benchmarks/http_load.py``: 2 clients x 200 calls in the
default run, and the full 4 clients x 2,000 calls in the slow run
(``python3 -m pytest -m slow``).
"""

from __future__ import annotations

import asyncio
import http.client
import json
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from prime_memory_folding.net.announce import listening_socket
from tests.test_mcp_http import TIMEOUT, TOKEN, HttpServer

HTTP_LOAD = Path(__file__).resolve().parents[1] / "benchmarks" / "http_load.py"


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    server = HttpServer(tmp_path_factory.mktemp("http") / "memory.db", "--token", TOKEN)
    yield server
    server.stop()


def request(server: HttpServer, method: str, path: str, **headers: str) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=TIMEOUT)
    try:
        conn.request(method, path, headers=headers)
        response = conn.getresponse()
        response.read()
        return response.status
    finally:
        conn.close()


@pytest.mark.parametrize("method", ["GET", "DELETE", "PUT", "OPTIONS", "HEAD"])
@pytest.mark.parametrize("path", ["/mcp", "/", "/mcp/../mcp", "/nope"])
def test_every_method_and_path_needs_the_token(guarded: HttpServer, method: str, path: str) -> None:
    assert request(guarded, method, path) == 401
    assert request(guarded, method, path, Authorization="Bearer wrong") == 401


def test_a_bad_origin_without_a_token_is_refused_before_anything_else(
    guarded: HttpServer,
) -> None:
    status, body = guarded.post(Origin="http://evil.example", Host="evil.example")
    assert status == 401 and "protocolVersion" not in body


def test_served_connections_send_without_waiting_for_an_ack() -> None:
    # With Nagle on, an SSE body written after its headers waits for the
    # client's delayed ACK, which adds about 40 ms to every call.
    async def nodelay_of_an_accepted_connection() -> int:
        loop = asyncio.get_running_loop()
        accepted: asyncio.Future[asyncio.BaseTransport] = loop.create_future()

        class Accept(asyncio.Protocol):
            def connection_made(self, transport: asyncio.BaseTransport) -> None:
                accepted.set_result(transport)

        listener = listening_socket("127.0.0.1", 0)
        async with await loop.create_server(Accept, sock=listener):
            _, writer = await asyncio.open_connection(*listener.getsockname())
            transport = await asyncio.wait_for(accepted, TIMEOUT)
            served = transport.get_extra_info("socket")
            nodelay = int(served.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            transport.close()
            writer.close()
            await writer.wait_closed()
        return nodelay

    assert asyncio.run(nodelay_of_an_accepted_connection()) != 0


@pytest.mark.parametrize(
    ("clients", "calls"),
    [
        pytest.param(2, 200, id="2x200"),
        pytest.param(4, 2000, id="4x2000", marks=pytest.mark.slow),
    ],
)
def test_concurrent_clients_lose_no_write(tmp_path: Path, clients: int, calls: int) -> None:
    report_path = tmp_path / "load.json"
    # The time limit fails a stalled run cleanly; the subprocess timeout is the backstop.
    done = subprocess.run(
        [sys.executable, str(HTTP_LOAD), "--clients", str(clients), "--calls", str(calls),
         "--time-limit", "240", "--json", str(report_path)],
        capture_output=True, text=True, timeout=480,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(report_path.read_text())
    assert report["errors"] == 0 and report["lost"] == 0
    assert report["completed"] == clients * calls
    assert report["stores"] > 0
    assert report["p99_ms"] >= report["p50_ms"] > 0
