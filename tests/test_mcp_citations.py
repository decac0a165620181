"""Citations, supersession and as_of through the MCP tools (the SDK's in-memory client).

The server resolves its scope from a temporary git repository; the engine's
own scope names no folder, so a citation is found only if the server passes
the project's repository on.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp_types import TextContent

from prime_memory_folding import MemoryEngine
from prime_memory_folding.core.scopes import ScopeResolution, resolve
from prime_memory_folding.mcp.server import build_server
from tests.conftest import FakeClock
from tests.git_repos import CLIENT, git, make_repo

pytestmark = pytest.mark.anyio

DAY = 86_400.0


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "project", {"src/client.py": CLIENT, "README.md": "# Project\n"})


@pytest.fixture
def project(repo: Path) -> ScopeResolution:
    return resolve(project=repo, user="tester", env={})


@pytest.fixture
def engine(store_path: Path, clock: FakeClock) -> Iterator[MemoryEngine]:
    with MemoryEngine(store_path, clock=clock, scope=resolve("global", user="tester")) as memory:
        yield memory


@pytest.fixture
async def client(engine: MemoryEngine, project: ScopeResolution) -> AsyncIterator[Client]:
    async with Client(build_server(engine, project), mode="legacy") as connected:
        yield connected


async def call(client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content
    assert result.structured_content is not None
    return dict(result.structured_content)


async def call_error(client: Client, tool: str, **arguments: Any) -> str:
    result = await client.call_tool(tool, arguments)
    assert result.is_error
    [content] = result.content
    assert isinstance(content, TextContent)
    return content.text


async def cited(client: Client) -> list[dict[str, Any]]:
    """The citations of the one hit a query finds."""
    [hit] = (await call(client, "prime_memory_query"))["hits"]
    return list(hit["citations"])


async def test_a_cited_memory_shows_its_code_moved_then_stale(
    client: Client, repo: Path, project: ScopeResolution
) -> None:
    stored = await call(
        client,
        "prime_memory_store",
        content="the client retries three times",
        cites=[{"path": "src/client.py", "lines": "10-12"}, {"path": "README.md"}],
    )
    assert stored["record"]["scope"] == project.current != "global"
    assert [c["path"] for c in stored["record"]["metadata"]["cites"]] == [
        "src/client.py",
        "README.md",
    ]
    assert "superseded" not in stored and "possibly_supersedes" not in stored
    lines, readme = await cited(client)
    assert (lines["state"], lines["lines"]) == ("verified", "10-12")
    assert readme["state"] == "verified" and "lines" not in readme

    client_py = repo / "src" / "client.py"
    client_py.write_text("new 1\nnew 2\nnew 3\n" + CLIENT)
    lines, _ = await cited(client)
    assert (lines["path"], lines["state"], lines["lines"]) == ("src/client.py", "moved", "13-15")
    assert lines["detail"]

    client_py.write_text(CLIENT.replace("line 11\n", "line eleven\n"))
    lines, _ = await cited(client)
    assert lines["state"] == "stale" and "lines" not in lines

    client_py.unlink()
    lines, _ = await cited(client)
    assert lines["state"] == "stale" and "gone" in lines["detail"]


async def test_a_file_renamed_with_git_mv_is_followed(client: Client, repo: Path) -> None:
    await call(
        client,
        "prime_memory_store",
        content="the client retries",
        cites=[{"path": "src/client.py", "lines": "5-6"}],
    )
    git(repo, "mv", "src/client.py", "src/http_client.py")
    [state] = await cited(client)
    assert (state["path"], state["state"], state["lines"]) == ("src/http_client.py", "moved", "5-6")


async def test_a_hit_that_cites_nothing_has_no_citations_field(client: Client) -> None:
    await call(client, "prime_memory_store", content="plain memory")
    [hit] = (await call(client, "prime_memory_query"))["hits"]
    assert "citations" not in hit


@pytest.mark.parametrize(
    ("cite", "fragment"),
    [
        ({"path": "../outside.py"}, "'..'"),
        ({"path": "/etc/passwd"}, "absolute"),
        ({"path": "src/link.py"}, "leaves the repository"),
        ({"path": "src/client.py", "lines": "29-31"}, "past the end"),
        ({"path": "src/missing.py"}, "not a file"),
        ({"path": "src/client.py", "lines": "1", "symbol": "x"}, "both"),
    ],
)
async def test_a_bad_citation_is_a_tool_error_and_stores_nothing(
    client: Client, engine: MemoryEngine, repo: Path, cite: dict[str, str], fragment: str
) -> None:
    outside = repo.parent / "outside.py"
    outside.write_text("secret = 1\n")
    os.symlink(outside, repo / "src" / "link.py")
    message = await call_error(
        client, "prime_memory_store", content="a memory about code", cites=[cite]
    )
    assert "InvalidInput" in message and fragment in message
    assert engine.stats().records == 0


async def test_too_many_citations_are_refused(client: Client, engine: MemoryEngine) -> None:
    message = await call_error(
        client, "prime_memory_store", content="x", cites=[{"path": "README.md"}] * 33
    )
    assert "32" in message and engine.stats().records == 0


async def test_supersedes_closes_the_older_memory_and_as_of_finds_it(
    client: Client, engine: MemoryEngine, clock: FakeClock
) -> None:
    old = await call(client, "prime_memory_store", content="The main database runs PostgreSQL 15")
    old_id = old["record"]["record_id"]
    stored_at = clock.now
    clock.advance(DAY)
    new = await call(
        client,
        "prime_memory_store",
        content="The main database runs PostgreSQL 16",
        supersedes=old_id.upper(),
    )
    new_id = new["record"]["record_id"]
    assert new["superseded"] == old_id
    clock.advance(DAY)

    now = await call(client, "prime_memory_query", text="main database PostgreSQL")
    assert [hit["record_id"] for hit in now["hits"]] == [new_id]
    then = await call(
        client, "prime_memory_query", text="main database PostgreSQL", as_of=str(stored_at + 60)
    )
    assert [hit["record_id"] for hit in then["hits"]] == [old_id]
    aged = await call(client, "prime_memory_query", as_of="36h")
    assert [hit["record_id"] for hit in aged["hits"]] == [old_id]


@pytest.mark.parametrize(
    ("supersedes", "fragment"),
    [("not-an-id", "InvalidRecordId"), ("0" * 32, "NotFound")],
)
async def test_a_bad_supersedes_is_a_tool_error_and_stores_nothing(
    client: Client, engine: MemoryEngine, supersedes: str, fragment: str
) -> None:
    await call(client, "prime_memory_store", content="Builds run on Jenkins")
    message = await call_error(
        client, "prime_memory_store", content="Builds run on Buildkite", supersedes=supersedes
    )
    assert fragment in message
    assert engine.stats().records == 1


async def test_a_bad_as_of_is_a_tool_error(client: Client) -> None:
    message = await call_error(client, "prime_memory_query", as_of="the day after never")
    assert "as_of" in message


async def test_a_restatement_is_offered_as_possibly_supersedes(
    client: Client, clock: FakeClock
) -> None:
    old = await call(
        client, "prime_memory_store", content="The CI pipeline uses Node 18 for every job"
    )
    clock.advance(60)
    new = await call(
        client, "prime_memory_store", content="The CI pipeline uses Node 20 for every job"
    )
    [offered] = new["possibly_supersedes"]
    assert offered["id"] == old["record"]["record_id"] and "18" in offered["change"]
    assert "superseded" not in new
