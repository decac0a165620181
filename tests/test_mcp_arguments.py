"""An MCP tool call with an argument the tool does not take is refused, and says which it takes."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from mcp import Client
from mcp_types import TextContent

from prime_memory_folding import MemoryEngine
from prime_memory_folding.mcp.server import build_server

pytestmark = pytest.mark.anyio

#: Each tool with arguments it would otherwise accept, so that only the extra one is wrong.
CALLS = {
    "prime_memory_encode": {"domain": "project"},
    "prime_memory_store": {"content": "deploys run on fridays"},
    "prime_memory_query": {"text": "deploys"},
    "prime_memory_fold": {},
    "prime_memory_stats": {},
    "prime_memory_forget": {"domain": "project"},
    "prime_memory_update": {"record_id": "0" * 32, "content": "x"},
    "prime_memory_reinforce": {"record_ids": ["0" * 32]},
}


@pytest.fixture
async def client(engine: MemoryEngine) -> AsyncIterator[Client]:
    async with Client(build_server(engine), mode="legacy") as connected:
        yield connected


async def error_text(client: Client, tool: str, arguments: dict[str, object]) -> str:
    result = await client.call_tool(tool, arguments)
    assert result.is_error
    [content] = result.content
    assert isinstance(content, TextContent)
    return content.text


async def test_every_tool_is_covered(client: Client) -> None:
    assert sorted(tool.name for tool in (await client.list_tools()).tools) == sorted(CALLS)


@pytest.mark.parametrize("tool", sorted(CALLS))
async def test_an_unknown_argument_is_an_error_naming_it_and_the_ones_taken(
    client: Client, tool: str
) -> None:
    [listed] = [t for t in (await client.list_tools()).tools if t.name == tool]
    takes = list(listed.input_schema.get("properties", {}))
    text = await error_text(client, tool, {**CALLS[tool], "colour": "blue"})
    assert f"Unknown argument for {tool}: 'colour';" in text
    assert f"it takes {', '.join(takes) or 'no arguments'}." in text


async def test_a_misspelt_argument_suggests_the_right_name_and_stores_nothing(
    client: Client, engine: MemoryEngine
) -> None:
    text = await error_text(
        client, "prime_memory_store", {"content": "tagged", "tag": ["ops"], "scopes": "global"}
    )
    assert "'tag' (did you mean 'tags'?)" in text
    assert "'scopes' (did you mean 'scope'?)" in text
    assert "Nothing was done" in text
    assert engine.stats().records == 0


async def test_a_flood_of_unknown_arguments_is_named_in_short(client: Client) -> None:
    flood = {f"{'x' * 1000}{n}": n for n in range(500)}
    text = await error_text(client, "prime_memory_stats", flood)
    assert "and 490 more" in text
    assert len(text) < 1_500


async def test_known_arguments_still_work(client: Client) -> None:
    result = await client.call_tool("prime_memory_store", {"content": "a", "tags": ["ops"]})
    assert not result.is_error
