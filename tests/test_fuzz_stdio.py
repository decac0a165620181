"""Hostile lines on the real stdio server: each request gets exactly one answer.

``test_mcp_stdio.py`` pins the exact error for each kind of bad frame; this file
throws random and extreme input at one long-lived server and checks the rules
that must hold for all of it:

- every request gets exactly one well-formed JSON-RPC answer, notifications
  and responses get none; a line that is not JSON gets exactly one parse
  error, a blank line nothing;
- the server never dies, and the next valid call works;
- nothing but JSON-RPC frames reaches stdout.

Each line is followed by a ping; everything the server writes before the ping's
answer belongs to that line.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp_types import ErrorData
from pydantic import ValidationError

from prime_memory_folding.mcp.transport import MAX_LINE_BYTES
from tests.stdio_client import StdioServer

SETTINGS = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
_probe_ids = (f"probe-{n}" for n in itertools.count())


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StdioServer]:
    process = StdioServer(
        tmp_path_factory.mktemp("fuzz") / "memory.db", env={"PRIME_MEMORY_EMBEDDER": "none"}
    )
    process.handshake()
    yield process
    assert process.close() == 0, process.stderr.decode(errors="replace")
    assert not process.stray, f"non-JSON output on stdout: {process.stray[:3]!r}"
    assert b"Traceback" not in process.stderr, process.stderr.decode(errors="replace")


def answers_to(server: StdioServer, line: bytes) -> list[Any]:
    """Send ``line``, then a ping; return every frame written before the ping's answer."""
    probe = next(_probe_ids)
    server.send_raw(line)
    server.send({"jsonrpc": "2.0", "id": probe, "method": "ping"})
    frames = []
    while True:
        frame = server.recv()
        if isinstance(frame, dict) and frame.get("id") == probe:
            assert frame.get("result") == {}, frame
            return frames
        frames.append(frame)


def assert_well_formed(frame: Any, request_id: Any = ...) -> None:
    assert isinstance(frame, dict), frame
    assert frame.get("jsonrpc") == "2.0", frame
    assert "id" in frame, frame
    assert ("result" in frame) != ("error" in frame), frame
    if "error" in frame:
        assert set(frame) == {"jsonrpc", "id", "error"}, frame
        assert isinstance(frame["error"]["code"], int), frame
        assert isinstance(frame["error"]["message"], str), frame
        assert frame["error"]["message"], frame
    if request_id is not ...:
        assert frame["id"] == request_id, frame


def one_answer(server: StdioServer, line: bytes, request_id: Any = ...) -> dict[str, Any]:
    frames = answers_to(server, line)
    assert len(frames) == 1, frames
    assert_well_formed(frames[0], request_id)
    answer: dict[str, Any] = frames[0]
    return answer


def encode(message: Any) -> bytes:
    return json.dumps(message).encode()


# -- extremes -------------------------------------------------------------------------


DEPTH = 100_000
EXTREME_LINES = {
    "nested-arrays-100k": b"[" * DEPTH + b"]" * DEPTH,
    "nested-objects-100k": b'{"a":' * DEPTH + b"1" + b"}" * DEPTH,
    "nested-params-100k": b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"a":'
    + b"[" * DEPTH
    + b"]" * DEPTH
    + b"}}",
    "unclosed-nesting-100k": b"[" * DEPTH,
    "garbage-10mb": b"x" * 10_000_000,
    "unterminated-string-10mb": b'{"jsonrpc":"2.0","id":1,"method":"' + b"a" * 10_000_000,
    "nul-bytes": b"\x00" * 64,
    "utf8-bom": b'\xef\xbb\xbf{"jsonrpc":"2.0","id":1,"method":"ping"}',
    "5000-digit-id": b'{"jsonrpc":"2.0","id":' + b"9" * 5000 + b',"method":"ping"}',
    "nan-id": b'{"jsonrpc":"2.0","id":NaN,"method":"ping"}',
    "infinite-id": b'{"jsonrpc":"2.0","id":1e400,"method":"ping"}',
}


