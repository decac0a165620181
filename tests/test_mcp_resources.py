"""MCP resource errors: what was wrong and what to do, and one log line, never a traceback."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp_types import INTERNAL_ERROR, INVALID_PARAMS

from prime_memory_folding import MemoryEngine
from prime_memory_folding.mcp.server import build_server

pytestmark = pytest.mark.anyio


@pytest.fixture
async def client(engine: MemoryEngine) -> AsyncIterator[Client]:
    async with Client(build_server(engine), mode="legacy") as connected:
        yield connected


async def read_error(client: Client, uri: str) -> MCPError:
    with pytest.raises(MCPError) as caught:
        await client.read_resource(uri)
    return caught.value


@pytest.mark.parametrize(
    ("uri", "says"),
    [
        ("memory://record/xyz", ["'xyz' is not a record id", "32 hex digits", "record_id"]),
        ("memory://record/", ["'' is not a record id", "32 hex digits"]),
        (
            f"memory://record/{'0' * 32}",
            [f"no record {'0' * 32} in the store", "forgotten", "prime_memory_query"],
        ),
        (
            f"memory://record/{'A' * 32}",
            [f"no record {'a' * 32} in the store", "prime_memory_query"],
        ),
        (
            "memory://nothing",
            ["no resource memory://nothing", "memory://stats", "memory://record/{record_id}"],
        ),
        ("memory://record/a/b", ["no resource memory://record/a/b", "memory://scope"]),
    ],
)
async def test_a_bad_uri_or_a_missing_record_says_what_was_wrong_and_what_to_do(
    client: Client, uri: str, says: list[str]
) -> None:
    error = await read_error(client, uri)
    assert error.error.code == INVALID_PARAMS
    for words in says:
        assert words in error.error.message
    assert "Error creating resource" not in error.error.message


async def test_a_failing_read_is_one_log_line_and_a_message_without_its_detail(
    client: Client,
    engine: MemoryEngine,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    stored = await client.call_tool("prime_memory_store", {"content": "kept"})
    assert stored.structured_content is not None
    record_id = stored.structured_content["record"]["record_id"]

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("disk trouble under /srv/secret/memory.db")

    monkeypatch.setattr(engine, "get", broken)
    caplog.set_level(logging.DEBUG)
    error = await read_error(client, f"memory://record/{record_id}")
    assert error.error.code == INTERNAL_ERROR
    message = error.error.message
    assert f"could not read memory://record/{record_id} (RuntimeError;" in message
    assert "log says why" in message
    assert "secret" not in message and "Error creating resource" not in message
    assert all(record.exc_info is None for record in caplog.records)
    [logged] = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert "RuntimeError" in logged.getMessage() and "\n" not in logged.getMessage()


async def test_a_record_still_reads(client: Client) -> None:
    stored = await client.call_tool("prime_memory_store", {"content": "kept"})
    assert stored.structured_content is not None
    record_id = stored.structured_content["record"]["record_id"]
    result = await client.read_resource(f"memory://record/{record_id}")
    assert '"kept"' in result.contents[0].text  # type: ignore[union-attr]
