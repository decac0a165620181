"""Attacks on the HTTP servers, as a hostile team member and as a hostile web page.

Each test here failed on the server before its fix: a web page's Host and
Origin tricks, a revoked last token that left the door open, a weak shared
token, sessions one token could hoard or another could end, and requests so
large that one client stalled the others. Servers run as real processes on
127.0.0.1 where the attack goes through the network; the rest runs in-process.
"""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from prime_memory_folding import MemoryEngine
from prime_memory_folding.core.records import MAX_TAGS
from prime_memory_folding.engine import tokens
from prime_memory_folding.engine.reads import MAX_QUERY_CHARS, MAX_QUERY_WORDS
from prime_memory_folding.errors import InvalidInput
from prime_memory_folding.mcp.http import OPEN_NOTICE, CallTurns, StoreTokenCheck, http_app
from prime_memory_folding.mcp.server import build_server
from prime_memory_folding.mcp.sessions import (
    Caller,
    OwnedSessions,
    SessionActivity,
    SessionLimits,
    caller_of,
    with_caller,
)
from prime_memory_folding.net.guard import HostRules, allowed_hosts, is_loopback
from prime_memory_folding.storage import open_storage
from tests import pg_helpers
from tests.backends import dump
from tests.conftest import FakeClock
from tests.test_mcp_http import INITIALIZE, TIMEOUT, HttpServer

SERVER = [sys.executable, "-m", "prime_memory_folding.mcp.server"]
BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
CLOCK = 1_700_000_000.0

# -- Host and Origin, exactly ------------------------------------------------------------------


@pytest.mark.parametrize("bound", ["127.0.0.1", "localhost", "::1", "127.0.0.2"])
def test_a_loopback_server_answers_to_each_loopback_name_on_its_own_port(bound: str) -> None:
    rules = HostRules.of(allowed_hosts(bound, 8765))
    for host in ("127.0.0.1:8765", "localhost:8765", "[::1]:8765", "LOCALHOST:8765"):
        assert rules.host_allowed(host), host
    assert is_loopback(bound)


@pytest.mark.parametrize(
    "host",
    [
        "127.0.0.1:8766",  # another port
        "127.0.0.1",  # no port
        "127.0.0.1:8765.evil.example",
        "localhost:8765.evil.example",
        "evil.example:8765",
        "",
        None,
    ],
)
def test_a_host_that_only_starts_like_an_allowed_one_is_refused(host: str | None) -> None:
    rules = HostRules.of(allowed_hosts("127.0.0.1", 8765))
    assert not rules.host_allowed(host)
    assert rules.refusal(host, None) == "host"


@pytest.mark.parametrize(
    "origin",
    [
        "http://localhost:1",  # a page on another local port
        "http://127.0.0.1:8766",
        "https://127.0.0.1:8765",  # another scheme
        "http://127.0.0.1:8765.evil.example",
        "http://localhost.evil.example:8765",
        "null",
        "",
    ],
)
def test_an_origin_on_another_port_or_scheme_is_refused(origin: str) -> None:
    rules = HostRules.of(allowed_hosts("127.0.0.1", 8765))
    assert rules.refusal("127.0.0.1:8765", origin) == "origin"


def test_the_servers_own_origins_pass() -> None:
    rules = HostRules.of(allowed_hosts("127.0.0.1", 8765), ["https://app.example"])
    for origin in ("http://127.0.0.1:8765", "http://LOCALHOST:8765/", "https://app.example"):
        assert rules.refusal("localhost:8765", origin) is None, origin
    assert rules.refusal("localhost:8765", None) is None  # no Origin: not a browser page


def test_a_server_bound_beyond_loopback_answers_to_its_own_address_only() -> None:
    assert allowed_hosts("192.0.2.10", 80) == ("192.0.2.10:80",)
    assert set(allowed_hosts("0.0.0.0", 80)) == {"127.0.0.1:80", "localhost:80", "[::1]:80"}
    assert not is_loopback("0.0.0.0") and not is_loopback("memory.lan")


