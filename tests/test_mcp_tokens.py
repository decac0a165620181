"""Per-user tokens over streamable HTTP: a real server process on a store holding tokens.

Every store is opened through :func:`open_store`, so that another backend can
run the same tests by swapping that one function.
"""

from __future__ import annotations

import http.client
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from prime_memory_folding import MemoryEngine
from prime_memory_folding.engine import tokens
from prime_memory_folding.mcp.http import http_bind_problem
from prime_memory_folding.mcp.transport import REQUEST, AccessMiddleware, RequestIdentity
from prime_memory_folding.storage import Storage, TokenRow, open_storage
from tests import pg_helpers
from tests.test_mcp_http import INITIALIZE, TIMEOUT, HttpServer

SHARED = "shared-s3cret-0123456789"
CLOCK = 1_700_000_000.0


def open_store(path: Path | str) -> Storage:
    """The store the server serves, opened for the test's own reads and writes."""
    return open_storage(path)


class Client:
    """One MCP session over HTTP, as one token holder."""

    def __init__(self, server: HttpServer, secret: str | None, project: str | None = None):
        self.server = server
        self.headers = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
        }
        if secret is not None:
            self.headers["Authorization"] = f"Bearer {secret}"
        if project is not None:
            self.headers["X-Prime-Memory-Project"] = project
        self.next_id = 1

    def post(self, body: str) -> tuple[int, dict[str, str], str]:
        conn = http.client.HTTPConnection("127.0.0.1", self.server.port, timeout=TIMEOUT)
        try:
            conn.request("POST", "/mcp", body=body, headers=self.headers)
            response = conn.getresponse()
            headers = {name.lower(): value for name, value in response.getheaders()}
            return response.status, headers, response.read().decode(errors="replace")
        finally:
            conn.close()

    def open(self) -> Client:
        status, headers, body = self.post(INITIALIZE)
        assert status == 200, body
        self.headers["Mcp-Session-Id"] = headers["mcp-session-id"]
        self.headers["MCP-Protocol-Version"] = "2025-11-25"
        status, _, body = self.post(
            json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"})
        )
        assert status == 202, body
        return self

    def call(self, tool: str, **arguments: Any) -> tuple[int, dict[str, Any]]:
        """(HTTP status, the tool's result) for one tools/call."""
        self.next_id += 1
        request = {
            "jsonrpc": "2.0",
            "id": self.next_id,
            "method": "tools/call",
            "params": {"name": tool, "arguments": arguments},
        }
        status, headers, body = self.post(json.dumps(request))
        if status != 200:
            return status, {"body": body}
        if headers.get("content-type", "").startswith("text/event-stream"):
            messages = [
                json.loads(line[len("data:") :])
                for line in body.splitlines()
                if line.startswith("data:") and line[len("data:") :].strip()
            ]
        else:
            messages = [json.loads(body)]
        [answer] = [m for m in messages if m.get("id") == self.next_id]
        result: dict[str, Any] = answer["result"]
        return status, result


def _text(result: dict[str, Any]) -> str:
    return " ".join(part.get("text", "") for part in result.get("content", []))


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def served(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Any]]:
    """A store with records in two projects and global, four tokens, and a server on it.

    Once on each backend: a revoke must stop a token at once wherever it is kept.
    """
    path: Path | str = tmp_path_factory.mktemp("tokens") / "memory.db"
    if request.param == "postgres":
        path = pg_helpers.new_schema(request.getfixturevalue("pg_database"))
    storage = open_store(path)
    with MemoryEngine(storage=storage, scope="global", embedder="none") as memory:
        seeded = {
            scope: memory.store(f"a note in {scope}", tags=["seed"], scope=scope).record_id
            for scope in ("project:a", "project:b", "global")
        }
    storage = open_store(path)
    secrets = {
        "admin": tokens.add(storage, "admin", "*", now=CLOCK),
        "alice": tokens.add(storage, "alice", ["project:a"], now=CLOCK + 1),
        "reader": tokens.add(storage, "reader", "*", read_only=True, now=CLOCK + 2),
        "doomed": tokens.add(storage, "doomed", "*", now=CLOCK + 3),
    }
    storage.close()
    env = {k: v for k, v in os.environ.items() if k != "PRIME_MEMORY_TOKEN"}
    server = HttpServer(path, env=env)
    yield {"server": server, "path": path, "secrets": secrets, "seeded": seeded}
    server.stop()


