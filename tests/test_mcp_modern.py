"""Every tool, resource and prompt for a client pinned to the stateless 2026-07-28 protocol.

The same walk runs in-process, over stdio against the real server, and over
streamable HTTP against the real server, with the SDK's own client.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters

from prime_memory_folding import MemoryEngine
from prime_memory_folding.core.scopes import resolve
from prime_memory_folding.mcp.server import build_server
from tests.test_mcp_http import HttpServer

pytestmark = pytest.mark.anyio


MODERN = "2026-07-28"


@contextmanager
def http_server(store: Path) -> Iterator[str]:
    server = HttpServer(store, env={**os.environ})
    try:
        yield server.url
    finally:
        server.stop()


@asynccontextmanager
async def connected(transport: str, tmp_path: Path) -> AsyncIterator[Client]:
    store = tmp_path / "memory.db"
    if transport == "memory":
        with MemoryEngine(store, scope="project:x") as engine:
            server = build_server(engine, resolve("project:x", user="me"))
            async with Client(server, mode=MODERN) as client:
                yield client
    elif transport == "stdio":
        params = StdioServerParameters(
            command=sys.executable,
            args=["-m", "prime_memory_folding.mcp.server", "--store", str(store)],
            env={**os.environ},
        )
        async with Client(params, mode=MODERN) as client:
            yield client
    else:
        with http_server(store) as url:
            async with Client(url, mode=MODERN) as client:
                yield client


async def structured(client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content
    assert result.structured_content is not None
    return result.structured_content


@pytest.mark.parametrize("transport", ["memory", "stdio", "http"])
async def test_every_tool_resource_and_prompt_works_on_the_stateless_protocol(
    transport: str, tmp_path: Path
) -> None:
    async with connected(transport, tmp_path) as client:
        tools = {tool.name for tool in (await client.list_tools()).tools}
        assert tools == {
            "prime_memory_encode",
            "prime_memory_store",
            "prime_memory_query",
            "prime_memory_fold",
            "prime_memory_stats",
            "prime_memory_forget",
            "prime_memory_update",
            "prime_memory_reinforce",
        }
        encoded = await structured(client, "prime_memory_encode", domain="decision", tags=["db"])
        assert len(encoded["record_id"]) == 32
        stored = await structured(
            client, "prime_memory_store", content="we use postgres", domain="decision", tags=["db"]
        )
        record = stored["record"]
        assert stored["created"] and record["domain"] == "decision"
        hits = await structured(client, "prime_memory_query", tags=["db"])
        assert [hit["record_id"] for hit in hits["hits"]] == [record["record_id"]]
        text = await structured(client, "prime_memory_query", text="which database do we use")
        assert text["count"] == 1
        folded = await structured(client, "prime_memory_fold")
        assert folded["dry_run"] and folded["records_before"] == 1
        stats = await structured(client, "prime_memory_stats")
        assert stats["records"] == 1 and stats["current_scope"] == record["scope"]
        bad = await client.call_tool("prime_memory_store", {"content": "   "})
        assert bad.is_error

        resources = {str(r.uri) for r in (await client.list_resources()).resources}
        assert {"memory://stats", "memory://scope"} <= resources
        for uri, key in (("memory://stats", "records"), ("memory://scope", "current")):
            [content] = (await client.read_resource(uri)).contents
            assert key in json.loads(content.text)  # type: ignore[union-attr]
        [content] = (await client.read_resource(f"memory://record/{record['record_id']}")).contents
        assert json.loads(content.text)["content"] == "we use postgres"  # type: ignore[union-attr]

        prompts = {p.name for p in (await client.list_prompts()).prompts}
        assert prompts == {"recall"}
        prompt = await client.get_prompt("recall", {"topic": "databases"})
        assert "databases" in prompt.messages[0].content.text  # type: ignore[union-attr]