# -- real servers --------------------------------------------------------------------------------

PROXY_HOST = "memory.example.com"


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "PRIME_MEMORY_TOKEN"}


def _store(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> str:
    """A new store on the backend the test is parametrized with."""
    if request.param == "postgres":
        url: str = pg_helpers.new_schema(request.getfixturevalue("pg_database"))
        return url
    return str(tmp_path_factory.mktemp("attacks") / "memory.db")


def _add_token(store: str, name: str, scopes: str = "*", read_only: bool = False) -> str:
    storage = open_storage(store)
    try:
        return tokens.add(storage, name, scopes, read_only=read_only, now=CLOCK)
    finally:
        storage.close()


def _revoke(store: str, name: str) -> None:
    storage = open_storage(store)
    try:
        tokens.revoke(storage, name, now=CLOCK + 1)
    finally:
        storage.close()


def exchange(
    server: HttpServer, method: str = "POST", body: str | None = INITIALIZE, **headers: str
) -> tuple[int, dict[str, str], str]:
    """One HTTP request to the server's /mcp: (status, lower-cased headers, body)."""
    sent = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        **{name.replace("_", "-"): value for name, value in headers.items()},
    }
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=TIMEOUT)
    try:
        conn.request(method, "/mcp", body=body, headers=sent)
        response = conn.getresponse()
        found = {name.lower(): value for name, value in response.getheaders()}
        return response.status, found, response.read().decode(errors="replace")
    finally:
        conn.close()


def open_session(server: HttpServer, secret: str | None) -> str:
    """A new MCP session (initialize, then initialized) as ``secret``'s holder; its id."""
    auth = {} if secret is None else {"Authorization": f"Bearer {secret}"}
    status, headers, body = exchange(server, **auth)
    assert status == 200, body
    session = headers["mcp-session-id"]
    status, _, body = exchange(
        server,
        body=json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        **auth,
        **{"Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-11-25"},
    )
    assert status == 202, body
    return session


def stats_in(server: HttpServer, session: str, secret: str | None) -> int:
    """The status of a prime_memory_stats call in ``session`` as ``secret``'s holder."""
    auth = {} if secret is None else {"Authorization": f"Bearer {secret}"}
    call = {"jsonrpc": "2.0", "id": 7, "method": "tools/call",
            "params": {"name": "prime_memory_stats", "arguments": {}}}  # fmt: skip
    status, _, _ = exchange(
        server,
        body=json.dumps(call),
        **auth,
        **{"Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-11-25"},
    )
    return status


def end_session(server: HttpServer, session: str, secret: str | None) -> int:
    auth = {} if secret is None else {"Authorization": f"Bearer {secret}"}
    status, _, _ = exchange(
        server, "DELETE", None, **auth, **{"Mcp-Session-Id": session,
                                           "MCP-Protocol-Version": "2025-11-25"}
    )  # fmt: skip
    return status