def _scopes_seen(client: Client, **arguments: Any) -> set[str]:
    status, result = client.call("prime_memory_query", tags=["seed"], **arguments)
    assert status == 200 and not result.get("isError"), result
    return {hit["scope"] for hit in result["structuredContent"]["hits"]}


@pytest.mark.parametrize("secret", [None, "wrong", "pmf_wrong", tokens.PREFIX])
def test_a_request_without_a_live_token_gets_401(
    served: dict[str, Any], secret: str | None
) -> None:
    status, headers, body = Client(served["server"], secret).post(INITIALIZE)
    assert status == 401
    assert headers["content-type"] == "application/json"
    assert json.loads(body)["error"] == "unauthorized"


def test_a_token_revoked_while_the_server_runs_stops_at_once(served: dict[str, Any]) -> None:
    client = Client(served["server"], served["secrets"]["doomed"]).open()
    assert client.call("prime_memory_stats")[0] == 200
    storage = open_store(served["path"])
    tokens.revoke(storage, "doomed", now=CLOCK + 10)
    storage.close()
    status, result = client.call("prime_memory_stats")
    assert status == 401 and json.loads(result["body"])["error"] == "unauthorized"
    assert Client(served["server"], served["secrets"]["doomed"]).post(INITIALIZE)[0] == 401


def test_a_read_only_token_reads_but_cannot_write(served: dict[str, Any]) -> None:
    client = Client(served["server"], served["secrets"]["reader"]).open()
    assert _scopes_seen(client, scopes=["*"]) == {"project:a", "project:b", "global"}
    a_note = served["seeded"]["project:a"]
    attempts = [
        ("prime_memory_store", {"content": "not allowed", "scope": "project:a"}),
        ("prime_memory_update", {"record_id": a_note, "content": "changed"}),
        ("prime_memory_forget", {"record_id": a_note}),
        ("prime_memory_forget", {"tags": ["seed"], "confirm_count": 3}),
        ("prime_memory_fold", {"dry_run": False}),
    ]
    for tool, arguments in attempts:
        status, result = client.call(tool, **arguments)
        assert status == 200 and result["isError"], (tool, result)
        assert "read-only" in _text(result)
    with MemoryEngine(storage=open_store(served["path"]), embedder="none") as memory:
        assert memory.get(a_note).content == "a note in project:a"
        assert sorted(memory.match_ids(scopes=["*"], tags=["seed"])) == sorted(
            served["seeded"].values()
        )
        assert "not allowed" not in {
            memory.get(rid).content for rid in memory.match_ids(scopes=["*"])
        }


