"""Many streamable-HTTP servers on one PostgreSQL store.

Four server processes share one store. Each gets 500 ``prime_memory_store``
calls from several MCP clients at once (the SDK's streamable-HTTP client),
with queries and one fold among them, and every server also stores the same
memories as the others at the same moment. Afterwards the tables hold exactly
one record per distinct memory, every acknowledged record is there, and the
registries are consistent, read straight from the tables. A soak of 2,000
stores, it is marked slow (``python3 -m pytest -m slow``); ``test_pg_faults.py``
keeps servers writing to one database at once in the default run.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.pg_consistency import problems, read_state
from tests.test_mcp_http import TIMEOUT, HttpServer

SERVERS = 4
STORES = 500  # distinct memories per server
CLIENTS = 4  # MCP sessions per server, calling at once
QUERY_EVERY = 10  # a query after every this many stores
SHARED_EVERY = 100  # every server stores shared memory n // SHARED_EVERY at call n


@dataclass
class Tally:
    """What the clients saw: acknowledged records, shared-memory results, errors."""

    stored: dict[str, str] = field(default_factory=dict)  # record id -> content
    shared: dict[str, list[bool]] = field(default_factory=dict)  # content -> created flags
    errors: list[str] = field(default_factory=list)
    queries: int = 0
    fold: list[str] = field(default_factory=list)


@pytest.fixture
def servers(pg_url: str) -> Iterator[list[HttpServer]]:
    env = {k: v for k, v in os.environ.items() if k != "PRIME_MEMORY_TOKEN"}
    with ThreadPoolExecutor(SERVERS) as pool:
        started = list(pool.map(lambda _: HttpServer(pg_url, env=env), range(SERVERS)))
    yield started
    for server in started:
        server.proc.terminate()  # all at once: each takes a moment to shut down
    for server in started:
        server.stop()


@asynccontextmanager
async def session(url: str) -> AsyncIterator[Any]:
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async with (
        streamable_http_client(url) as (read, write),
        ClientSession(read, write, read_timeout_seconds=TIMEOUT) as client,
    ):
        await client.initialize()
        yield client


def text_of(result: Any) -> str:
    return " ".join(getattr(part, "text", "") for part in result.content)


async def store(client: Any, tally: Tally, content: str, **labels: Any) -> dict[str, Any] | None:
    result = await client.call_tool("prime_memory_store", {"content": content, **labels})
    if result.is_error:
        tally.errors.append(f"store {content!r}: {text_of(result)}")
        return None
    created: dict[str, Any] = result.structured_content
    return created


async def shared_store(client: Any, tally: Tally, n: int) -> None:
    content = f"shared memory {n}: every server stores this at once"
    reply = await store(client, tally, content, domain="team", tags=["shared"])
    if reply is not None:
        tally.shared.setdefault(content, []).append(bool(reply["created"]))


async def drive(client: Any, server_no: int, client_no: int, tally: Tally) -> None:
    """This client's share of the server's calls: stores, queries, the fold."""
    for n in range(client_no, STORES, CLIENTS):
        if n % SHARED_EVERY == 0:
            await shared_store(client, tally, n // SHARED_EVERY + 1)
        content = f"server {server_no} call {n}: a distinct note on widget {n * 7919 % 1000}"
        reply = await store(
            client,
            tally,
            content,
            domain=f"area{n % 3}",
            subdomain=f"part{n % 7}",
            tags=[f"batch{n % 25}", f"server{server_no}"],
        )
        if reply is not None:
            tally.stored[reply["record"]["record_id"]] = content
        if n % QUERY_EVERY == 0:
            arguments: dict[str, Any] = (
                {"tags": [f"server{server_no}"], "limit": 5}
                if n % (2 * QUERY_EVERY)
                else {"text": f"distinct note widget {n % 1000}", "limit": 5}
            )
            result = await client.call_tool("prime_memory_query", arguments)
            if result.is_error:
                tally.errors.append(f"query {arguments}: {text_of(result)}")
            elif arguments.get("tags") and not result.structured_content["hits"]:
                # This client stored under that tag before: its server must see it.
                tally.errors.append(f"query {arguments} found nothing")
            tally.queries += 1
        if server_no == 0 and n == STORES // 2:
            result = await client.call_tool("prime_memory_fold", {"dry_run": False})
            tally.fold.append(text_of(result) if result.is_error else "ok")


async def run_all(servers: list[HttpServer]) -> tuple[Tally, list[dict[str, Any]]]:
    tally = Tally()
    async with AsyncExitStack() as stack:
        clients = [
            [await stack.enter_async_context(session(server.url)) for _ in range(CLIENTS)]
            for server in servers
        ]
        # Every client of every server stores one memory at the same moment.
        await asyncio.gather(*(shared_store(client, tally, 0) for row in clients for client in row))
        await asyncio.gather(
            *(
                drive(client, server_no, client_no, tally)
                for server_no, row in enumerate(clients)
                for client_no, client in enumerate(row)
            )
        )
        views = []
        for row in clients:
            result = await row[0].call_tool("prime_memory_stats", {})
            assert not result.is_error, text_of(result)
            views.append(result.structured_content)
    return tally, views


@pytest.mark.slow
def test_four_servers_store_2000_memories_on_one_database(
    pg_url: str, servers: list[HttpServer]
) -> None:
    tally, views = asyncio.run(asyncio.wait_for(run_all(servers), 4 * TIMEOUT))

    assert tally.errors == []
    assert len(tally.stored) == SERVERS * STORES  # 2,000 distinct acknowledged records
    assert tally.queries == SERVERS * STORES // QUERY_EVERY
    assert tally.fold == ["ok"], tally.fold
    # Each shared memory: stored by every server, created once, merged the other times.
    shared_calls = {0: SERVERS * CLIENTS}
    shared_calls.update({n // SHARED_EVERY + 1: SERVERS for n in range(0, STORES, SHARED_EVERY)})
    assert len(tally.shared) == len(shared_calls)
    for content, created in tally.shared.items():
        number = int(content.split(":")[0].rsplit(" ", 1)[1])
        assert len(created) == shared_calls[number], content
        assert created.count(True) == 1, content

    state = read_state(pg_url)
    for record_id, content in tally.stored.items():
        assert state.contents.get(record_id) == content
    assert sorted(state.contents.values()) == sorted([*tally.stored.values(), *tally.shared])
    assert problems(pg_url) == []
    # What each server holds of the registries is what the tables say.
    for view in views:
        for kind, labels in view["registries"].items():
            for label, prime in labels.items():
                assert state.registries[kind][label] == prime, (kind, label)
