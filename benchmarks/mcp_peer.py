"""Through MCP, side by side: this server against the reference memory server.

The peer is ``@modelcontextprotocol/server-memory`` from npm, the official
reference memory server: a knowledge graph kept in one JSONL file (set by
``MEMORY_FILE_PATH``). It is installed with ``npm install --prefix CACHE`` on
first use and run with Node. Both servers are started over stdio and driven by
the same Python client (the MCP SDK's ``stdio_client`` and ``ClientSession``):

1. N stores, one call each: ``create_entities`` with one entity and one
   observation for the peer, ``prime_memory_store`` for this server (default
   configuration, so each store also embeds its text with the built-in model);
2. agreement: a few stored names are searched on both, and each must find its
   item (``search_nodes`` for the peer; ``prime_memory_query`` with the name as
   text, in the top 10, for this server); a miss fails the size;
3. S timed searches for stored names, picked at random.

A system that runs past ``--cap`` seconds in a phase is stopped there and
reported as capped, with what it finished. Reported per system and N: store
throughput, p50/p99 store and search latency, and the server process's resident
memory (VmRSS and its peak VmHWM, from ``/proc``). Sizes run in turn, the two
systems alternating, each on a fresh store. A size where either system misses
a probe has no throughput ratio, and the script exits with status 1.

``--peer-command`` runs another command as the peer instead of installing
the package (a local build of it, or the tests' offline stand-in).

Run from the repository root::

    python3 benchmarks/mcp_peer.py --sizes 1000 5000
"""

from __future__ import annotations

import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import _harness as harness
from _shared import REPO_ROOT, memory_kib

PEER_PACKAGE = "@modelcontextprotocol/server-memory"
DEFAULT_CACHE = REPO_ROOT / "benchmarks" / ".cache" / "npm"
OURS, PEER = "prime-memory-mcp", "server-memory (reference)"
TOPICS = ("architecture", "bug", "decision", "api", "storage", "ui", "test", "perf")
AGREEMENT_PROBES = 5
CURVE_POINTS = 20
TARGET_RATIO = 10.0
TARGET_SIZE = 20_000


@dataclass(frozen=True)
class Server:
    """How to start one system and speak its tools."""

    name: str
    command: str
    args: list[str]
    env: dict[str, str]
    store: Callable[[int], tuple[str, dict[str, Any]]]
    search: Callable[[int], tuple[str, dict[str, Any]]]
    found: Callable[[Any, int], bool]


def item_name(i: int) -> str:
    return f"note-{i:06d}"


def sentence(i: int) -> str:
    return f"the {TOPICS[i % 8]} choice in module {i % 997} after review {i % 89}"


def ours(store: Path) -> Server:
    def found(result: Any, i: int) -> bool:
        hits = (result.structured_content or {}).get("hits", [])
        return any(h["content"].startswith(item_name(i) + ":") for h in hits)

    # The default configuration, whatever this shell sets: text embedded with
    # the built-in model on every store.
    env = {k: v for k, v in os.environ.items() if k != "PRIME_MEMORY_EMBEDDER"}
    return Server(
        OURS,
        sys.executable,
        ["-m", "prime_memory_folding.mcp.server", "--create", "--store", str(store)],
        env,
        lambda i: (
            "prime_memory_store",
            {"content": f"{item_name(i)}: {sentence(i)}", "domain": "notes"},
        ),
        lambda i: ("prime_memory_query", {"text": item_name(i), "limit": 10}),
        found,
    )


def peer(command: Sequence[str], store: Path) -> Server:
    def found(result: Any, i: int) -> bool:
        entities = (result.structured_content or {}).get("entities", [])
        return any(e["name"] == item_name(i) for e in entities)

    return Server(
        PEER,
        command[0],
        list(command[1:]),
        dict(os.environ, MEMORY_FILE_PATH=str(store)),
        lambda i: (
            "create_entities",
            {
                "entities": [
                    {"name": item_name(i), "entityType": "note", "observations": [sentence(i)]}
                ]
            },
        ),
        lambda i: ("search_nodes", {"query": item_name(i)}),
        found,
    )


