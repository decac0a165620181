"""Fairness: does one token's flood of maximal queries slow another user's calls?

Starts ``prime_memory_folding.mcp.server --transport streamable-http`` on
127.0.0.1 over a store of R generated memories holding two per-user tokens:
the victim's and a read-only attacker's. The victim calls one small thing
over and over, one call at a time (``--victim stats``: ``prime_memory_stats``;
``query``: a tag query of 10 hits), first alone (unloaded), then while the
attacker runs A connections, each with its own MCP session, each sending
maximal queries back to back: a text at the query limits (2,000 characters,
100 different words, the store's commonest), 32 ``any_tags``, ``limit`` 100
and a 100,000-token answer. It reports the victim's p50 and p95 both ways,
their ratio (the target: at most 3x), and what one maximal query costs alone.

Then the floor, in the same run: the same flood on a bare SDK server over
streamable HTTP (``FLOOR_SERVER``), whose victim tool answers at once and
whose attacking tool computes in Python, in a worker thread, one call at a
time (as turns per token allow), for as long as one maximal query took. No
Python MCP server can do better than that server lets its victim do; the
script prints its ratio and ours over it.

    python3 benchmarks/fairness.py                              # 10,000 memories, 32 attackers
    python3 benchmarks/fairness.py --victim query --calls 300
    python3 benchmarks/fairness.py --store postgresql://postgres@127.0.0.1/postgres

Every loop is bounded by a count and by ``--time-limit``; the script talks to
127.0.0.1 only. It exits 1 when a call fails or the time limit cut a phase short;
the ratio is a figure to report, not a check.
"""

from __future__ import annotations

import collections
import http.client
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from _shared import generate, scratch_database, store_in_batches
from http_load import HttpClient, serve_command, serve_http

from prime_memory_folding.mcp.http import SWITCH_INTERVAL_S

TARGET = 3.0


@contextmanager
def prepared_store(
    records: int, store: str | None, log: Any
) -> Iterator[tuple[str, dict[str, str], dict[str, Any]]]:
    """A store of ``records`` generated memories and two tokens: (its path or URL, the
    secrets by name, the attacker's maximal query)."""
    from prime_memory_folding import MemoryEngine
    from prime_memory_folding.core.records import MAX_TAGS
    from prime_memory_folding.core.words import STOPWORDS, WORD
    from prime_memory_folding.engine import tokens
    from prime_memory_folding.engine.reads import MAX_QUERY_CHARS, MAX_QUERY_WORDS
    from prime_memory_folding.storage import open_storage

    with ExitStack() as stack:
        folder = stack.enter_context(tempfile.TemporaryDirectory(prefix="prime-memory-fairness-"))
        target = (
            str(Path(folder) / "fairness.db")
            if store is None
            else stack.enter_context(scratch_database(store, "pmf_fairness"))
        )
        log(f"storing {records:,} memories in {'SQLite' if store is None else 'PostgreSQL'}")
        generated = generate(records, 7)
        with MemoryEngine(target, scope="global") as engine:
            store_in_batches(engine, generated, lambda s: s.as_item(), show=False)
            tag_counts = engine.stats().tags
        counts: collections.Counter[str] = collections.Counter()
        for item in generated:
            counts.update({w.lower() for w in WORD.findall(item.content)} - STOPWORDS)
        text = " ".join(w for w, _ in counts.most_common(MAX_QUERY_WORDS - 1))
        text = (text + " " + "z" * MAX_QUERY_CHARS)[:MAX_QUERY_CHARS]  # the hundredth word
        maximal = {
            "text": text,
            "any_tags": sorted(tag_counts, key=lambda t: -tag_counts[t])[:MAX_TAGS],
            "limit": 100,
            "max_tokens": 100_000,
        }
        storage = open_storage(target)
        try:
            secrets = {
                "victim": tokens.add(storage, "victim", "*"),
                "attacker": tokens.add(storage, "attacker", "*", read_only=True),
            }
        finally:
            storage.close()
        yield target, secrets, maximal