@pytest.mark.parametrize("line", EXTREME_LINES.values(), ids=EXTREME_LINES.keys())
def test_an_extreme_line_gets_one_error_and_serving_goes_on(
    server: StdioServer, line: bytes
) -> None:
    answer = one_answer(server, line, None)
    assert answer["error"]["code"] in (-32700, -32600)


def test_a_10_mb_request_is_answered(server: StdioServer) -> None:
    line = encode({"jsonrpc": "2.0", "id": 7, "method": "ping", "params": {"x": "a" * 10**7}})
    assert one_answer(server, line, 7)["result"] == {}


def test_a_10_mb_id_is_echoed(server: StdioServer) -> None:
    big = "i" * 10**7
    assert one_answer(server, encode({"jsonrpc": "2.0", "id": big, "method": "ping"}), big)


def send_padded_ping(server: StdioServer, request_id: str, length: int) -> None:
    """Write a ping line of exactly ``length`` bytes, a megabyte at a time."""
    head = b'{"jsonrpc":"2.0","id":"%s","method":"ping","params":{"pad":"' % request_id.encode()
    tail = b'"}}'
    assert server.proc.stdin is not None
    server.proc.stdin.write(head)
    left = length - len(head) - len(tail)
    chunk = b"x" * 2**20
    while left > 0:
        server.proc.stdin.write(chunk[:left])
        left -= len(chunk)
    server.proc.stdin.write(tail + b"\n")
    server.proc.stdin.flush()


def test_a_line_at_the_length_cap_is_served(server: StdioServer) -> None:
    send_padded_ping(server, "at-cap", MAX_LINE_BYTES)
    answer = server.recv()
    assert_well_formed(answer, "at-cap")
    assert answer["result"] == {}


def test_a_line_over_the_length_cap_gets_one_error_and_is_discarded(server: StdioServer) -> None:
    send_padded_ping(server, "over-cap", MAX_LINE_BYTES + 1)
    answer = server.recv()
    assert_well_formed(answer, None)  # the line is never parsed, so its id is unknown
    assert answer["error"]["code"] == -32600
    assert "longer than 16,777,216 bytes" in answer["error"]["message"]
    assert one_answer(server, encode({"jsonrpc": "2.0", "id": "next", "method": "ping"}), "next")


def test_deeply_nested_tool_arguments_get_one_answer_and_store_nothing(
    server: StdioServer,
) -> None:
    before = server.call("prime_memory_stats", {})["structuredContent"]["records"]
    for depth in (50, 200, 900, 5000):
        arguments = encode({"content": f"nested {depth}", "metadata": {"deep": "HERE"}})
        nested = b"[" * depth + b"1" + b"]" * depth
        line = encode(
            {"jsonrpc": "2.0", "id": depth, "method": "tools/call",
             "params": {"name": "prime_memory_store", "arguments": "ARGS"}}
        ).replace(b'"ARGS"', arguments.replace(b'"HERE"', nested))  # fmt: skip
        answer = one_answer(server, line)
        # Too deep to parse at all means the id is unknown, so the error's id is null.
        assert answer["id"] in (depth, None)
        stored = "result" in answer and not answer["result"]["isError"]
        before += stored
    assert server.call("prime_memory_stats", {})["structuredContent"]["records"] == before


# -- ids of every type ------------------------------------------------------------------


USABLE_IDS = [0, -1, 7, 2**31, 2**63, -(2**63), 10**40, "", "x", "ünïcödé ✓ 🚀", "1" * 1000]
UNUSABLE_IDS = [None, True, False, 1.5, 1.0, -0.0, 1e300, {"a": 1}, [], [1], {}]


@pytest.mark.parametrize("request_id", USABLE_IDS, ids=repr)
def test_a_string_or_integer_id_is_echoed_exactly(server: StdioServer, request_id: Any) -> None:
    line = encode({"jsonrpc": "2.0", "id": request_id, "method": "ping"})
    answer = one_answer(server, line, request_id)
    assert answer["result"] == {}
    assert type(answer["id"]) is type(request_id)