def install_peer(cache: Path, log: Callable[[str], None]) -> tuple[Path | None, str]:
    """The peer's entry script and a description, or (None, why it is unavailable)."""
    node = shutil.which("node")
    if node is None:
        return None, "node is not installed"
    node_version = subprocess.run([node, "--version"], capture_output=True, text=True).stdout
    package = cache / "node_modules" / PEER_PACKAGE
    script = package / "dist" / "index.js"
    if not script.is_file():
        npm = shutil.which("npm")
        if npm is None:
            return None, "npm is not installed"
        log(f"installing {PEER_PACKAGE} into {cache}")
        cache.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(
            [npm, "install", "--prefix", str(cache), "--no-audit", "--no-fund", PEER_PACKAGE],
            capture_output=True,
            text=True,
        )
        if done.returncode != 0 or not script.is_file():
            return None, f"npm install failed: {done.stderr.strip()[-300:]}"
    version = json.loads((package / "package.json").read_text())["version"]
    return script, f"{PEER_PACKAGE} {version} on Node {node_version.strip()}"


def children() -> set[int]:
    """Pids of this process's direct children (Linux ``/proc``)."""
    me = str(os.getpid())
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if stat.rsplit(")", 1)[1].split()[1] == me:
                found.add(int(entry.name))
    return found


def latency_summary(latencies: Sequence[float], seconds: float) -> dict[str, Any]:
    if not latencies:
        return {"calls": 0}
    return {
        "calls": len(latencies),
        "seconds": seconds,
        "per_second": len(latencies) / seconds if seconds > 0 else None,
        "p50": statistics.median(latencies),
        "p99": harness.percentile(latencies, 0.99),
    }