def start_server(store: str, env: dict[str, str]) -> tuple[subprocess.Popen[bytes], int]:
    """The server on 127.0.0.1 and an OS-chosen port: (its process, the port)."""
    return serve_http(store, env, ["--host", "127.0.0.1", "--port", "0"])


def timed_calls(
    client: HttpClient, tool: str, arguments: dict[str, Any], count: int, deadline: float
) -> tuple[list[float], list[str]]:
    """Seconds of up to ``count`` calls one after the other, stopping at ``deadline``."""
    seconds: list[float] = []
    errors: list[str] = []
    for n in range(count):
        if time.perf_counter() >= deadline:
            errors.append(f"{tool}: stopped after {n} of {count} calls at the time limit")
            break
        started = time.perf_counter()
        try:
            client.call(tool, arguments)
        except (RuntimeError, OSError, http.client.HTTPException) as exc:
            errors.append(f"{tool}: {exc}")
        seconds.append(time.perf_counter() - started)
    return seconds, errors


def attack_loop(
    port: int,
    secret: str,
    call: tuple[str, dict[str, Any]],
    stop: threading.Event,
    deadline: float,
    cap: int,
    out: dict[str, Any],
) -> None:
    """Calls of ``call`` (a tool and its arguments) back to back on one session until
    ``stop``, ``deadline`` or ``cap``."""
    tool, arguments = call
    done, errors = 0, []
    try:
        client = HttpClient(port, secret)
    except (RuntimeError, OSError, http.client.HTTPException, AssertionError) as exc:
        out.update(done=0, errors=[f"attacker could not connect: {exc}"])
        return
    while not stop.is_set() and done < cap and time.perf_counter() < deadline:
        client.conn.timeout = max(1.0, deadline - time.perf_counter())
        try:
            client.call(tool, arguments)
        except (RuntimeError, OSError, http.client.HTTPException) as exc:
            errors.append(str(exc))
            break
        done += 1
    end(client)
    out.update(done=done, errors=errors)


def end(client: HttpClient) -> None:
    """End the client's MCP session (so that it does not count against its token) and close."""
    try:
        client.conn.request("DELETE", "/mcp", headers=client.headers)
        client.conn.getresponse().read()
    except (OSError, http.client.HTTPException):
        pass
    client.conn.close()


def quantiles(seconds: Sequence[float]) -> dict[str, float]:
    import _harness as harness

    return {
        "p50_ms": harness.percentile(seconds, 0.50) * 1e3,
        "p95_ms": harness.percentile(seconds, 0.95) * 1e3,
    }


#: A bare SDK server over streamable HTTP, for the floor: ``ping`` answers at
#: once; ``busy`` computes in Python for ``ms`` milliseconds in a worker thread,
#: one call at a time (as the server's turns per token allow an attacker). It
#: sets Python's switch interval as the engine's HTTP server does.
FLOOR_SERVER = """
import socket, sys, time
import anyio, uvicorn
from mcp.server.mcpserver import MCPServer
from pydantic import BaseModel

server = MCPServer("floor", log_level="WARNING")
turn = anyio.Lock()
sys.setswitchinterval(float(sys.argv[1]))  # as the engine's HTTP server sets it

class Done(BaseModel):
    loops: int

@server.tool()
async def ping() -> Done:
    \"\"\"Answer at once.\"\"\"
    return Done(loops=0)

def burn(ms: float) -> int:
    end, loops = time.perf_counter() + ms / 1000, 0
    while time.perf_counter() < end:
        loops += 1
    return loops

@server.tool()
async def busy(ms: float) -> Done:
    \"\"\"Compute for ms milliseconds.\"\"\"
    async with turn:
        return Done(loops=await anyio.to_thread.run_sync(burn, ms))

# IPPROTO_TCP, so that asyncio turns Nagle off, as the engine's server does.
sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
sock.bind(("127.0.0.1", 0))
sock.listen(128)
port = sock.getsockname()[1]
config = uvicorn.Config(server.streamable_http_app(), log_level="warning")
print(f"serving streamable HTTP on http://127.0.0.1:{port}/mcp", file=sys.stderr, flush=True)
uvicorn.Server(config).run(sockets=[sock])
"""


