"""A real PostgreSQL restart under streamable-HTTP servers that keep writing.

Starts S servers (``prime_memory_folding.mcp.server --transport
streamable-http``) on one PostgreSQL store, with C clients per server storing
memories without pause. After a while it restarts the database server, keeps
writing until every client has written again, and reports:

- the calls that failed during the outage, and what they said;
- the outage as the clients saw it (first failure to first success after);
- the time from the restart's end to each client's first success (recovery);
- that every acknowledged write is in the database (none lost), and that the
  servers were never restarted.

By default it restarts a PostgreSQL cluster of its own (``initdb`` into a
temporary folder, on a free port), so that nothing else using the machine's
server notices. ``--system`` restarts the machine's service instead
(``pg_ctlcluster VERSION main restart``, else ``service postgresql restart``)
and stores in a new database on it (``--url``); every other client of that
server sees the restart too.

    python3 benchmarks/pg_restart.py                      # own cluster, fast shutdown
    python3 benchmarks/pg_restart.py --mode immediate     # a crash-like stop
    python3 benchmarks/pg_restart.py --down 5             # stopped for 5 s, then started
    python3 benchmarks/pg_restart.py --system --url postgresql://postgres@127.0.0.1:5432/postgres

Exits 1 when an acknowledged write is missing, a server died, or the clients
did not recover within ``--recovery-limit`` seconds. Not part of the test
suite: it needs the rights to run PostgreSQL's server programs.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import _harness as harness
from _shared import scratch_database
from http_load import HttpClient, start_server

PG_BIN = Path("/usr/lib/postgresql")


@dataclass
class Call:
    """One store call as a client saw it."""

    started: float
    ended: float
    ok: bool
    said: str = ""


@dataclass
class Client:
    """A client storing until told to stop; its calls and acknowledged writes."""

    name: str
    port: int
    token: str
    calls: list[Call] = field(default_factory=list)
    acknowledged: dict[str, str] = field(default_factory=dict)

    def run(self, stop: threading.Event) -> None:
        client: HttpClient | None = None
        n = 0
        while not stop.is_set():
            started = time.monotonic()
            content = f"{self.name} write {n}"
            try:
                if client is None:
                    client = HttpClient(self.port, self.token)
                reply = client.call(
                    "prime_memory_store", {"content": content, "tags": ["restart", self.name]}
                )
            except (RuntimeError, OSError, http.client.HTTPException) as exc:
                said = " ".join(str(exc).split())
                self.calls.append(Call(started, time.monotonic(), False, said))
                if not isinstance(exc, RuntimeError) and client is not None:
                    client.conn.close()  # a broken HTTP connection: open a new session
                    client = None
            else:
                self.acknowledged[str(reply["record"]["record_id"])] = content
                self.calls.append(Call(started, time.monotonic(), True))
            n += 1
        if client is not None:
            client.conn.close()


# -- the database server -------------------------------------------------------------


def _as_postgres(command: list[str]) -> list[str]:
    """Run ``command`` as the postgres user when this is root (PostgreSQL refuses root)."""
    if os.geteuid() != 0:
        return command
    return ["runuser", "-u", "postgres", "--", *command]


def _server_bin() -> Path:
    versions = sorted(
        (p for p in PG_BIN.glob("*/bin") if (p / "pg_ctl").exists()),
        key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0,
    )
    if not versions:
        raise SystemExit(f"no PostgreSQL server programs under {PG_BIN}/*/bin (pg_ctl, initdb)")
    return versions[-1]


class OwnCluster:
    """A throwaway PostgreSQL cluster on a free port, in a temporary folder."""

    def __init__(self, mode: str) -> None:
        self.bin = _server_bin()
        self.mode = mode
        self.folder = Path(tempfile.mkdtemp(prefix="pmf-pg-restart-"))
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = int(probe.getsockname()[1])
        self.data = self.folder / "data"
        if os.geteuid() == 0:
            shutil.chown(self.folder, "postgres", "postgres")
        self._pg(
            str(self.bin / "initdb"),
            "-D",
            str(self.data),
            "-U",
            "postgres",
            "--auth=trust",
            "--no-sync",
        )
        self.options = f"-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1 -c fsync=off"
        self._pg(
            str(self.bin / "pg_ctl"),
            "-D",
            str(self.data),
            "-o",
            self.options,
            "-l",
            str(self.folder / "log"),
            "-w",
            "start",
        )
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _pg(self, *command: str) -> None:
        # Output to a file, not a pipe: the server pg_ctl starts keeps it open.
        with open(self.folder / "pg_ctl.out", "ab") as out:
            subprocess.run(
                _as_postgres(list(command)),
                check=True,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                timeout=120,
            )

    def restart(self, down: float) -> None:
        ctl = [str(self.bin / "pg_ctl"), "-D", str(self.data), "-l", str(self.folder / "log")]
        if not down:
            self._pg(*ctl, "-m", self.mode, "-w", "restart")
            return
        self._pg(*ctl, "-m", self.mode, "-w", "stop")
        time.sleep(down)
        self._pg(*ctl, "-o", self.options, "-w", "start")

    def close(self) -> None:
        with contextlib.suppress(subprocess.CalledProcessError):
            self._pg(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "stop")
        shutil.rmtree(self.folder, ignore_errors=True)


class SystemService:
    """The machine's PostgreSQL service (every client of it sees the restart)."""

    def __init__(self, url: str, mode: str) -> None:
        self.url = url
        self.mode = mode

    def restart(self, down: float) -> None:
        version = _server_bin().parent.name
        if shutil.which("pg_ctlcluster"):
            steps = [["pg_ctlcluster", version, "main", "stop", "-m", self.mode]]
            steps.append(["pg_ctlcluster", version, "main", "start"])
        else:
            steps = [["service", "postgresql", "stop"], ["service", "postgresql", "start"]]
        for n, command in enumerate(steps):
            if n:
                time.sleep(down)
            subprocess.run(
                command,
                check=True,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                timeout=120,
            )

    def close(self) -> None:
        pass


