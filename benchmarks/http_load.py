"""HTTP load: concurrent clients against one streamable-HTTP server on loopback.

Starts ``prime_memory_folding.mcp.server --transport streamable-http`` on
127.0.0.1 with a bearer token and an OS-chosen port, then runs C clients in
threads, each with its own MCP session, doing M mixed calls (stores, queries,
stats; a dry-run fold now and then). Every store must be found afterwards.
Reports p50/p99 latency per call.

    python3 benchmarks/http_load.py                        # 4 clients x 2,000 calls
    python3 benchmarks/http_load.py --clients 2 --calls 100 --json load.json
    python3 benchmarks/http_load.py --time-limit 240       # stop and fail after 240 s

Exits 1 on any error or lost write, or when the time limit stops the clients.
"""

from __future__ import annotations

import http.client
import itertools
import json
import os
import queue
import random
import secrets
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

TIMEOUT = 120
PROTOCOL_VERSION = "2025-11-25"


class HttpClient:
    """One MCP session over streamable HTTP, with plain ``http.client``."""

    def __init__(self, port: int, token: str) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=TIMEOUT)
        self.headers = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "Authorization": f"Bearer {token}",
        }
        self._ids = itertools.count(1)
        reply = self.post(
            {
                "jsonrpc": "2.0",
                "id": next(self._ids),
                "method": "initialize",
                "params": {
                    "protocolVersion": PROTOCOL_VERSION,
                    "capabilities": {},
                    "clientInfo": {"name": "http-load", "version": "1"},
                },
            }
        )
        assert "result" in reply, reply
        self.headers["MCP-Protocol-Version"] = PROTOCOL_VERSION
        self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def post(self, message: dict[str, Any]) -> dict[str, Any]:
        self.conn.request("POST", "/mcp", body=json.dumps(message), headers=self.headers)
        response = self.conn.getresponse()
        body = response.read().decode()
        session = response.getheader("mcp-session-id")
        if session:
            self.headers["Mcp-Session-Id"] = session
        if response.status == 202:
            return {}
        if response.status != 200:
            raise RuntimeError(f"HTTP {response.status}: {body[:200]}")
        if "text/event-stream" in (response.getheader("content-type") or ""):
            data = [line[5:].strip() for line in body.splitlines() if line.startswith("data:")]
            frames = [json.loads(d) for d in data if d]
            return dict(frames[-1])
        return dict(json.loads(body))

    def call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        frame = self.post(
            {"jsonrpc": "2.0", "id": next(self._ids), "method": "tools/call",
             "params": {"name": tool, "arguments": arguments}}
        )  # fmt: skip
        if "error" in frame:
            raise RuntimeError(f"{tool}: {frame['error']}")
        if frame["result"].get("isError"):
            raise RuntimeError(f"{tool}: {frame['result']['content'][0]['text']}")
        return dict(frame["result"]["structuredContent"])


def start_server(
    store: Path | str, token: str, env: dict[str, str]
) -> tuple[subprocess.Popen[bytes], int]:
    return serve_http(store, env, ["--port", "0", f"--token={token}"])


def serve_http(
    store: Path | str, env: dict[str, str], options: Sequence[str]
) -> tuple[subprocess.Popen[bytes], int]:
    """The MCP server over streamable HTTP with ``options``, once it serves:
    (its process, the port it printed)."""
    return serve_command(
        [sys.executable, "-m", "prime_memory_folding.mcp.server", "--store", str(store),
         "--create", "--transport", "streamable-http", *options],
        env,
    )  # fmt: skip


def serve_command(
    command: Sequence[str], env: dict[str, str]
) -> tuple[subprocess.Popen[bytes], int]:
    """A server started by ``command``, once it prints ``serving streamable HTTP on
    http://HOST:PORT/...`` to stderr: (its process, the port)."""
    proc = subprocess.Popen(
        list(command),
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env,
    )  # fmt: skip
    lines: queue.Queue[bytes] = queue.Queue()

    def drain() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.put(line)
        lines.put(b"")

    threading.Thread(target=drain, daemon=True).start()
    seen: list[bytes] = []
    while True:
        line = lines.get(timeout=TIMEOUT)
        if not line:
            said = b"".join(seen[-10:]).decode(errors="replace").strip()
            raise RuntimeError(f"the server exited before it was ready: {said or 'no output'}")
        seen.append(line)
        if b"serving streamable HTTP on" in line:
            return proc, int(line.decode().rsplit(":", 1)[1].split("/")[0])