def curve(latencies: Sequence[float]) -> list[tuple[int, float]]:
    """(stores so far, p50 latency of that stretch) at about CURVE_POINTS points."""
    width = max(1, len(latencies) // CURVE_POINTS)
    return [
        (start + width, statistics.median(latencies[start : start + width]))
        for start in range(0, len(latencies) - width + 1, width)
    ]


async def drive(
    server: Server, count: int, searches: int, cap: float, seed: int, log: Callable[[str], None]
) -> dict[str, Any]:
    """Start one server, store ``count`` items, check agreement, time searches."""
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(command=server.command, args=server.args, env=server.env)
    before = children()
    result: dict[str, Any] = {"system": server.name, "target_stores": count}
    with open(os.devnull, "w") as quiet:
        async with (
            stdio_client(params, errlog=quiet) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            pid = next(iter(children() - before), -1)
            result["startup_rss"] = memory_kib(pid)
            capped: list[str] = []

            async def timed(phase: str, calls: list[tuple[str, dict[str, Any]]]) -> list[float]:
                """Each call's seconds, one after the other; stopped after ``cap`` seconds."""
                latencies: list[float] = []
                started = time.perf_counter()
                for n, (tool, arguments) in enumerate(calls, 1):
                    t0 = time.perf_counter()
                    reply = await session.call_tool(tool, arguments)
                    latencies.append(time.perf_counter() - t0)
                    if phase == "stores" and reply.is_error:
                        raise RuntimeError(f"{server.name} store {n - 1} failed: {reply.content}")
                    if phase == "stores" and n % max(1, count // 10) == 0:
                        log(f"  {server.name}: {n:,}/{count:,} stores")
                    if time.perf_counter() - started > cap:
                        capped.append(f"{phase} stopped after {cap:.0f} s at {n:,}")
                        break
                result[phase] = latency_summary(latencies, time.perf_counter() - started)
                return latencies

            latencies = await timed("stores", [server.store(i) for i in range(count)])
            result["store_curve"] = curve(latencies)
            result["memory"] = memory_kib(pid)
            stored = len(latencies)
            probes = sorted(
                {round(j * (stored - 1) / (AGREEMENT_PROBES - 1)) for j in range(AGREEMENT_PROBES)}
            )
            missed = []
            for i in probes:
                tool, arguments = server.search(i)
                if not server.found(await session.call_tool(tool, arguments), i):
                    missed.append(item_name(i))
            result["agreement"] = {"probed": [item_name(i) for i in probes], "missed": missed}
            rng = random.Random(seed)
            await timed("searches", [server.search(rng.randrange(stored)) for _ in range(searches)])
            result["capped"] = "; ".join(capped) or None
    return result


def run(
    sizes: Sequence[int],
    *,
    searches: int = 200,
    cap: float = 600.0,
    cache: Path = DEFAULT_CACHE,
    seed: int = 5,
    with_peer: bool = True,
    peer_command: Sequence[str] | None = None,
    log: Callable[[str], None] = lambda _: None,
    inject_mismatch: bool = False,
) -> dict[str, Any]:
    """Every size, both systems; the results as one JSON-ready mapping.

    ``peer_command`` starts the peer instead of the npm package.
    ``inject_mismatch`` (for the tests) makes every probe of this server miss.
    """
    import anyio

    command: list[str] | None = None
    if not with_peer:
        peer_note = "left out on request"
    elif peer_command:
        command = list(peer_command)
        peer_note = f"{' '.join(command)} (given with --peer-command)"
    else:
        script, peer_note = install_peer(cache, log)
        command = ["node", str(script)] if script else None
    out: dict[str, Any] = {
        "benchmark": "mcp_peer",
        "peer": peer_note if command else None,
        "peer_unavailable": None if command else peer_note,
        "cap_seconds": cap,
        "sizes": [],
    }
    with tempfile.TemporaryDirectory(prefix="pmf-peer-") as tmp:
        for count in sizes:
            row: dict[str, Any] = {"records": count, "systems": {}}
            servers = [ours(Path(tmp) / f"ours-{count}.db")]
            if inject_mismatch:
                servers[0] = replace(servers[0], found=lambda result, i: False)
            if command is not None:
                servers.append(peer(command, Path(tmp) / f"peer-{count}.jsonl"))
            for server in servers:
                log(f"MCP: {server.name}, {count:,} stores")
                row["systems"][server.name] = anyio.run(
                    drive, server, count, searches, cap, seed, log
                )
            systems = row["systems"]
            row["agreement"] = all(not s["agreement"]["missed"] for s in systems.values())
            if PEER in systems and row["agreement"]:
                # Only systems that found what they stored are compared.
                ours_rate = systems[OURS]["stores"]["per_second"]
                peer_rate = systems[PEER]["stores"]["per_second"]
                row["store_throughput_ratio"] = ours_rate / peer_rate
            out["sizes"].append(row)
    return out


def table(row: dict[str, Any]) -> harness.Table:
    """One size's figures per system: stores, their rate and latency, searches, memory."""
    rows = []
    for name, s in row["systems"].items():
        st, se, mem = s["stores"], s["searches"], s["memory"]
        rss = f"{(mem['rss_kib'] or 0) / 1024:,.0f} / {(mem['peak_rss_kib'] or 0) / 1024:,.0f}"
        latencies = [st["p50"], st["p99"], se.get("p50"), se.get("p99")]
        rows.append(
            [name, f"{st['calls']:,}", f"{st['per_second']:,.0f}"]
            + [harness.fmt_ms(t) for t in latencies]
            + [rss, s["capped"] or ""]
        )
    header = ["system", "stores", "stores/s", "store p50", "store p99", "search p50"]
    return [*header, "search p99", "RSS / peak MiB", "capped"], rows


def main(argv: Sequence[str] | None = None) -> int:
    # --inject-mismatch: every probe of this server misses
    parser = harness.parser(
        __doc__,
        inject=True,
        searches=(200, "timed searches per size"),
        cap=(600.0, "seconds per system and phase"),
    )
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 5_000, 20_000])
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE, help="npm install prefix")
    parser.add_argument("--no-peer", action="store_true", help="this server only")
    parser.add_argument(
        "--peer-command",
        nargs="+",
        metavar="ARG",
        help="start the peer with this command instead of installing it from npm",
    )
    args = parser.parse_args(argv)
    chosen = harness.options(args, "searches", "cap", "cache", "peer_command", "inject_mismatch")
    results = run(args.sizes, **chosen, with_peer=not args.no_peer, log=harness.Log(args.quiet))
    if results["peer_unavailable"]:
        print(f"peer unavailable: {results['peer_unavailable']}")
    for row in results["sizes"]:
        missed = [
            f"{name} did not find {', '.join(s['agreement']['missed'])}"
            for name, s in row["systems"].items()
            if s["agreement"]["missed"]
        ]
        n = f"N={row['records']:>6,}"
        if not harness.check(missed, f"{n}: agreement: OK", failed=f"{n}: agreement: FAILED"):
            continue
        print(harness.text_table(*table(row), indent="  ", left=1))
        if "store_throughput_ratio" in row:
            print(f"  store throughput, ours / peer: {row['store_throughput_ratio']:.1f}x")
    harness.write_json(args.json, results)
    return 0 if all(row["agreement"] for row in results["sizes"]) else 1


if __name__ == "__main__":
    sys.exit(main())
