"""What the benchmark scripts share besides their harness (``_harness``).

Importing this module makes ``prime_memory_folding`` importable from a plain
checkout: when the package is not installed, the repository root is put first
on ``sys.path``. It also holds the seeded synthetic data generator, a clock
the scripts set by hand, a progress line, a lean stdio MCP client and scratch
PostgreSQL databases.
"""

from __future__ import annotations

import bisect
import contextlib
import importlib.util
import itertools
import json
import queue
import random
import secrets
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO, TypeVar
from urllib.parse import quote, urlsplit, urlunsplit

if TYPE_CHECKING:
    from prime_memory_folding import MemoryEngine, RankingSettings, Record

REPO_ROOT = Path(__file__).resolve().parents[1]
T = TypeVar("T")

if importlib.util.find_spec("prime_memory_folding") is None:
    sys.path.insert(0, str(REPO_ROOT))

DOMAINS = tuple(f"domain{i:02d}" for i in range(10))
SUBDOMAINS = ("notes", "code", "decisions", "incidents")
TAGS = tuple(f"tag{rank:03d}" for rank in range(200))
#: Zipf exponent of the tag distribution: tag000 is the most common.
ZIPF_S = 1.0
#: Domains are mildly skewed too, so domain gates select 5-20 % of the records.
DOMAIN_WEIGHTS = tuple(1.0 / (1 + 0.25 * i) for i in range(len(DOMAINS)))


@dataclass(frozen=True, slots=True)
class Synthetic:
    """One generated record, before it is stored."""

    content: str
    domain: str
    subdomain: str
    tags: tuple[str, ...]
    importance: float

    def as_item(self) -> dict[str, Any]:
        """The mapping ``MemoryEngine.store_many`` takes."""
        return {
            "content": self.content,
            "domain": self.domain,
            "subdomain": self.subdomain,
            "tags": self.tags,
            "importance": self.importance,
        }


#: The parts of text ranking added after the time prior (query weights, the
#: question rule, lexical feedback, context candidates), each set as 0 turns it off.
LATER_PARTS_OFF: dict[str, float] = {
    "query_idf": 0.0,
    "ask_penalty": 0.0,
    "lend_weight": 0.0,
    "context_pool": 0,
}


def later_parts_off(settings: RankingSettings | None = None) -> RankingSettings:
    """``settings`` (the defaults when None) with the parts added after the time prior
    off (:data:`LATER_PARTS_OFF`): how text queries ranked before them."""
    from prime_memory_folding import RankingSettings

    return (settings or RankingSettings()).but(**LATER_PARTS_OFF)


def generate(count: int, seed: int) -> list[Synthetic]:
    """``count`` records, the same ones for the same seed.

    Each record has one of 10 domains, one of 4 subdomains and 1 to 5 distinct
    tags drawn from 200 with Zipf-like weights, so a few tags are very common
    and most are rare. Contents are unique, so no record reinforces another.
    """
    rng = random.Random(seed)
    tag_cum = list(itertools.accumulate(1.0 / (rank + 1) ** ZIPF_S for rank in range(len(TAGS))))
    domain_cum = list(itertools.accumulate(DOMAIN_WEIGHTS))
    total = tag_cum[-1]
    records = []
    for i in range(count):
        wanted = rng.randint(1, 5)
        tags: set[str] = set()
        while len(tags) < wanted:
            tags.add(TAGS[bisect.bisect(tag_cum, rng.random() * total)])
        domain = DOMAINS[bisect.bisect(domain_cum, rng.random() * domain_cum[-1])]
        records.append(
            Synthetic(
                content=f"synthetic memory {i} (seed {seed}) about {min(tags)} in {domain}",
                domain=domain,
                subdomain=SUBDOMAINS[rng.randrange(len(SUBDOMAINS))],
                tags=tuple(sorted(tags)),
                importance=round(rng.random(), 3),
            )
        )
    return records


