"""The real server process over stdio: raw JSON-RPC lines in, expected frames out.

Every case also checks that the server keeps serving afterwards, and every
line the server writes to stdout must be a JSON-RPC frame.
"""

from __future__ import annotations

import json
import os
import queue
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, LATEST_HANDSHAKE_VERSION

from prime_memory_folding import MemoryEngine
from prime_memory_folding.engine.budget import count_tokens

TIMEOUT = 60  # seconds; generous, since CI machines may be busy
SERVER = [sys.executable, "-m", "prime_memory_folding.mcp.server"]
TOOLS = {
    "prime_memory_encode",
    "prime_memory_store",
    "prime_memory_query",
    "prime_memory_fold",
    "prime_memory_stats",
    "prime_memory_forget",
    "prime_memory_update",
    "prime_memory_reinforce",
}


def initialize(
    request_id: int | str = 1, version: str = LATEST_HANDSHAKE_VERSION
) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "initialize",
        "params": {
            "protocolVersion": version,
            "capabilities": {},
            "clientInfo": {"name": "pytest", "version": "1"},
        },
    }


INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def tools_call(request_id: int, name: str, arguments: Any) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }


class ServerProcess:
    """The server as a subprocess, with stdout read line by line in a thread."""

    def __init__(self, store: Path | None, env: dict[str, str] | None = None) -> None:
        store_args = [] if store is None else ["--store", str(store)]
        self.proc = subprocess.Popen(
            [*SERVER, *store_args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )
        self.frames: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.stray: list[bytes] = []
        self.stderr = b""
        self.readers = [
            threading.Thread(target=self._read_stdout, daemon=True),
            threading.Thread(target=self._read_stderr, daemon=True),
        ]
        for reader in self.readers:
            reader.start()

    def _read_stdout(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                frame = json.loads(line)
            except ValueError:
                self.stray.append(line)
                continue
            if not isinstance(frame, dict) or frame.get("jsonrpc") != "2.0":
                self.stray.append(line)
                continue
            self.frames.put(frame)
        self.frames.put(None)

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        self.stderr = self.proc.stderr.read()

    def send_raw(self, line: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + b"\n")
        self.proc.stdin.flush()

    def send(self, message: Any) -> None:
        self.send_raw(json.dumps(message).encode())

    def recv(self) -> dict[str, Any]:
        frame = self.frames.get(timeout=TIMEOUT)
        assert frame is not None, f"server exited; stderr: {self.stderr.decode(errors='replace')}"
        return frame

    def request(self, message: dict[str, Any]) -> dict[str, Any]:
        self.send(message)
        return self.recv()

    def handshake(self, version: str = LATEST_HANDSHAKE_VERSION) -> dict[str, Any]:
        reply = self.request(initialize(0, version))
        self.send(INITIALIZED)
        return reply

    def close(self) -> int:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            return self.proc.wait(timeout=TIMEOUT)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            for reader in self.readers:
                reader.join(timeout=TIMEOUT)
            for pipe in (self.proc.stdout, self.proc.stderr):
                if pipe is not None:
                    pipe.close()
            assert not self.stray, f"non-protocol output on stdout: {self.stray!r}"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    process = ServerProcess(tmp_path / "memory.db")
    yield process
    assert process.close() == 0


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """One initialized server shared by the malformed-frame cases."""
    process = ServerProcess(tmp_path_factory.mktemp("stdio") / "memory.db")
    process.handshake()
    yield process
    assert process.close() == 0


_ping_ids = iter(range(10_000, 20_000))


def assert_still_serving(process: ServerProcess) -> None:
    ping_id = next(_ping_ids)
    assert process.request({"jsonrpc": "2.0", "id": ping_id, "method": "ping"}) == {
        "jsonrpc": "2.0",
        "id": ping_id,
        "result": {},
    }


def assert_error(
    frame: dict[str, Any], request_id: int | str | None, code: int, prefix: str
) -> None:
    assert set(frame) == {"jsonrpc", "id", "error"}, frame
    assert frame["id"] == request_id
    assert frame["error"]["code"] == code
    assert frame["error"]["message"].startswith(prefix), frame


PARSE_ERROR_LINES = {
    "not-json": b"not json",
    "truncated-object": b'{"jsonrpc": "2.0", "id": 1, "method": "ping"',
    "trailing-garbage": b'{"jsonrpc": "2.0", "id": 1, "method": "ping"} x',
    "invalid-utf8": b'{"jsonrpc": "2.0", "id": 1, "method": "\xff\xfe"}',
    "lone-surrogate-bytes": b'{"jsonrpc": "2.0", "id": 1, "method": "\xed\xa0\x80"}',
    # Not JSON whitespace, so not a blank line.
    "vertical-tab": b"\x0b",
    "form-feed": b" \x0c ",
}


@pytest.mark.parametrize("line", PARSE_ERROR_LINES.values(), ids=PARSE_ERROR_LINES.keys())
def test_a_line_that_is_not_json_gets_a_parse_error(session: ServerProcess, line: bytes) -> None:
    session.send_raw(line)
    assert_error(session.recv(), None, -32700, "Parse error")
    assert_still_serving(session)


INVALID_REQUESTS: dict[str, tuple[Any, int | str | None]] = {
    "empty-array": ([], None),
    "batch": ([{"jsonrpc": "2.0", "id": 1, "method": "ping"}], None),
    "number": (42, None),
    "string": ("ping", None),
    "null": (None, None),
    "empty-object": ({}, None),
    "wrong-version": ({"jsonrpc": "1.0", "id": 5, "method": "ping"}, 5),
    "no-version": ({"id": "abc", "method": "ping"}, "abc"),
    "method-not-string": ({"jsonrpc": "2.0", "id": 6, "method": 7}, 6),
    "params-not-object": ({"jsonrpc": "2.0", "id": 7, "method": "ping", "params": [1]}, 7),
    "object-id": ({"jsonrpc": "2.0", "id": {"a": 1}, "method": "ping"}, None),
    "null-id": ({"jsonrpc": "2.0", "id": None, "method": "ping"}, None),
    "boolean-id": ({"jsonrpc": "2.0", "id": True, "method": "ping"}, None),
    "fractional-id": ({"jsonrpc": "2.0", "id": 9.5, "method": "ping"}, None),
    "neither-request-nor-response": ({"jsonrpc": "2.0", "id": 8}, 8),
}


@pytest.mark.parametrize(
    ("message", "request_id"), INVALID_REQUESTS.values(), ids=INVALID_REQUESTS.keys()
)
def test_json_that_is_not_a_request_gets_invalid_request(
    session: ServerProcess, message: Any, request_id: int | str | None
) -> None:
    session.send(message)
    assert_error(session.recv(), request_id, -32600, "Invalid Request")
    assert_still_serving(session)


def test_a_blank_line_is_ignored(session: ServerProcess) -> None:
    session.send_raw(b"")
    session.send_raw(b"   \t")
    assert_still_serving(session)


def test_an_unknown_method_is_method_not_found(session: ServerProcess) -> None:
    reply = session.request({"jsonrpc": "2.0", "id": 21, "method": "memory/teleport"})
    assert_error(reply, 21, -32601, "Method not found")
    assert_still_serving(session)


def test_an_unknown_tool_is_invalid_params(session: ServerProcess) -> None:
    reply = session.request(tools_call(22, "prime_memory_teleport", {}))
    assert_error(reply, 22, -32602, "Unknown tool: prime_memory_teleport")
    assert_still_serving(session)


def test_a_malformed_tools_call_is_invalid_params(session: ServerProcess) -> None:
    reply = session.request({"jsonrpc": "2.0", "id": 23, "method": "tools/call", "params": {}})
    assert_error(reply, 23, -32602, "")
    assert_still_serving(session)


@pytest.mark.parametrize(
    ("arguments", "says"),
    [
        ({"content": "x", "importance": "high"}, "importance: Input should be a valid number"),
        ({"content": "x", "tags": {"a": 1}}, "tags: Input should be a valid list"),
        ({"content": 5}, "content: Input should be a valid string"),
        ({}, "content: Field required"),
    ],
)
def test_wrong_argument_types_are_tool_errors(
    session: ServerProcess, arguments: dict[str, Any], says: str
) -> None:
    reply = session.request(tools_call(24, "prime_memory_store", arguments))
    assert reply["id"] == 24
    assert reply["result"]["isError"] is True
    [content] = reply["result"]["content"]
    assert says in content["text"]
    assert "Fix them and call again" in content["text"]
    assert_still_serving(session)


def test_an_engine_error_is_a_tool_error(session: ServerProcess) -> None:
    reply = session.request(tools_call(25, "prime_memory_store", {"content": "  "}))
    assert reply["result"]["isError"] is True
    assert "content is empty" in reply["result"]["content"][0]["text"]
    assert_still_serving(session)


def test_tools_call_round_trip_gives_structured_content(session: ServerProcess) -> None:
    stored = session.request(
        tools_call(26, "prime_memory_store", {"content": "hello", "tags": ["t"]})
    )
    record = stored["result"]["structuredContent"]["record"]
    assert json.loads(stored["result"]["content"][0]["text"])["record"] == record
    found = session.request(tools_call(27, "prime_memory_query", {"tags": ["t"]}))
    assert [hit["content"] for hit in found["result"]["structuredContent"]["hits"]] == ["hello"]


#: What the tool list may cost, in the package's own token estimate: a host sends
#: it to the model in every session.
TOOLS_LIST_TOKENS = 2_000


def test_the_tool_list_stays_within_its_token_budget(session: ServerProcess) -> None:
    listed = session.request({"jsonrpc": "2.0", "id": 28, "method": "tools/list"})
    tools = listed["result"]["tools"]
    assert {tool["name"] for tool in tools} == TOOLS
    assert all(tool["inputSchema"]["properties"] is not None for tool in tools)
    assert count_tokens(json.dumps(listed, separators=(",", ":"))) < TOOLS_LIST_TOKENS


def test_a_fold_sends_progress_to_a_client_that_asks(server: ServerProcess) -> None:
    server.handshake()
    call = tools_call(30, "prime_memory_fold", {})
    call["params"]["_meta"] = {"progressToken": "fold-1"}
    server.send(call)
    frames = [server.recv()]
    while "id" not in frames[-1]:
        frames.append(server.recv())
    *notes, reply = frames
    assert reply["id"] == 30 and reply["result"]["isError"] is False
    assert [n["method"] for n in notes] == ["notifications/progress"] * 6
    assert [n["params"]["progressToken"] for n in notes] == ["fold-1"] * 6
    assert [n["params"]["progress"] for n in notes] == [0, 1, 2, 3, 4, 5]
    # Without a token, the reply comes alone.
    assert "result" in server.request(tools_call(31, "prime_memory_fold", {}))
    assert_still_serving(server)


@pytest.fixture(scope="module")
def vector_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, Path]]:
    """A server over a store bound to 4-dimensional vectors."""
    path = tmp_path_factory.mktemp("vectors") / "memory.db"
    with MemoryEngine(path, embedder="none") as engine:
        engine.store("seed", vector=[1.0, 0.0, 0.0, 0.0])
    process = ServerProcess(path, env=dict(os.environ, PRIME_MEMORY_EMBEDDER="none"))
    process.handshake()
    yield process, path
    assert process.close() == 0