# Servers started one after another on each store: PostgreSQL's are slow; a
# revoke on PostgreSQL stopping a token at once stays in test_mcp_tokens.py.
@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.slow)])
def fresh_store(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> str:
    return _store(request, tmp_path_factory)


def test_revoking_the_only_token_keeps_the_door_shut(fresh_store: str) -> None:
    _add_token(fresh_store, "admin")
    server = HttpServer(fresh_store, "--allowed-host", PROXY_HOST, env=_env())
    try:
        assert exchange(server, Host=PROXY_HOST)[0] == 401
        _revoke(fresh_store, "admin")
        # No live token is left; a request through the proxy is still refused.
        status, _, body = exchange(server, Host=PROXY_HOST)
        assert status == 401 and json.loads(body)["error"] == "unauthorized"
    finally:
        server.stop()
    # A server started on the store since: it held a token once, so it needs one.
    server = HttpServer(fresh_store, "--allowed-host", PROXY_HOST, env=_env())
    try:
        assert exchange(server, Host=PROXY_HOST)[0] == 401
        assert exchange(server)[0] == 401
    finally:
        server.stop()


def test_a_server_that_starts_open_says_so_and_closes_when_a_token_appears(
    fresh_store: str,
) -> None:
    server = HttpServer(fresh_store, env=_env())
    try:
        assert OPEN_NOTICE.encode() + b"\n" in server.said
        session = open_session(server, None)
        assert stats_in(server, session, None) == 200
        secret = _add_token(fresh_store, "alice")
        _revoke(fresh_store, "alice")
        # Once a token was in the store, anonymous requests stay refused.
        assert stats_in(server, session, None) == 401
        assert exchange(server)[0] == 401
    finally:
        server.stop()
    assert secret


def test_require_token_refuses_to_start_open(tmp_path: Path) -> None:
    done = subprocess.run(
        [*SERVER, "--store", str(tmp_path / "m.db"), "--transport", "streamable-http",
         "--port", "0", "--require-token"],
        capture_output=True, timeout=TIMEOUT, env=_env(),
    )  # fmt: skip
    assert done.returncode == 2
    [line] = done.stderr.decode().splitlines()
    assert "refusing to serve without authentication (--require-token)" in line
    assert "prime-memory token add" in line


def test_prime_memory_serve_takes_require_token_too(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "prime_memory_folding.cli", "--store", str(tmp_path / "m.db"),
         "serve", "--transport", "http", "--port", "0", "--require-token"],
        capture_output=True, timeout=TIMEOUT, env=_env(),
    )  # fmt: skip
    assert done.returncode == 2
    [line] = done.stderr.decode().splitlines()
    assert "refusing to serve without authentication (--require-token)" in line


def test_require_token_starts_a_server_that_needs_one(tmp_path: Path) -> None:
    store = str(tmp_path / "m.db")
    secret = _add_token(store, "admin")
    server = HttpServer(store, "--require-token", env=_env())
    try:
        assert OPEN_NOTICE.encode() not in server.said
        assert exchange(server)[0] == 401
        assert exchange(server, Authorization=f"Bearer {secret}")[0] == 200
    finally:
        server.stop()


@pytest.mark.parametrize("token", [pytest.param("x", marks=pytest.mark.slow), "fifteen-chars!!"])
def test_a_short_shared_token_is_refused(tmp_path: Path, token: str) -> None:
    for argv, env in (
        (["--token", token], _env()),
        ([], {**_env(), "PRIME_MEMORY_TOKEN": token}),
    ):
        done = subprocess.run(
            [*SERVER, "--store", str(tmp_path / "m.db"), "--transport", "streamable-http",
             "--port", "0", *argv],
            capture_output=True, timeout=TIMEOUT, env=env,
        )  # fmt: skip
        assert done.returncode == 2, done.stderr
        assert f"at least 16 characters, got {len(token)}" in done.stderr.decode()


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def team(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Any]]:
    """A store with three users' tokens, and a server on it with the default limits."""
    store = _store(request, tmp_path_factory)
    secrets = {
        "admin": _add_token(store, "admin"),
        "bob": _add_token(store, "bob", "project:b"),
        "reader": _add_token(store, "reader", read_only=True),
    }
    server = HttpServer(store, "--allowed-host", PROXY_HOST, env=_env())
    yield {"server": server, "secrets": secrets}
    server.stop()


def test_one_token_cannot_lock_the_others_out_with_sessions(team: dict[str, Any]) -> None:
    server, secrets = team["server"], team["secrets"]
    cap = SessionLimits().per_caller
    held = [open_session(server, secrets["reader"]) for _ in range(cap)]
    status, headers, body = exchange(server, Authorization=f"Bearer {secrets['reader']}")
    assert status == 429, body
    message = json.loads(body)["error"]["message"]
    assert f"token 'reader' already holds {cap} open MCP sessions" in message
    assert "mcp-session-id" not in headers
    # Everyone else still gets in, and the reader's sessions still work.
    other = open_session(server, secrets["admin"])
    assert stats_in(server, held[0], secrets["reader"]) == 200
    # Ending one makes room for one more.
    assert end_session(server, held.pop(), secrets["reader"]) == 200
    held.append(open_session(server, secrets["reader"]))
    for session in held:
        assert end_session(server, session, secrets["reader"]) == 200
    assert end_session(server, other, secrets["admin"]) == 200