@pytest.mark.parametrize("request_id", UNUSABLE_IDS, ids=repr)
def test_any_other_id_is_an_invalid_request_with_a_null_id(
    server: StdioServer, request_id: Any
) -> None:
    line = encode({"jsonrpc": "2.0", "id": request_id, "method": "ping"})
    assert one_answer(server, line, None)["error"]["code"] == -32600


# -- shapes ---------------------------------------------------------------------------------

SILENT = {
    "unknown-notification": {"jsonrpc": "2.0", "method": "teleport/now", "params": {"a": 1}},
    "notification-with-bad-params": {
        "jsonrpc": "2.0",
        "method": "notifications/cancelled",
        "params": {"requestId": {"no": "such"}},
    },
    "second-initialized": {"jsonrpc": "2.0", "method": "notifications/initialized"},
    "result-for-no-request": {"jsonrpc": "2.0", "id": 99, "result": {}},
    "error-for-no-request": {"jsonrpc": "2.0", "id": 99, "error": {"code": 1, "message": "x"}},
}


@pytest.mark.parametrize("message", SILENT.values(), ids=SILENT.keys())
def test_notifications_and_responses_get_no_answer(server: StdioServer, message: Any) -> None:
    assert answers_to(server, encode(message)) == []


NOT_RESPONSES = {
    "null-error": {"jsonrpc": "2.0", "id": 99, "error": None},
    "error-without-message": {"jsonrpc": "2.0", "id": 99, "error": {"code": 1}},
    "result-not-an-object": {"jsonrpc": "2.0", "id": 99, "result": 5},
}


@pytest.mark.parametrize("message", NOT_RESPONSES.values(), ids=NOT_RESPONSES.keys())
def test_invalid_responses_are_invalid_requests(server: StdioServer, message: Any) -> None:
    assert one_answer(server, encode(message), 99)["error"]["code"] == -32600


BATCHES = {
    "requests": [{"jsonrpc": "2.0", "id": n, "method": "ping"} for n in range(3)],
    "notifications": [{"jsonrpc": "2.0", "method": "notifications/initialized"}],
    "mixed-junk": [1, "x", None, {"jsonrpc": "2.0", "id": 4, "method": "ping"}],
    "nested": [[{"jsonrpc": "2.0", "id": 5, "method": "ping"}]],
}


@pytest.mark.parametrize("batch", BATCHES.values(), ids=BATCHES.keys())
def test_a_batch_gets_exactly_one_invalid_request(server: StdioServer, batch: Any) -> None:
    assert one_answer(server, encode(batch), None)["error"]["code"] == -32600


def test_a_second_initialize_gets_one_answer(server: StdioServer) -> None:
    line = encode({"jsonrpc": "2.0", "id": "again", "method": "initialize", "params": {}})
    one_answer(server, line, "again")


# -- random input -------------------------------------------------------------------------

# Lines are framed by b"\n", so a generated line must not contain one.
raw_lines = st.binary(min_size=1, max_size=300).map(lambda b: b.replace(b"\n", b" "))
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)
METHODS = ["ping", "tools/list", "tools/call", "resources/list", "resources/read",
           "prompts/get", "logging/setLevel", "completion/complete", "", "nope/nope"]  # fmt: skip
rpc_shaped = st.fixed_dictionaries(
    {},
    optional={
        "jsonrpc": st.sampled_from(["2.0", "1.0", 2.0, None]),
        "id": json_values,
        "method": st.sampled_from(METHODS) | json_values,
        "params": json_values,
        "result": json_values,
        "error": json_values,
    },
)


def is_notification(message: Any) -> bool:
    # "params": null reads as no params, as the SDK's message model reads it.
    return (
        isinstance(message, dict)
        and message.get("jsonrpc") == "2.0"
        and isinstance(message.get("method"), str)
        and "id" not in message
        and (message.get("params") is None or isinstance(message["params"], dict))
    )


def is_response(message: Any) -> bool:
    # MCP results are objects; an error is what the SDK's ErrorData model accepts.
    # Anything else shaped like a response is invalid, and answered -32600.
    request_id = message.get("id") if isinstance(message, dict) else None
    return (
        isinstance(message, dict)
        and message.get("jsonrpc") == "2.0"
        and "method" not in message
        and (isinstance(request_id, str) or type(request_id) is int)
        and (("result" in message) != ("error" in message))
        and (
            isinstance(message["result"], dict)
            if "result" in message
            else is_error_object(message["error"])
        )
    )