def dump(path: Path) -> dict[str, list[tuple[Any, ...]]]:
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        tables = [row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        return {t: sorted(db.execute(f'SELECT * FROM "{t}"').fetchall(), key=repr) for t in tables}
    finally:
        db.close()


# Standard JSON has none of these, but the server's parser reads them: NaN as nan,
# Infinity and 1e400 (too big for a double) as infinities.
NON_FINITE = ["NaN", "Infinity", "-Infinity", "1e400"]


@pytest.mark.parametrize("literal", NON_FINITE)
@pytest.mark.parametrize("tool", ["prime_memory_store", "prime_memory_query"])
def test_a_non_finite_vector_value_is_a_tool_error_naming_it(
    vector_store: tuple[ServerProcess, Path], tool: str, literal: str
) -> None:
    process, path = vector_store
    arguments: dict[str, Any] = {"vector": [1.0, 0.0, "HERE", 0.0]}
    if tool == "prime_memory_store":
        arguments["content"] = f"vector with {literal}"
    line = json.dumps(tools_call(31, tool, arguments)).encode()
    before = dump(path)
    process.send_raw(line.replace(b'"HERE"', literal.encode()))
    reply = process.recv()
    assert reply["id"] == 31
    assert reply["result"]["isError"] is True
    [content] = reply["result"]["content"]
    assert "vector[2] is" in content["text"] and "must be finite" in content["text"]
    assert dump(path) == before
    assert_still_serving(process)


# A server for each version: the latest in the default run, the older ones slow.
@pytest.mark.parametrize(
    "version",
    [
        pytest.param(v, marks=() if v == LATEST_HANDSHAKE_VERSION else pytest.mark.slow)
        for v in HANDSHAKE_PROTOCOL_VERSIONS
    ],
)
def test_handshake_for_each_protocol_version(server: ServerProcess, version: str) -> None:
    reply = server.request(initialize(1, version))
    assert reply["id"] == 1
    result = reply["result"]
    assert result["protocolVersion"] == version
    assert result["serverInfo"]["name"] == "prime-memory-folding"
    assert set(result["capabilities"]) >= {"tools", "resources", "prompts"}
    assert result["instructions"]
    server.send(INITIALIZED)
    listed = server.request({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
    tools = {tool["name"]: tool for tool in listed["result"]["tools"]}
    assert set(tools) == TOOLS
    assert all(tool["annotations"]["openWorldHint"] is False for tool in tools.values())
    called = server.request(tools_call(3, "prime_memory_stats", {}))
    assert called["result"]["isError"] is False
    assert called["result"]["structuredContent"]["records"] == 0


def test_an_unknown_protocol_version_gets_the_latest(server: ServerProcess) -> None:
    reply = server.request(initialize("init", "1999-01-01"))
    assert reply["id"] == "init"
    assert reply["result"]["protocolVersion"] == LATEST_HANDSHAKE_VERSION


def test_tools_call_before_initialize_is_refused_and_serving_goes_on(
    server: ServerProcess,
) -> None:
    reply = server.request(tools_call(1, "prime_memory_stats", {}))
    assert reply["id"] == 1
    assert reply["error"]["code"] == -32602
    assert "result" not in reply
    assert server.handshake()["result"]["protocolVersion"] == LATEST_HANDSHAKE_VERSION
    called = server.request(tools_call(2, "prime_memory_stats", {}))
    assert called["result"]["isError"] is False


def test_malformed_lines_before_initialize_are_answered(server: ServerProcess) -> None:
    server.send_raw(b"{")
    assert_error(server.recv(), None, -32700, "Parse error")
    assert server.handshake()["id"] == 0


def test_importing_the_server_writes_nothing_to_stdout() -> None:
    done = subprocess.run(
        [sys.executable, "-c", "import prime_memory_folding.mcp.server"],
        capture_output=True,
        timeout=TIMEOUT,
        check=True,
    )
    assert done.stdout == b""


def test_help_goes_to_stdout_and_exits_cleanly() -> None:
    done = subprocess.run([*SERVER, "--help"], capture_output=True, timeout=TIMEOUT, check=True)
    assert b"--store" in done.stdout


def test_the_store_comes_from_prime_memory_home(tmp_path: Path) -> None:
    process = ServerProcess(None, env=dict(os.environ, PRIME_MEMORY_HOME=str(tmp_path)))
    try:
        process.handshake()
        reply = process.request(tools_call(2, "prime_memory_stats", {}))
        stats = reply["result"]["structuredContent"]
        assert "path" not in stats and str(tmp_path) not in json.dumps(reply)  # docs/security.md
        assert (tmp_path / "memory.db").exists()
    finally:
        assert process.close() == 0


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_the_sdk_stdio_client_can_use_every_tool(tmp_path: Path, anyio_backend: str) -> None:
    params = StdioServerParameters(
        command=sys.executable,
        args=[
            "-m",
            "prime_memory_folding.mcp.server",
            "--create",
            "--store",
            str(tmp_path / "m.db"),
        ],
    )
    async with Client(params) as client:
        listed = await client.list_tools()
        assert {tool.name for tool in listed.tools} == TOOLS
        stored = await client.call_tool("prime_memory_store", {"content": "via stdio"})
        assert stored.structured_content is not None
        assert stored.structured_content["created"] is True
        found = await client.call_tool("prime_memory_query", {})
        assert found.structured_content is not None
        assert found.structured_content["count"] == 1
        encoded = await client.call_tool("prime_memory_encode", {"domain": "memory"})
        assert encoded.structured_content is not None
        folded = await client.call_tool("prime_memory_fold", {})
        assert folded.structured_content is not None
        assert folded.structured_content["dry_run"] is True
        stats = await client.call_tool("prime_memory_stats", {})
        assert stats.structured_content is not None
        assert stats.structured_content["records"] == 1