def test_a_session_answers_only_the_token_that_opened_it(team: dict[str, Any]) -> None:
    server, secrets = team["server"], team["secrets"]
    admins = open_session(server, secrets["admin"])
    bob = {"Authorization": f"Bearer {secrets['bob']}", "Mcp-Session-Id": admins,
           "MCP-Protocol-Version": "2025-11-25"}  # fmt: skip
    assert exchange(server, "DELETE", None, **bob)[0] == 404
    assert exchange(server, "GET", None, **bob)[0] == 404
    assert stats_in(server, admins, secrets["bob"]) == 404
    assert stats_in(server, admins, None) == 401
    # The session is the admin's still, and works.
    assert stats_in(server, admins, secrets["admin"]) == 200
    assert end_session(server, admins, secrets["admin"]) == 200
    assert stats_in(server, admins, secrets["admin"]) == 404


@pytest.mark.parametrize(
    ("header", "value", "status"),
    [
        ("Host", "127.0.0.1:{port}.evil.example", 421),
        ("Host", "localhost:{other}", 421),
        ("Host", f"{PROXY_HOST}.evil.example", 421),
        ("Origin", "http://localhost:{other}", 403),
        ("Origin", "http://127.0.0.1:{port}.evil.example", 403),
        ("Origin", "null", 403),
        ("Host", PROXY_HOST, 200),
        ("Origin", f"https://{PROXY_HOST}", 200),
        ("Origin", "http://localhost:{port}", 200),
    ],
)
def test_host_and_origin_must_match_exactly(
    team: dict[str, Any], header: str, value: str, status: int
) -> None:
    server, secrets = team["server"], team["secrets"]
    shown = value.format(port=server.port, other=server.port + 1)
    found, headers, body = exchange(
        server, Authorization=f"Bearer {secrets['admin']}", **{header: shown}
    )
    assert found == status, body
    if status == 200:
        end_session(server, headers["mcp-session-id"], secrets["admin"])


# -- idle sessions close, by the clock ---------------------------------------------------------


def test_session_activity_counts_idle_time_from_the_last_request(clock: FakeClock) -> None:
    activity = SessionActivity(idle_s=300, clock=clock)
    activity.opened("a")
    clock.advance(1_000)
    assert activity.idle() == []  # its opening request is still in flight
    activity.ended("a")
    activity.opened("b")
    activity.ended("b")
    activity.began("b")  # a GET stream held open
    clock.advance(299)
    assert activity.idle() == []
    clock.advance(1)
    assert activity.idle() == ["a"]
    activity.began("a")
    assert activity.idle() == []
    activity.ended("a")
    clock.advance(300)
    assert activity.idle() == ["a"]  # b's stream is still open
    activity.closed("a")
    assert activity.idle() == []


