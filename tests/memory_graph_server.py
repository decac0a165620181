"""A small local stand-in for the reference memory server, for smoke tests.

``benchmarks/mcp_peer.py`` compares this project's server with
``@modelcontextprotocol/server-memory`` from npm, which needs Node and a first
install from the registry. Its smoke test runs offline instead, against this
server: the two tools the benchmark calls, with the reference server's names,
arguments and answers, over a knowledge graph kept as JSON lines in
``MEMORY_FILE_PATH`` (one line per entity, rewritten on every change, as the
reference server does). It is not the reference server, and its timings mean
nothing; the smoke test checks only that the benchmark drives a peer, checks
its answers and reports.

    python3 tests/memory_graph_server.py      # stdio
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from mcp.server.mcpserver import MCPServer
from pydantic import BaseModel


class Entity(BaseModel):
    name: str
    entityType: str  # the reference server's field name
    observations: list[str]


class Graph(BaseModel):
    entities: list[Entity]
    relations: list[dict[str, str]]


class Created(BaseModel):
    entities: list[Entity]


FILE = Path(os.environ.get("MEMORY_FILE_PATH", "memory.jsonl"))
server = MCPServer("memory-graph-stand-in", log_level="WARNING")


def _load() -> list[Entity]:
    if not FILE.is_file():
        return []
    return [
        Entity.model_validate({k: v for k, v in json.loads(line).items() if k != "type"})
        for line in FILE.read_text(encoding="utf-8").splitlines()
        if line.strip()
    ]


def _save(entities: list[Entity]) -> None:
    lines = [json.dumps({"type": "entity", **e.model_dump()}) for e in entities]
    FILE.write_text("".join(line + "\n" for line in lines), encoding="utf-8")


@server.tool()
def create_entities(entities: list[Entity]) -> Created:
    """Create entities whose names are new; return the ones created."""
    graph = _load()
    known = {e.name for e in graph}
    new = [e for e in entities if e.name not in known]
    _save(graph + new)
    return Created(entities=new)


@server.tool()
def search_nodes(query: str) -> Graph:
    """Entities whose name, type or an observation contains the query (any case)."""
    wanted = query.lower()
    found = [
        e
        for e in _load()
        if wanted in e.name.lower()
        or wanted in e.entityType.lower()
        or any(wanted in o.lower() for o in e.observations)
    ]
    return Graph(entities=found, relations=[])


if __name__ == "__main__":
    server.run()
