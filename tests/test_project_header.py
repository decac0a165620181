"""A project header that names a scope with no memories yet is served, and said to be new."""

from __future__ import annotations

import queue
from pathlib import Path
from typing import Any

from prime_memory_folding.mcp.server import NEW_SCOPE
from tests.test_mcp_http import HttpServer
from tests.test_mcp_tokens import Client

PROJECT = "project:github.com/acme/api"
WARNING = "X-Prime-Memory-Project header names"


class LoggedServer(HttpServer):
    """The HTTP server process, keeping every line it writes on stderr."""

    def __init__(self, store: Path) -> None:
        self.log: list[str] = []
        super().__init__(store)

    def _drain(self, lines: queue.Queue[bytes]) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.log.append(line.decode(errors="replace"))
            lines.put(line)
        lines.put(b"")


def _stats(client: Client) -> dict[str, Any]:
    status, result = client.call("prime_memory_stats")
    assert status == 200 and not result.get("isError"), result
    structured: dict[str, Any] = result["structuredContent"]
    return structured


def test_a_new_project_scope_is_served_logged_once_and_said_to_be_new(tmp_path: Path) -> None:
    server = LoggedServer(tmp_path / "memory.db")
    try:
        client = Client(server, None, project=PROJECT).open()
        first = _stats(client)
        assert first["current_scope"] == PROJECT
        assert first["scope_reason"].endswith(NEW_SCOPE)
        status, stored = client.call("prime_memory_store", content="We deploy on Fridays")
        assert status == 200 and not stored.get("isError"), stored
        assert stored["structuredContent"]["record"]["scope"] == PROJECT
        assert NEW_SCOPE not in _stats(client)["scope_reason"]
        # Another session naming the same project, which now holds a memory: nothing to say.
        again = Client(server, None, project=PROJECT).open()
        assert NEW_SCOPE not in _stats(again)["scope_reason"]
    finally:
        server.stop()
    warnings = [line for line in server.log if WARNING in line]
    assert len(warnings) == 1, server.log
    assert PROJECT in warnings[0] and "holds no memories yet" in warnings[0]


def test_a_scope_that_holds_memories_is_not_called_new(tmp_path: Path) -> None:
    from prime_memory_folding import MemoryEngine

    store = tmp_path / "memory.db"
    with MemoryEngine(store, scope=PROJECT, embedder="none") as memory:
        memory.store("We deploy on Fridays")
    server = LoggedServer(store)
    try:
        client = Client(server, None, project=PROJECT).open()
        assert NEW_SCOPE not in _stats(client)["scope_reason"]
        client.call("prime_memory_stats")
    finally:
        server.stop()
    assert not [line for line in server.log if WARNING in line], server.log