class AsgiClient:
    """Requests to an ASGI app in this process, as one client address."""

    def __init__(self, app: Any, address: str = "127.0.0.1") -> None:
        self.app = app
        self.address = address

    async def __call__(
        self, method: str = "POST", body: str | None = INITIALIZE, **headers: str
    ) -> tuple[int, dict[str, str], bytes]:
        sent = {
            "host": "127.0.0.1:8765",
            "content-type": "application/json",
            "accept": "application/json, text/event-stream",
            **{name.replace("_", "-").lower(): value for name, value in headers.items()},
        }
        scope = {
            "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
            "method": method, "scheme": "http", "path": "/mcp", "raw_path": b"/mcp",
            "query_string": b"", "root_path": "", "client": (self.address, 50_000),
            "server": ("127.0.0.1", 8765),
            "headers": [(k.encode(), v.encode()) for k, v in sent.items()],
        }  # fmt: skip
        answered = anyio.Event()
        delivered = False
        start: dict[str, Any] = {}
        chunks: list[bytes] = []

        async def receive() -> dict[str, Any]:
            nonlocal delivered
            if not delivered:
                delivered = True
                return {"type": "http.request", "body": (body or "").encode()}
            await answered.wait()
            return {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                start.update(message)
            elif message["type"] == "http.response.body":
                chunks.append(message.get("body", b""))
                if not message.get("more_body"):
                    answered.set()

        await self.app(scope, receive, send)
        found = {k.decode().lower(): v.decode() for k, v in start.get("headers", [])}
        return start["status"], found, b"".join(chunks)


def test_an_idle_session_closes_after_the_timeout(tmp_path: Path, clock: FakeClock) -> None:
    engine = MemoryEngine(tmp_path / "m.db", embedder="none")
    server = build_server(engine)
    limits = SessionLimits(per_caller=2, idle_s=300)
    app = http_app(server, host="127.0.0.1", port=8765, token=None, limits=limits, clock=clock)
    sessions = server.session_manager
    assert isinstance(sessions, OwnedSessions)
    request = AsgiClient(app)

    async def scenario() -> None:
        async with sessions.run():
            status, headers, _ = await request()
            assert status == 200
            first = headers["mcp-session-id"]
            clock.advance(100)
            status, headers, _ = await request()
            second = headers["mcp-session-id"]
            assert (await request())[0] == 429  # two is this client's cap
            clock.advance(100)
            # A request in the first moves its idle clock on.
            ping = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "ping"})
            in_first = {"Mcp-Session-Id": first, "MCP-Protocol-Version": "2025-11-25"}
            assert (await request(body=ping, **in_first))[0] == 200
            clock.advance(199)
            assert await sessions.reap() == []
            clock.advance(1)
            assert await sessions.reap() == [second]
            clock.advance(99)
            assert await sessions.reap() == []
            clock.advance(1)
            assert await sessions.reap() == [first]
            assert (await request(body=ping, **in_first))[0] == 404
            assert sessions.held_by("anonymous:127.0.0.1") == 0
            # A client at another address has its own allowance.
            elsewhere = AsgiClient(app, address="127.0.0.2")
            for _ in range(2):
                assert (await request())[0] == 200
                assert (await elsewhere())[0] == 200

    try:
        anyio.run(scenario)
    finally:
        engine.close()


# -- bounded requests ------------------------------------------------------------------------


def _tool_text(result: dict[str, Any]) -> str:
    return " ".join(part.get("text", "") for part in result.get("content", []))


def call_tool(
    server: HttpServer, secret: str, tool: str, **arguments: Any
) -> tuple[int, dict[str, Any]]:
    """One tools/call on the stateless protocol (no session): (status, the JSON-RPC result)."""
    request = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {
            "name": tool,
            "arguments": arguments,
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientInfo": {"name": "attacker", "version": "1"},
                "io.modelcontextprotocol/clientCapabilities": {},
            },
        },
    }
    status, _, body = exchange(
        server,
        body=json.dumps(request),
        Authorization=f"Bearer {secret}",
        **{"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": tool},
    )
    if status != 200:
        return status, {"body": body}
    frames = [line[5:] for line in body.splitlines() if line.startswith("data:")] or [body]
    answer: dict[str, Any] = json.loads(frames[-1])
    return status, answer.get("result", answer)


@pytest.mark.parametrize(
    ("arguments", "named"),
    [
        ({"text": "word " * 600_000}, "text has 3,000,000 characters, over the limit of 2,000"),
        ({"text": " ".join(f"w{i}" for i in range(101))}, "text has 101 different words"),
        ({"tags": [f"t{i}" for i in range(10_000)]}, "tags has 10,000 tags, over the limit of 32"),
        ({"any_tags": [f"t{i}" for i in range(33)]}, "any_tags has 33 tags"),
        ({"exclude_tags": [f"t{i}" for i in range(33)]}, "exclude_tags has 33 tags"),
        ({"limit": 101}, "limit"),
    ],
)
def test_an_oversized_query_is_refused_with_the_argument_and_its_limit(
    team: dict[str, Any], arguments: dict[str, Any], named: str
) -> None:
    server, secrets = team["server"], team["secrets"]
    status, result = call_tool(server, secrets["reader"], "prime_memory_query", **arguments)
    assert status == 200 and result.get("isError"), result
    assert named in _tool_text(result)