def is_error_object(error: Any) -> bool:
    try:
        ErrorData.model_validate(error)
    except ValidationError:
        return False
    return True


@SETTINGS
@given(line=raw_lines)
def test_random_bytes_get_the_answer_their_parse_calls_for(
    server: StdioServer, line: bytes
) -> None:
    frames = answers_to(server, line)
    if not line.strip(b" \t\r"):
        assert frames == []  # a blank line holds no message, so nothing to answer
        return
    try:
        value = json.loads(line.decode("utf-8"))
    except ValueError:  # not UTF-8, or not JSON
        assert len(frames) == 1, frames
        assert_well_formed(frames[0], None)
        assert frames[0]["error"]["code"] == -32700, frames
        return
    if is_notification(value) or is_response(value):
        assert frames == [], (value, frames)
    else:
        assert len(frames) == 1, (value, frames)
        assert_well_formed(frames[0])


# Query text the engine serves: not blank, no NUL.
query_texts = st.text(min_size=1, max_size=200).filter(
    lambda t: bool(t.strip()) and "\x00" not in t
)


@SETTINGS
@given(text=query_texts, data=st.data())
def test_a_request_cut_short_gets_one_parse_error_and_the_next_call_works(
    server: StdioServer, text: str, data: st.DataObject
) -> None:
    request_id = next(_probe_ids)
    arguments = {"text": text, "limit": 1}
    line = json.dumps(
        {"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
         "params": {"name": "prime_memory_query", "arguments": arguments}},
        ensure_ascii=False,
    ).encode()  # fmt: skip
    cut = data.draw(st.integers(min_value=1, max_value=len(line) - 1), label="cut")
    answer = one_answer(server, line[:cut], None)
    assert answer["error"]["code"] == -32700, answer
    whole = one_answer(server, line, request_id)
    assert whole["result"]["isError"] is False, whole


@SETTINGS
@given(value=json_values)
def test_random_json_gets_exactly_one_answer(server: StdioServer, value: Any) -> None:
    frames = answers_to(server, encode(value))
    if is_notification(value):
        assert frames == []
    else:
        assert len(frames) == 1, frames
        assert_well_formed(frames[0])


@SETTINGS
@given(message=rpc_shaped)
def test_random_json_rpc_shapes_get_one_answer_per_request(
    server: StdioServer, message: dict[str, Any]
) -> None:
    frames = answers_to(server, encode(message))
    if is_notification(message) or is_response(message):
        assert frames == [], (message, frames)
        return
    assert len(frames) == 1, (message, frames)
    request_id = message.get("id")
    usable = isinstance(request_id, str) or type(request_id) is int
    assert_well_formed(frames[0], request_id if usable else None)


def test_the_server_still_stores_and_finds_after_the_fuzzing(server: StdioServer) -> None:
    stored = server.call("prime_memory_store", {"content": "after the storm", "tags": ["calm"]})
    assert stored["isError"] is False
    found = server.call("prime_memory_query", {"tags": ["calm"]})
    assert [hit["content"] for hit in found["structuredContent"]["hits"]] == ["after the storm"]


# -- before initialize ------------------------------------------------------------------------


def test_requests_before_initialize_are_answered_and_initialize_still_works(
    tmp_path: Path,
) -> None:
    process = StdioServer(tmp_path / "m.db", env={"PRIME_MEMORY_EMBEDDER": "none"})
    try:
        for method in ("ping", "tools/list", "resources/list", "prompts/list", "nope"):
            one_answer(process, encode({"jsonrpc": "2.0", "id": method, "method": method}), method)
        for line in (b"[" * DEPTH, b"\xff\xfe", encode([1, 2]), encode({"id": 1})):
            one_answer(process, line)
        process.handshake()
        assert process.call("prime_memory_stats", {})["isError"] is False
    finally:
        assert process.close() == 0