def test_a_token_limited_to_one_project_neither_sees_nor_writes_another(
    served: dict[str, Any],
) -> None:
    client = Client(served["server"], served["secrets"]["alice"]).open()
    assert _scopes_seen(client, scopes=["*"]) == {"project:a"}
    assert _scopes_seen(client, scopes=["project:b", "global"]) == set()
    assert _scopes_seen(client) == {"project:a"}  # its default scope, its user scope and global
    b_note = served["seeded"]["project:b"]
    attempts = [
        ("prime_memory_store", {"content": "sneaking in", "scope": "project:b"}),
        ("prime_memory_store", {"content": "into global", "scope": "global"}),
        ("prime_memory_update", {"record_id": b_note, "content": "changed"}),
        ("prime_memory_update", {"record_id": served["seeded"]["project:a"], "scope": "project:b"}),
        ("prime_memory_forget", {"record_id": b_note}),
        ("prime_memory_fold", {"dry_run": True}),
    ]
    for tool, arguments in attempts:
        status, result = client.call(tool, **arguments)
        assert status == 200 and result["isError"], (tool, result)
        if arguments.get("record_id") == b_note:
            # Another scope's record answers as a missing one (tests/test_attacks.py).
            assert f"NotFound: no record {b_note} in the store" in _text(result)
        else:
            assert "alice" in _text(result)
    status, result = client.call("prime_memory_stats")
    assert set(result["structuredContent"]["scopes"]) == {"project:a"}
    assert result["structuredContent"]["current_scope"] == "project:a"
    assert result["structuredContent"]["user_scope"] == "user:alice"
    with MemoryEngine(storage=open_store(served["path"]), embedder="none") as memory:
        assert memory.get(b_note).content == "a note in project:b"
        assert memory.get(served["seeded"]["project:a"]).scope == "project:a"
        assert memory.match_ids(scopes=["global"], tags=["seed"]) == [served["seeded"]["global"]]


def test_records_stored_through_a_token_keep_who_created_them(served: dict[str, Any]) -> None:
    client = Client(served["server"], served["secrets"]["alice"]).open()
    status, result = client.call(
        "prime_memory_store", content="alice's own note", metadata={"created_by": "mallory"}
    )
    assert status == 200 and not result.get("isError"), result
    record = result["structuredContent"]["record"]
    assert record["scope"] == "project:a"
    mine = Client(served["server"], served["secrets"]["alice"]).open()
    status, result = mine.call("prime_memory_store", content="private", scope="user:alice")
    assert not result.get("isError"), result
    admin = Client(served["server"], served["secrets"]["admin"], project="project:a").open()
    status, result = admin.call("prime_memory_store", content="alice's own note")
    assert not result.get("isError") and not result["structuredContent"]["created"]
    with MemoryEngine(storage=open_store(served["path"]), embedder="none") as memory:
        stored = memory.get(record["record_id"])
        assert stored.metadata["created_by"] == "alice"  # reinforced by admin, still alice's
        assert stored.access_count == 1


def test_the_project_header_selects_the_scope(served: dict[str, Any]) -> None:
    remote = "git@github.com:Acme/API.git"
    client = Client(served["server"], served["secrets"]["admin"], project=remote).open()
    status, result = client.call("prime_memory_store", content="the api uses postgres")
    assert status == 200 and not result.get("isError"), result
    assert result["structuredContent"]["record"]["scope"] == "project:github.com/acme/api"
    _status, result = client.call("prime_memory_stats")
    assert result["structuredContent"]["current_scope"] == "project:github.com/acme/api"
    seen = Client(served["server"], served["secrets"]["admin"], project="project:b").open()
    assert _scopes_seen(seen) == {"project:b", "global"}


def test_a_malformed_project_header_gets_400(served: dict[str, Any]) -> None:
    client = Client(served["server"], served["secrets"]["admin"], project="project:")
    status, _, body = client.post(INITIALIZE)
    assert status == 400
    assert "X-Prime-Memory-Project" in json.loads(body)["error_description"]


