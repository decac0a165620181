"""MCP server latency: start-up to the initialize reply, and store round trips over stdio.

    python3 benchmarks/mcp_latency.py                   # 100,000 stores
    python3 benchmarks/mcp_latency.py --records 5000    # a quick run

(a) Start-up: from spawning the server to reading its ``initialize`` reply
    (target <= 1.0 s), next to the same for a bare SDK server with one trivial
    tool, which is the floor any Python MCP server pays.
(b) Round trip: ``prime_memory_store`` through stdio, up to N records on a
    fresh store: p50/p99, and the p50 of the last 1,000 over the first 1,000
    (targets: p50 <= 2 ms, ratio <= 1.3). The same client then calls the
    trivial tool of the bare SDK server, for a side-by-side floor.

    Two real clients, each in its own process from the server's: a lean one
    that writes and reads JSON-RPC lines on the pipes (as a Node or Rust IDE
    client does, costing next to nothing itself), which the targets are judged
    on, and the Python SDK's ``Client``, whose own validation adds to every
    round trip (``--sdk-records`` of them).
"""

from __future__ import annotations

import itertools
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import _harness as harness
import anyio
from _shared import HELLO, SERVER, LineClient
from mcp import Client, StdioServerParameters

FLOOR_SERVER = [
    sys.executable,
    "-c",
    """
from pydantic import BaseModel
from mcp.server.mcpserver import MCPServer

class Echo(BaseModel):
    text: str

server = MCPServer("floor", log_level="WARNING")

@server.tool()
def echo(text: str) -> Echo:
    \"\"\"Return the text.\"\"\"
    return Echo(text=text)

server.run()
""",
]
INITIALIZE = (
    json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": HELLO}).encode()
    + b"\n"
)
TAGS = ["architecture", "bug", "decision", "api", "storage", "ui", "test", "perf"]
DOMAINS = ["memory", "project", "decision", "file"]
OURS, BARE = "prime-memory-mcp", "bare SDK server"

Arguments = Callable[[int], dict[str, Any]]


