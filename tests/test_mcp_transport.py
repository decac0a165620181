"""The stdio framing layer without a process: line reading and line classification.

The real server is driven through these in tests/test_mcp_stdio.py and
tests/test_fuzz_stdio.py; here the edges are checked directly and fast.
"""

from __future__ import annotations

import io

import pytest
from mcp_types import JSONRPCError

from prime_memory_folding.mcp.transport import MAX_LINE_BYTES, classify_line, read_line


class EndlessLine(io.RawIOBase):
    """``size`` bytes of b"x", then b"\\n" and ``after``, made as they are read."""

    def __init__(self, size: int, after: bytes) -> None:
        self.left = size
        self.tail = b"\n" + after
        self.largest_read = 0

    def readable(self) -> bool:
        return True

    def readline(self, size: int | None = -1) -> bytes:
        assert size is not None and size > 0, "the whole line was asked for at once"
        self.largest_read = max(self.largest_read, size)
        if self.left:
            n = min(size, self.left)
            self.left -= n
            return b"x" * n
        line, newline, self.tail = self.tail.partition(b"\n")
        return line + newline


@pytest.mark.parametrize(
    ("data", "lines"),
    [
        (b"a\nb\n", [b"a\n", b"b\n", b""]),
        (b"no newline at the end", [b"no newline at the end", b""]),
        (b"\n\n", [b"\n", b"\n", b""]),
        (b"", [b""]),
    ],
)
def test_lines_within_the_cap_come_back_whole(data: bytes, lines: list[bytes]) -> None:
    stream = io.BytesIO(data)
    assert [read_line(stream) for _ in lines] == lines


@pytest.mark.parametrize(("length", "kept"), [(10, True), (11, False), (50, False)])
def test_the_cap_counts_the_bytes_before_the_newline(length: int, kept: bool) -> None:
    stream = io.BytesIO(b"y" * length + b"\nnext\n")
    assert read_line(stream, limit=10) == (b"y" * length + b"\n" if kept else None)
    assert read_line(stream, limit=10) == b"next\n"


def test_an_over_long_last_line_without_a_newline_is_dropped() -> None:
    stream = io.BytesIO(b"z" * 11)
    assert read_line(stream, limit=10) is None
    assert read_line(stream, limit=10) == b""


def test_a_gigabyte_line_is_skipped_in_bounded_reads() -> None:
    stream = EndlessLine(2**30, after=b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n')
    assert read_line(stream) is None
    assert stream.left == 0
    assert stream.largest_read == MAX_LINE_BYTES + 1
    assert read_line(stream) == b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n'


@pytest.mark.parametrize("line", [b"", b"\n", b"\r\n", b" \t \r\n"])
def test_a_blank_line_gets_no_answer(line: bytes) -> None:
    assert classify_line(line) is None


@pytest.mark.parametrize("line", [b"\x0b\n", b"\x0c\n", b"\xc2\xa0\n", b"\x00\n"])
def test_other_invisible_lines_are_parse_errors(line: bytes) -> None:
    answer = classify_line(line)
    assert isinstance(answer, JSONRPCError)
    assert answer.error.code == -32700
    assert answer.id is None


def test_null_params_read_as_no_params() -> None:
    notification = classify_line(
        b'{"jsonrpc":"2.0","method":"notifications/initialized","params":null}'
    )
    assert notification is not None and not isinstance(notification, JSONRPCError)
    assert notification.message.method == "notifications/initialized"  # type: ignore[union-attr]
    request = classify_line(b'{"jsonrpc":"2.0","id":7,"method":"ping","params":null}')
    assert request is not None and not isinstance(request, JSONRPCError)
    assert request.message.id == 7  # type: ignore[union-attr]


@pytest.mark.parametrize("params", [b"0", b'""', b"[]", b"false", b"[1]"])
def test_params_that_are_not_an_object_are_invalid(params: bytes) -> None:
    answer = classify_line(b'{"jsonrpc":"2.0","method":"ping","params":' + params + b"}")
    assert isinstance(answer, JSONRPCError) and answer.error.code == -32600