@contextmanager
def serving(started: tuple[subprocess.Popen[bytes], int]) -> Iterator[int]:
    """The port of a server started as :func:`serve_command` starts one; stopped after."""
    proc, port = started
    try:
        yield port
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def flood(
    port: int,
    secrets: tuple[str, str],
    victim: tuple[str, dict[str, Any]],
    attack: tuple[str, dict[str, Any]],
    calls: int,
    attackers: int,
    deadline: float,
    log: Any,
) -> dict[str, Any]:
    """The victim's calls alone and under ``attackers`` connections of ``attack``."""
    victim_secret, attacker_secret = secrets
    tool, arguments = victim
    # The victim's connection opens now: the server closes one idle for 5 s.
    client = HttpClient(port, victim_secret)
    timed_calls(client, tool, arguments, 20, deadline)
    log(f"victim alone: {calls} calls")
    unloaded, errors = timed_calls(client, tool, arguments, calls, deadline)
    log(f"victim under {attackers} attacking connections: {calls} calls")
    stop = threading.Event()
    outs: list[dict[str, Any]] = [{} for _ in range(attackers)]
    threads = [
        threading.Thread(
            target=attack_loop,
            args=(port, attacker_secret, attack, stop, deadline, 100_000, outs[i]),
            daemon=True,
        )
        for i in range(attackers)
    ]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    # Let every attacker reach its first call before the victim starts timing.
    while time.perf_counter() - started < 2.0 and time.perf_counter() < deadline:
        time.sleep(0.05)
    loaded, more = timed_calls(client, tool, arguments, calls, deadline)
    errors += more
    stop.set()
    for thread in threads:
        thread.join(timeout=max(1.0, deadline - time.perf_counter()) + 60)
    attack_seconds = time.perf_counter() - started  # the attackers' whole run
    end(client)
    attacked = sum(out.get("done", 0) for out in outs)
    errors += [f"attacker: {e}" for out in outs for e in out.get("errors", ["died"])]
    unloaded_q, loaded_q = quantiles(unloaded), quantiles(loaded)
    return {
        "unloaded": unloaded_q,
        "loaded": loaded_q,
        "ratio_p95": loaded_q["p95_ms"] / unloaded_q["p95_ms"],
        "attacks": attacked,
        "attacks_per_s": attacked / attack_seconds if attack_seconds else 0.0,
        "errors": errors,
        "complete": len(loaded) == calls,
    }


def run(
    records: int,
    attackers: int,
    calls: int,
    victim: str,
    store: str | None,
    time_limit: float,
    log: Any,
) -> dict[str, Any]:
    tool, arguments = (
        ("prime_memory_stats", {})
        if victim == "stats"
        else ("prime_memory_query", {"tags": ["tag000"], "limit": 10})
    )
    env = {**os.environ}
    env.pop("PRIME_MEMORY_TOKEN", None)
    deadline = time.perf_counter() + time_limit
    with (
        prepared_store(records, store, log) as (target, secrets, maximal),
        serving(start_server(target, env)) as port,
    ):
        log("warming up, and timing maximal queries alone")
        probe = HttpClient(port, secrets["attacker"])
        timed_calls(probe, "prime_memory_query", maximal, 3, deadline)
        alone, errors = timed_calls(probe, "prime_memory_query", maximal, 10, deadline)
        end(probe)
        ours = flood(
            port,
            (secrets["victim"], secrets["attacker"]),
            (tool, arguments),
            ("prime_memory_query", maximal),
            calls,
            attackers,
            deadline,
            log,
        )
    alone_q = quantiles(alone)
    log(f"the floor: a bare SDK server computing {alone_q['p50_ms']:.0f} ms a call")
    floor_server = [sys.executable, "-c", FLOOR_SERVER, str(SWITCH_INTERVAL_S)]
    with serving(serve_command(floor_server, env)) as port:
        floor = flood(
            port,
            ("floor", "floor"),
            ("ping", {}),
            ("busy", {"ms": alone_q["p50_ms"]}),
            calls,
            attackers,
            deadline,
            log,
        )
    errors += ours.pop("errors") + [f"floor: {e}" for e in floor.pop("errors")]
    return {
        "records": records,
        "backend": "sqlite" if store is None else "postgres",
        "attackers": attackers,
        "victim": tool,
        "calls": calls,
        "unloaded": ours["unloaded"],
        "loaded": ours["loaded"],
        "ratio_p95": ours["ratio_p95"],
        "target": TARGET,
        "maximal_query": alone_q,
        "attacker_queries": ours["attacks"],
        "attacker_queries_per_s": ours["attacks_per_s"],
        "floor": floor,
        "over_floor": ours["ratio_p95"] / floor["ratio_p95"],
        "errors": len(errors),
        "first_errors": errors[:5],
        "ok": not errors and ours["complete"] and floor["complete"],
    }