def drive(
    port: int, token: str, client_no: int, calls: int, deadline: float, out: dict[str, Any]
) -> None:
    rng = random.Random(client_no)
    client = HttpClient(port, token)
    latencies: list[float] = []
    errors: list[str] = []
    stored: list[str] = []
    for n in range(calls):
        remaining = deadline - time.perf_counter()
        if remaining <= 0:
            errors.append(f"stopped after {n} of {calls} calls: the time limit was reached")
            break
        # A stalled server then fails this call at the deadline instead of hanging the run.
        client.conn.timeout = min(TIMEOUT, remaining)
        if client.conn.sock is not None:
            client.conn.sock.settimeout(client.conn.timeout)
        roll = rng.random()
        started = time.perf_counter()
        try:
            if roll < 0.5:
                result = client.call(
                    "prime_memory_store",
                    {"content": f"client {client_no} call {n}", "tags": [f"c{client_no}"]},
                )
                stored.append(result["record"]["record_id"])
            elif roll < 0.9:
                client.call("prime_memory_query", {"tags": [f"c{rng.randrange(4)}"], "limit": 5})
            elif roll < 0.99:
                client.call("prime_memory_stats", {})
            else:
                client.call("prime_memory_fold", {"dry_run": True})
        except (RuntimeError, OSError, http.client.HTTPException) as exc:
            errors.append(f"call {n}: {exc}")
        latencies.append(time.perf_counter() - started)
    out.update(latencies=latencies, errors=errors, stored=stored)
    client.conn.close()


def run(
    clients: int, calls: int, store: Path, env: dict[str, str], time_limit: float = float("inf")
) -> dict[str, Any]:
    token = secrets.token_urlsafe(16)
    proc, port = start_server(store, token, env)
    results: list[dict[str, Any]] = [{} for _ in range(clients)]
    try:
        deadline = time.perf_counter() + time_limit
        threads = [
            threading.Thread(target=drive, args=(port, token, c, calls, deadline, results[c]))
            for c in range(clients)
        ]
        started = time.perf_counter()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        elapsed = time.perf_counter() - started
        found = set(HttpClient(port, token).call("prime_memory_stats", {})["tags"])
    finally:
        proc.terminate()
        proc.wait(timeout=TIMEOUT)
    from prime_memory_folding import MemoryEngine

    stored = [rid for result in results for rid in result.get("stored", [])]
    with MemoryEngine(store, embedder="none") as engine:
        live = set(engine.match_ids())
    lost = [rid for rid in stored if rid not in live]
    errors = [e for result in results for e in result.get("errors", ["client died"])]
    latencies = sorted(x for result in results for x in result.get("latencies", []))
    quantiles = statistics.quantiles(latencies, n=100) if len(latencies) > 1 else [0.0] * 99
    return {
        "clients": clients,
        "calls": calls,
        "completed": len(latencies),
        "stores": len(stored),
        "lost": len(lost),
        "errors": len(errors),
        "first_errors": errors[:5],
        "tags_seen": sorted(found),
        "seconds": elapsed,
        "calls_per_s": len(latencies) / elapsed,
        "p50_ms": quantiles[49] * 1000,
        "p99_ms": quantiles[98] * 1000,
        "ok": not errors and not lost and len(set(stored)) == len(stored),
    }


def main(argv: Sequence[str] | None = None) -> int:
    import _harness as harness  # here, so that tests can import this module's client alone

    parser = harness.parser(__doc__, clients=4, calls=(2_000, "calls per client"))
    parser.add_argument("--embedder", default="none", help="PRIME_MEMORY_EMBEDDER (default none)")
    parser.add_argument(
        "--time-limit",
        type=float,
        default=float("inf"),
        metavar="SECONDS",
        help="stop the clients after this long and fail (default: no limit)",
    )
    args = parser.parse_args(argv)
    env = {**os.environ, "PRIME_MEMORY_EMBEDDER": args.embedder}
    env.pop("PRIME_MEMORY_TOKEN", None)
    with tempfile.TemporaryDirectory(prefix="prime-memory-http-") as folder:
        report = run(args.clients, args.calls, Path(folder) / "http.db", env, args.time_limit)
    print(
        f"{report['clients']} clients x {report['calls']} calls: {report['completed']} done "
        f"in {report['seconds']:.1f} s, {report['stores']} stores, {report['lost']} lost, "
        f"{report['errors']} errors, {report['calls_per_s']:.0f} calls/s, "
        f"p50 {report['p50_ms']:.2f} ms, p99 {report['p99_ms']:.2f} ms"
    )
    return harness.conclude(report, args.json, report["first_errors"])


if __name__ == "__main__":
    sys.exit(main())