def test_an_oversized_store_is_refused_and_changes_nothing(team: dict[str, Any]) -> None:
    server, secrets = team["server"], team["secrets"]
    for arguments, named in (
        ({"content": "x" * 100_001}, "content has 100001 characters, over the limit of 100000"),
        ({"content": "a note", "tags": [f"t{i}" for i in range(33)]}, "tags has 33 tags"),
    ):
        status, result = call_tool(server, secrets["admin"], "prime_memory_store", **arguments)
        assert status == 200 and result.get("isError"), result
        assert named in _tool_text(result)
    status, result = call_tool(server, secrets["admin"], "prime_memory_stats")
    assert status == 200 and result["structuredContent"]["records"] == 0, result


def test_queries_at_the_limits_are_served(team: dict[str, Any]) -> None:
    server, secrets = team["server"], team["secrets"]
    text = " ".join(f"w{i}" for i in range(MAX_QUERY_WORDS - 1))
    text += " " + "x" * (MAX_QUERY_CHARS - len(text) - 1)  # the hundredth word
    assert len(text) == MAX_QUERY_CHARS
    tags = [f"t{i}" for i in range(MAX_TAGS)]
    status, result = call_tool(
        server, secrets["reader"], "prime_memory_query", text=text, any_tags=tags, limit=100
    )
    assert status == 200 and not result.get("isError"), result


def test_the_engine_refuses_what_mcp_refuses(backend_store: str) -> None:
    with MemoryEngine(backend_store, embedder="none") as memory:
        record = memory.store("a note", tags=["a"])
        before = dump(backend_store)
        many = [f"t{i}" for i in range(MAX_TAGS + 1)]
        cjk = "".join(chr(0x4E00 + i) for i in range(102))  # 101 pairs of characters
        refused: list[tuple[Any, str]] = [
            (lambda: memory.query("x" * (MAX_QUERY_CHARS + 1)), "text has 2,001 characters"),
            (lambda: memory.query(cjk), "text has 101 different words"),
            (lambda: memory.query(tags=many), "tags has 33 tags"),
            (lambda: memory.query(any_tags=iter(many)), "any_tags has more than 32 tags"),
            (lambda: memory.match_ids(exclude_tags=many), "exclude_tags has 33 tags"),
            (lambda: memory.store("another note", tags=many), "tags has 33 tags"),
            (lambda: memory.store_many([{"content": "b"}, {"content": "c", "tags": many}]),
             "tags has 33 tags"),
            (lambda: memory.update(record.record_id, tags=many), "tags has 33 tags"),
            (lambda: memory.retag([record.record_id], add=many), "add has 33 tags"),
            (lambda: memory.retag([record.record_id], add=many[1:]),
             f"record {record.record_id} would hold 33 tags"),
            (lambda: memory.encode("memory", tags=many), "tags has 33 tags"),
        ]  # fmt: skip
        for call, named in refused:
            with pytest.raises(InvalidInput) as caught:
                call()
            assert named in str(caught.value)
        assert dump(backend_store) == before
        assert memory.query(" ".join(["w"] * 5000)[:MAX_QUERY_CHARS]) == []
        assert memory.query(tags=many[:MAX_TAGS]) == []


# -- one caller cannot hold the engine for everyone ----------------------------------------


def _post(caller: str, body: dict[str, Any]) -> tuple[dict[str, Any], Any]:
    scope = with_caller(
        {"type": "http", "method": "POST", "headers": []}, Caller(caller, f"token {caller!r}")
    )
    sent = [json.dumps(body).encode()]

    async def receive() -> dict[str, Any]:
        if sent:
            return {"type": "http.request", "body": sent.pop(), "more_body": False}
        return {"type": "http.disconnect"}

    return scope, receive