def with_timeout(url: str, seconds: int) -> str:
    joiner = "&" if urlsplit(url).query else "?"
    return f"{url}{joiner}connect_timeout={quote(str(seconds))}"


# -- the run ---------------------------------------------------------------------------


def run(args: argparse.Namespace, log: Any) -> dict[str, Any]:
    cluster: OwnCluster | SystemService = (
        SystemService(args.url, args.mode) if args.system else OwnCluster(args.mode)
    )
    try:
        with scratch_database(cluster.url, "pmf_restart_") as database:
            return _measure(args, cluster, with_timeout(database, args.connect_timeout), log)
    finally:
        cluster.close()


def _measure(
    args: argparse.Namespace, cluster: OwnCluster | SystemService, url: str, log: Any
) -> dict[str, Any]:
    import psycopg

    token = secrets.token_urlsafe(16)
    env = {**os.environ, "PRIME_MEMORY_EMBEDDER": "none", "PRIME_MEMORY_SCOPE": "global"}
    env.pop("PRIME_MEMORY_TOKEN", None)
    servers = [start_server(url, token, env) for _ in range(args.servers)]
    clients = [
        Client(f"s{s}c{c}", port, token)
        for s, (_, port) in enumerate(servers)
        for c in range(args.clients)
    ]
    stop = threading.Event()
    threads = [threading.Thread(target=c.run, args=(stop,)) for c in clients]
    try:
        for thread in threads:
            thread.start()
        time.sleep(args.before)  # a benchmark: let the writers run before the restart
        log(
            f"restarting PostgreSQL ({args.mode}, down {args.down:g} s) "
            f"after {args.before:g} s of writes"
        )
        restart_started = time.monotonic()
        cluster.restart(args.down)
        restart_done = time.monotonic()
        log(f"the restart took {restart_done - restart_started:.2f} s")
        deadline = restart_done + args.recovery_limit
        while time.monotonic() < deadline and not all(
            any(call.ok and call.started >= restart_done for call in c.calls) for c in clients
        ):
            time.sleep(0.05)
        time.sleep(args.after)
    finally:
        stop.set()
        for thread in threads:
            thread.join(60)
    alive = [proc.poll() is None for proc, _ in servers]
    for proc, _ in servers:
        proc.terminate()
        proc.wait(60)

    with psycopg.connect(url) as conn:
        stored = dict(conn.execute("SELECT record_id, content FROM records").fetchall())
    acknowledged = {rid: content for c in clients for rid, content in c.acknowledged.items()}
    lost = [rid for rid, content in acknowledged.items() if stored.get(rid) != content]
    failed = [call for c in clients for call in c.calls if not call.ok]
    recovered = []
    for c in clients:
        after = [call.ended for call in c.calls if call.ok and call.started >= restart_done]
        recovered.append(after[0] - restart_done if after else None)
    first_failure = min((call.started for call in failed), default=None)
    last_failure = max((call.ended for call in failed), default=None)
    said: dict[str, int] = {}
    for call in failed:
        said[call.said[:400]] = said.get(call.said[:400], 0) + 1
    done = all(r is not None for r in recovered)
    return {
        "servers": args.servers,
        "clients": len(clients),
        "mode": args.mode,
        "down_s": args.down,
        "system": args.system,
        "calls": sum(len(c.calls) for c in clients),
        "acknowledged": len(acknowledged),
        "stored": len(stored),
        "lost": len(lost),
        "failed_calls": len(failed),
        "errors": sorted(said.items(), key=lambda kv: -kv[1]),
        "restart_s": restart_done - restart_started,
        "failures_span_s": (
            None if first_failure is None or last_failure is None else last_failure - first_failure
        ),
        "recovery_s": recovered,
        "recovery_max_s": max((r for r in recovered if r is not None), default=None),
        "servers_alive": alive,
        "ok": not lost and all(alive) and done,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = harness.parser(
        __doc__,
        servers=2,
        clients=(2, "clients per server"),
        before=(3.0, "seconds of writes first"),
        after=(2.0, "seconds of writes after recovery"),
        connect_timeout=(2, "connect_timeout in the store URL: how long a call waits (s)"),
        recovery_limit=(
            60.0,
            "fail when a client has not written again this long after the restart",
        ),
    )
    parser.add_argument(
        "--mode",
        choices=["smart", "fast", "immediate"],
        default="fast",
        help="pg_ctl's shutdown mode for the restart (default fast)",
    )
    parser.add_argument(
        "--down",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="stop the server, wait this long, start it (default 0: pg_ctl restart)",
    )
    parser.add_argument(
        "--system",
        action="store_true",
        help="restart the machine's PostgreSQL service, not a cluster of our own",
    )
    parser.add_argument(
        "--url",
        default=os.environ.get("PRIME_MEMORY_TEST_PG")
        or "postgresql://postgres@127.0.0.1:5432/postgres",
        help="with --system: the server to store on (a new database is made)",
    )
    args = parser.parse_args(argv)
    report = run(args, harness.Log(args.quiet))
    where = "the machine's service" if args.system else "a cluster of its own"
    print(
        f"{report['servers']} servers x {args.clients} clients on {where}, restart "
        f"({report['mode']}, down {report['down_s']:g} s) took {report['restart_s']:.2f} s: "
        f"{report['calls']} calls, "
        f"{report['acknowledged']} acknowledged, {report['lost']} lost, "
        f"{report['failed_calls']} failed during the outage"
    )
    if report["failures_span_s"] is not None:
        print(f"  failures over {report['failures_span_s']:.2f} s")
    for text, count in report["errors"][:5]:
        print(f"  {count} x {text}")
    recovered = ", ".join("never" if r is None else f"{r:.2f}" for r in report["recovery_s"])
    print(f"  recovery after the restart ended, per client (s): {recovered}")
    print(f"  servers still running, never restarted: {all(report['servers_alive'])}")
    return harness.conclude(report, args.json)


if __name__ == "__main__":
    sys.exit(main())