def store_arguments(i: int) -> dict[str, Any]:
    return {
        "content": f"note {i}: the {TAGS[i % 8]} choice in module {i % 997}",
        "domain": DOMAINS[i % 4],
        "tags": [TAGS[i % 8], TAGS[(i // 8) % 8]],
    }


def echo_arguments(i: int) -> dict[str, Any]:
    return {"text": f"note {i}"}


def summarise(
    label: str, store: list[float], trivial: list[float], *, flatness: bool
) -> dict[str, float]:
    """Print one client's store and floor figures; return them."""
    ms = harness.fmt_ms
    found = {
        "store_p50": statistics.median(store),
        "store_p99": harness.percentile(store, 0.99),
        "floor_p50": statistics.median(trivial),
        "floor_p99": harness.percentile(trivial, 0.99),
    }
    print(f"{label}:")
    print(f"  store p50 {ms(found['store_p50'])}  p99 {ms(found['store_p99'])}")
    if flatness:
        window = min(1_000, len(store) // 2) or 1
        first = statistics.median(store[:window])
        last = statistics.median(store[-window:])
        found["last_over_first"] = last / first
        print(f"  first {window:,} p50 {ms(first)}  last {window:,} p50 {ms(last)}")
        print(f"  last/first ratio {last / first:.2f}")
    print(f"  SDK floor (trivial tool) p50 {ms(found['floor_p50'])}  p99 {ms(found['floor_p99'])}")
    print(f"  store / floor {found['store_p50'] / found['floor_p50']:.2f}x")
    return found


class RunningP50:
    """The p50 of the last ``every`` round trips, once every ``every``, to ``log``."""

    def __init__(self, every: int, log: Callable[[str], None]) -> None:
        self.every, self.log = every, log

    def __call__(self, latencies: list[float]) -> None:
        if self.every and len(latencies) % self.every == 0:
            recent = harness.fmt_ms(statistics.median(latencies[-self.every :]))
            self.log(f"  {len(latencies):>7} records: p50 {recent}")


def round_trips(
    command: list[str],
    tool: str,
    arguments: Arguments,
    calls: int,
    progress: Callable[[list[float]], None] = lambda _: None,
    *,
    sdk: bool = False,
) -> list[float]:
    """Seconds of each of ``calls`` calls of ``tool`` on the server ``command`` starts,
    through the lean client or, with ``sdk``, the Python SDK's ``Client``."""
    opens_a_store = tool == "prime_memory_store"
    if sdk:

        async def through_sdk() -> list[float]:
            params = StdioServerParameters(command=command[0], args=command[1:])
            latencies: list[float] = []
            async with Client(params, mode="legacy") as client:
                if opens_a_store:
                    await client.call_tool("prime_memory_stats", {})
                for i in range(calls):
                    started = time.perf_counter()
                    result = await client.call_tool(tool, arguments(i))
                    latencies.append(time.perf_counter() - started)
                    if result.is_error:
                        raise SystemExit(f"{tool} call {i} failed: {result.content}")
                    progress(latencies)
            return latencies

        return anyio.run(through_sdk)
    client = LineClient(command)
    try:
        if opens_a_store:
            client.call_tool("prime_memory_stats", {})
        return harness.timed_calls(lambda i: client.call_tool(tool, arguments(i)), calls, progress)
    finally:
        client.close()


def time_to_initialize(command: list[str]) -> float:
    started = time.perf_counter()
    proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(INITIALIZE)
    proc.stdin.flush()
    line = proc.stdout.readline()
    elapsed = time.perf_counter() - started
    assert b'"protocolVersion"' in line, line
    proc.stdin.close()
    proc.wait(timeout=60)
    proc.stdout.close()
    return elapsed


def startups(folder: Path, turns: int) -> dict[str, list[float]]:
    """Seconds from spawn to the ``initialize`` reply: this server, each time on a new store
    in ``folder``, and the bare SDK server, taking turns."""
    stores = (folder / f"s{i}.db" for i in itertools.count())
    return harness.in_turns(
        {
            OURS: lambda: time_to_initialize([*SERVER, "--store", str(next(stores))]),
            BARE: lambda: time_to_initialize(FLOOR_SERVER),
        },
        turns,
    )


def main() -> None:
    parser = harness.parser(
        __doc__,
        records=(100_000, "stores to time (100,000)"),
        starts=(5, "start-ups to time (5)"),
        floor_calls=(2_000, "trivial calls (2,000)"),
        sdk_records=(10_000, "stores through the SDK's client (10,000)"),
    )
    args = parser.parse_args()
    harness.at_least(parser, args, records=1, starts=1, floor_calls=1)
    log = harness.Log(args.quiet)
    ms = harness.fmt_ms

    with tempfile.TemporaryDirectory() as tmp:
        print("(a) start-up: spawn -> initialize reply")
        started = startups(Path(tmp), args.starts)
        ours, floor = (statistics.median(started[name]) for name in (OURS, BARE))
        print(f"  prime-memory-mcp  median {ms(ours)}  min {ms(min(started[OURS]))}")
        print(f"  bare SDK server   median {ms(floor)}  min {ms(min(started[BARE]))}")
        print(f"  ratio             {ours / floor:.2f}x")
        print(f"  target <= 1.0 s: {'ok' if ours <= 1.0 else 'over'}")

        print(f"(b) prime_memory_store round trips, {args.records:,} records, lean client")
        progress = RunningP50(max(1, args.records // 10), log)
        store_server = [*SERVER, "--store", str(Path(tmp) / "bench.db")]
        store = round_trips(
            store_server, "prime_memory_store", store_arguments, args.records, progress
        )
        trivial = round_trips(FLOOR_SERVER, "echo", echo_arguments, args.floor_calls)
        sdk_records = min(args.sdk_records, args.records)
        if sdk_records:
            print(f"(c) the same with the SDK's Client, {sdk_records:,} records")
            sdk_server = [*SERVER, "--store", str(Path(tmp) / "sdk.db")]
            sdk_progress = RunningP50(max(1, sdk_records // 5), log)
            sdk_store = round_trips(
                sdk_server,
                "prime_memory_store",
                store_arguments,
                sdk_records,
                sdk_progress,
                sdk=True,
            )
            sdk_trivial = round_trips(
                FLOOR_SERVER, "echo", echo_arguments, args.floor_calls, sdk=True
            )

    lean = summarise("lean client (targets)", store, trivial, flatness=True)
    sdk = summarise("SDK client", sdk_store, sdk_trivial, flatness=False) if sdk_records else None
    p50, ratio = lean["store_p50"], lean["last_over_first"]
    print(
        f"  targets (lean client): p50 <= 2 ms: {'ok' if p50 <= 0.002 else 'over'}; "
        f"ratio <= 1.3: {'ok' if ratio <= 1.3 else 'over'}"
    )
    startup = {name: statistics.median(seconds) for name, seconds in started.items()}
    harness.write_json(args.json, {"startup_median_seconds": startup, "lean": lean, "sdk": sdk})


if __name__ == "__main__":
    main()