def test_a_caller_waits_for_its_own_requests_and_no_one_else_does() -> None:
    entered: list[str] = []
    release: dict[str, anyio.Event] = {}

    async def app(scope: Any, receive: Any, send: Any) -> None:
        body = json.loads((await receive())["body"])
        name = f"{caller_of(scope).key}:{body.get('id', body.get('method'))}"  # type: ignore[union-attr]
        entered.append(name)
        release[name] = anyio.Event()
        await release[name].wait()

    turns = CallTurns(app, per_caller=1)

    async def nothing(message: Any) -> None:
        pass

    def request(caller: str, n: int) -> dict[str, Any]:
        return {"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": {}}

    async def scenario() -> None:
        async with anyio.create_task_group() as tasks:
            for n in range(1, 4):  # the attacker's three requests, then the victim's one
                tasks.start_soon(turns, *_post("attacker", request("attacker", n)), nothing)
                await anyio.wait_all_tasks_blocked()
            tasks.start_soon(turns, *_post("victim", request("victim", 1)), nothing)
            await anyio.wait_all_tasks_blocked()
            assert entered == ["attacker:1", "victim:1"]
            assert turns.waiting_or_running("attacker") == 3
            # An answer to the server and a notification from the waiting caller pass at once.
            answer = {"jsonrpc": "2.0", "id": 9, "result": {"roots": []}}
            tasks.start_soon(turns, *_post("attacker", answer), nothing)
            cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {}}
            tasks.start_soon(turns, *_post("attacker", cancel), nothing)
            await anyio.wait_all_tasks_blocked()
            assert entered[2:] == ["attacker:9", "attacker:notifications/cancelled"]
            for name in ("attacker:9", "attacker:notifications/cancelled", "victim:1"):
                release[name].set()
            release["attacker:1"].set()
            await anyio.wait_all_tasks_blocked()
            assert entered[-1] == "attacker:2"  # the next in line, in order
            release["attacker:2"].set()
            await anyio.wait_all_tasks_blocked()
            release["attacker:3"].set()
        assert turns.waiting_or_running("attacker") == 0

    anyio.run(scenario)


def test_tokens_are_checked_without_waiting_for_the_engine(tmp_path: Path) -> None:
    store = str(tmp_path / "m.db")
    secret = _add_token(store, "alice")
    check = StoreTokenCheck(store)
    with MemoryEngine(store, embedder="none") as engine:
        # As a long query does, another thread holds the engine.
        holding, done = threading.Event(), threading.Event()

        def hold() -> None:
            with engine._lock:
                holding.set()
                done.wait(TIMEOUT)

        holder = threading.Thread(target=hold)
        holder.start()
        holding.wait(TIMEOUT)
        try:

            async def ask() -> tuple[Any, bool]:
                with anyio.fail_after(TIMEOUT / 2):
                    return await check.verify(secret), await check.required()

            row, required = anyio.run(ask)
            assert row is not None and row.name == "alice" and required
        finally:
            done.set()
            holder.join()
            check.close()


@pytest.mark.slow
def test_a_flood_of_maximal_queries_leaves_another_users_calls_near_the_floor(
    tmp_path: Path,
) -> None:
    # Reads run side by side: the victim waits for no attacking query, only for its
    # turns at the interpreter, about as a bare SDK server's victim does (the floor).
    out = tmp_path / "fairness.json"
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / "fairness.py"), "--records", "1000",
         "--attackers", "8", "--calls", "40", "--time-limit", "240", "--quiet",
         "--json", str(out)],
        capture_output=True, timeout=300, env=_env(), cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout.decode() + done.stderr.decode()
    report = json.loads(out.read_text())
    assert report["attacker_queries"] > 0 and report["floor"]["attacks"] > 0
    assert report["over_floor"] < 4, report