def test_the_shared_token_still_opens_a_store_with_user_tokens(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    storage = open_store(path)
    secret = tokens.add(storage, "alice", ["project:a"], now=CLOCK)
    storage.close()
    env = {k: v for k, v in os.environ.items() if k != "PRIME_MEMORY_TOKEN"}
    server = HttpServer(path, "--token", SHARED, env=env)
    try:
        assert Client(server, None).post(INITIALIZE)[0] == 401
        shared = Client(server, SHARED, project="project:b").open()
        _status, result = shared.call("prime_memory_store", content="by the shared token")
        assert not result.get("isError") and "created_by" not in str(result), result
        assert result["structuredContent"]["record"]["scope"] == "project:b"
        assert Client(server, secret).open().call("prime_memory_stats")[0] == 200
    finally:
        server.stop()


def test_a_store_without_tokens_serves_loopback_openly(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PRIME_MEMORY_TOKEN"}
    path = tmp_path / "memory.db"
    server = HttpServer(path, env=env)
    try:
        client = Client(server, None).open()
        assert client.call("prime_memory_stats")[0] == 200
        storage = open_store(path)
        tokens.add(storage, "alice", "*", now=CLOCK)
        storage.close()
        # The first token closes the open door at once.
        assert client.call("prime_memory_stats")[0] == 401
    finally:
        server.stop()


def test_tokens_are_stored_hashed(served: dict[str, Any]) -> None:
    storage = open_store(served["path"])
    rows = storage.tokens()
    storage.close()
    assert {row.name for row in rows} >= {"admin", "alice", "reader"}
    for row in rows:
        assert len(row.token_hash) == 64
    stored = "\n".join(
        str(row) for row in _raw_rows(served["path"])
    )  # every column of the raw table
    for name, secret in served["secrets"].items():
        assert secret not in stored and secret[len(tokens.PREFIX) :] not in stored
        assert tokens.hash_secret(secret) in stored, name


def _raw_rows(path: Path | str) -> list[tuple[Any, ...]]:
    storage = open_store(path)
    try:
        rows: list[tuple[Any, ...]] = storage.db.execute(  # type: ignore[attr-defined]
            "SELECT * FROM tokens"
        ).fetchall()
        return rows
    finally:
        storage.close()


# -- the gate in-process ----------------------------------------------------------------------


class _Tokens:
    """A TokenCheck over a fixed set of live tokens."""

    def __init__(self, live: dict[str, TokenRow]) -> None:
        self.live = live

    async def verify(self, secret: str) -> TokenRow | None:
        return self.live.get(secret)

    async def required(self) -> bool:
        return bool(self.live)


def _gate(live: dict[str, TokenRow], *, always: bool = False, shared: str | None = None) -> Any:
    """A function that sends one request through the gate: (status, identity the app saw)."""
    seen: list[RequestIdentity | None] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        seen.append(REQUEST.get())
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    gate = AccessMiddleware(app, _Tokens(live), shared, always=always)

    def request(**headers: str) -> tuple[int, RequestIdentity | None]:
        sent: list[dict[str, Any]] = []

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        async def receive() -> dict[str, Any]:
            return {"type": "http.request", "body": b""}

        scope = {
            "type": "http",
            "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()],
        }
        seen.clear()
        anyio.run(gate, scope, receive, send)
        return sent[0]["status"], (seen[0] if seen else None)

    return request


def test_the_gate_sets_who_the_request_acts_as() -> None:
    alice = TokenRow("alice", "0" * 64, ("project:*", "user:alice"), False, CLOCK)
    request = _gate({"pmf_a": alice}, shared=SHARED)
    assert request(Authorization="Bearer pmf_a") == (200, RequestIdentity(alice, None))
    status, identity = request(
        Authorization=f"bearer {SHARED}", **{"X-Prime-Memory-Project": "git@github.com:A/b.git"}
    )
    assert (status, identity) == (200, RequestIdentity(None, "project:github.com/a/b"))
    assert request(Authorization="Bearer pmf_b")[0] == 401
    assert request()[0] == 401
    assert REQUEST.get() is None  # nothing leaks out of a request


def test_beyond_loopback_the_gate_stays_shut_when_every_token_is_revoked() -> None:
    assert _gate({})()[0] == 200  # loopback, no token anywhere: open, as before
    assert _gate({}, always=True)()[0] == 401
    assert http_bind_problem("0.0.0.0", None, store_tokens=True) is None
    assert http_bind_problem("0.0.0.0", None, store_tokens=False) is not None