class Clock:
    """A clock that stands where it is set: ``MemoryEngine(..., clock=Clock(t))``."""

    def __init__(self, now: float = 0.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@dataclass
class Progress:
    """A one-line progress counter on stderr, shown only for large jobs."""

    label: str
    total: int
    enabled: bool = True
    stream: TextIO = field(default_factory=lambda: sys.stderr)
    _started: float = field(default_factory=time.perf_counter)

    def update(self, done: int) -> None:
        if not self.enabled:
            return
        elapsed = time.perf_counter() - self._started
        rate = done / elapsed if elapsed > 0 else 0.0
        end = "\n" if done >= self.total else ""
        self.stream.write(
            f"\r{self.label}: {done:,}/{self.total:,} ({rate:,.0f}/s, {elapsed:.1f} s){end}"
        )
        self.stream.flush()


def memory_kib(pid: int | str = "self") -> dict[str, int | None]:
    """A process's resident memory and its peak (``VmRSS``, ``VmHWM``) in KiB, from
    Linux's ``/proc``; None where unknown. The peak starts afresh when a program is
    executed (``ru_maxrss`` keeps the peak of the process that forked it)."""
    keys = {"VmRSS": "rss_kib", "VmHWM": "peak_rss_kib"}
    out: dict[str, int | None] = dict.fromkeys(keys.values())
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            name, _, value = line.partition(":")
            if name in keys:
                out[keys[name]] = int(value.split()[0])
    return out


def _as_is(thing: Any) -> Any:
    return thing


def store_in_batches(
    engine: MemoryEngine,
    things: Sequence[T],
    item: Callable[[T], dict[str, Any]] = _as_is,
    *,
    label: str = "storing",
    show: bool = True,
    size: int = 10_000,
) -> list[Record]:
    """``engine.store_many`` over ``things``, each made an item by ``item``, in batches of
    ``size``, with a progress line on stderr when ``show``; the records, in order."""
    progress = Progress(label, len(things), enabled=show)
    stored: list[Record] = []
    for start in range(0, len(things), size):
        stored.extend(engine.store_many(item(thing) for thing in things[start : start + size]))
        progress.update(len(stored))
    return stored


# -- a lean MCP client -----------------------------------------------------------------

#: This package's stdio MCP server, creating the throw-away store it is given.
SERVER = [sys.executable, "-m", "prime_memory_folding.mcp.server", "--create"]
#: The ``initialize`` request's parameters.
HELLO = {
    "protocolVersion": "2025-11-25",
    "capabilities": {},
    "clientInfo": {"name": "bench", "version": "1"},
}


class LineClient:
    """A lean MCP client: JSON-RPC lines over a server's stdin and stdout.

    It writes and reads the lines itself, as a Node or Rust IDE client does, so
    it costs next to nothing beside the server's own time: it reads each reply
    in the calling thread. With ``timeout``, threads read the replies and the
    server's stderr instead, and a reply that takes longer than ``timeout``
    seconds, or a server that exits, raises :class:`RuntimeError` (with the end
    of its stderr). Starting it spawns the server and, unless told otherwise,
    completes the handshake.
    """

    def __init__(
        self,
        command: Sequence[str],
        env: Mapping[str, str] | None = None,
        *,
        timeout: float | None = None,
        handshake: bool = True,
    ) -> None:
        self.proc = subprocess.Popen(
            list(command),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL if timeout is None else subprocess.PIPE,
            env=None if env is None else dict(env),
        )
        self.timeout = timeout
        self.stderr = b""
        self._next_id = 1
        self._lines: queue.Queue[bytes] = queue.Queue()
        if timeout is not None:
            threading.Thread(target=self._pump, daemon=True).start()
            threading.Thread(target=self._drain, daemon=True).start()
        if handshake:
            self.handshake()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._lines.put(line)
        self._lines.put(b"")

    def _drain(self) -> None:
        assert self.proc.stderr is not None
        self.stderr = self.proc.stderr.read()

    def _readline(self) -> bytes:
        if self.timeout is None:
            assert self.proc.stdout is not None
            return self.proc.stdout.readline()
        try:
            return self._lines.get(timeout=self.timeout)
        except queue.Empty:
            raise RuntimeError(f"no reply in {self.timeout:.0f} s") from None

    def _write(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()

    def handshake(self) -> None:
        _, reply = self.exchange("initialize", HELLO)
        assert "protocolVersion" in reply["result"], reply
        self._write({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def exchange(self, method: str, params: dict[str, Any]) -> tuple[bytes, dict[str, Any]]:
        """Send one request; its reply line as it arrived, and parsed."""
        self._next_id += 1
        self._write({"jsonrpc": "2.0", "id": self._next_id, "method": method, "params": params})
        while True:
            line = self._readline()
            if not line:
                said = self.stderr.decode(errors="replace")[-500:]
                raise RuntimeError(f"the server exited: {said or 'it closed its stdout'}")
            reply = json.loads(line)
            if reply.get("id") == self._next_id:
                return line, dict(reply)

    def call_tool(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """The tool's result; :class:`RuntimeError` when the call fails."""
        _, reply = self.exchange("tools/call", {"name": name, "arguments": arguments})
        result = reply.get("result")
        if result is None:
            raise RuntimeError(f"{name}: protocol error {reply.get('error')}")
        if result.get("isError"):
            raise RuntimeError(f"{name}: {result['content'][0]['text']}")
        return dict(result)

    def close(self) -> int:
        """Close the server's stdin and wait for it to exit (killed after a minute); its status."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.close()
        try:
            return self.proc.wait(timeout=60)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            self.proc.stdout.close()


# -- PostgreSQL -------------------------------------------------------------------------


def with_database(url: str, name: str) -> str:
    """``url`` pointing at another database on the same server."""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, "/" + name, parts.query, parts.fragment))


@contextlib.contextmanager
def scratch_database(server_url: str, prefix: str, template: str | None = None) -> Iterator[str]:
    """A new database named ``prefix`` + a random suffix, dropped afterwards; its URL.

    With ``template`` (a database's URL on the same server, no session open on it), the
    new database is a copy of that one, its files copied between two checkpoints
    (PostgreSQL 15's ``FILE_COPY``; the default writes the copy through the WAL, whose
    checkpoint then comes while the copy is in use).
    """
    import psycopg

    name = f"{prefix}{secrets.token_hex(4)}"
    with psycopg.connect(server_url, autocommit=True) as admin:
        copy = ""
        if template:
            copy = f' TEMPLATE "{urlsplit(template).path.lstrip("/")}"'
            if admin.info.server_version >= 150000:
                copy += " STRATEGY FILE_COPY"
        admin.execute(f'CREATE DATABASE "{name}"{copy}')
    try:
        yield with_database(server_url, name)
    finally:
        try:
            with psycopg.connect(server_url, autocommit=True) as admin:
                admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        except psycopg.Error as exc:
            print(f"could not drop the database {name}: {exc}", file=sys.stderr)


def new_schema(database_url: str) -> str:
    """A new empty schema in the database; a store URL whose search path starts with it."""
    import psycopg

    schema = f"s_{secrets.token_hex(6)}"
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    joiner = "&" if urlsplit(database_url).query else "?"
    return f"{database_url}{joiner}options={quote(f'-csearch_path={schema}')}"