def main(argv: Sequence[str] | None = None) -> int:
    import _harness as harness

    parser = harness.parser(
        __doc__,
        records=(10_000, "memories in the store"),
        attackers=(32, "the attacker's connections, one MCP session each"),
        calls=(200, "the victim's calls in each phase"),
    )
    parser.add_argument("--victim", choices=["stats", "query"], default="stats")
    parser.add_argument(
        "--store",
        metavar="POSTGRES_URL",
        help="a PostgreSQL server to make a scratch database on (default: an SQLite file)",
    )
    parser.add_argument(
        "--time-limit",
        type=float,
        default=600.0,
        metavar="SECONDS",
        help="stop every loop after this long and fail (default: 600)",
    )
    args = parser.parse_args(argv)
    harness.at_least(parser, args, records=100, attackers=1, calls=20)
    if args.store is not None and not args.store.startswith(("postgresql://", "postgres://")):
        parser.error("--store takes a postgresql:// URL")
    log = harness.Log(args.quiet)
    # The attackers' threads share this process with the victim's: the victim's
    # client takes its turns at the interpreter as the servers' threads do.
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    before = harness.conditions()
    report = run(
        args.records, args.attackers, args.calls, args.victim, args.store, args.time_limit, log
    )
    report["conditions"] = {"before": before, "after": harness.conditions()}
    u, loaded, alone = report["unloaded"], report["loaded"], report["maximal_query"]
    print(harness.conditions_line(report["conditions"]["after"]))
    print(
        f"{report['records']:,} memories on {report['backend']}, victim {report['victim']}, "
        f"{report['attackers']} attacking connections ({report['attacker_queries']} maximal "
        f"queries, {report['attacker_queries_per_s']:.1f}/s)"
    )
    floor = report["floor"]
    print(f"maximal query alone: p50 {alone['p50_ms']:.1f} ms, p95 {alone['p95_ms']:.1f} ms")
    print(f"victim unloaded: p50 {u['p50_ms']:.2f} ms, p95 {u['p95_ms']:.2f} ms")
    print(f"victim loaded:   p50 {loaded['p50_ms']:.2f} ms, p95 {loaded['p95_ms']:.2f} ms")
    print(f"loaded / unloaded p95: {report['ratio_p95']:.1f}x (target {TARGET:g}x)")
    print(
        f"floor, a bare SDK server computing {alone['p50_ms']:.0f} ms a call, one at a time: "
        f"victim p95 {floor['unloaded']['p95_ms']:.2f} ms alone, "
        f"{floor['loaded']['p95_ms']:.2f} ms under attack, {floor['ratio_p95']:.1f}x "
        f"({floor['attacks_per_s']:.1f} calls/s)"
    )
    print(f"ours over the floor: {report['over_floor']:.2f}x")
    return harness.conclude(report, args.json, report["first_errors"])


if __name__ == "__main__":
    sys.exit(main())
