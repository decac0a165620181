"""The MCP server's command line: the arguments ``prime-memory-mcp`` takes.

:func:`~prime_memory_folding.mcp_server.main` parses them and runs the server;
``prime-memory setup`` writes them into IDE configurations.
"""

from __future__ import annotations

import argparse

__all__ = ["parser"]


def parser() -> argparse.ArgumentParser:
    """The arguments ``prime-memory-mcp`` takes."""
    found = argparse.ArgumentParser(
        prog="prime-memory-mcp",
        description="Serve a Prime Memory Folding store over the Model Context Protocol.",
    )
    found.add_argument(
        "--store",
        metavar="PATH|URL",
        help="the store: a file or a postgresql:// URL (default: $PRIME_MEMORY_STORE, else "
        "$PRIME_MEMORY_HOME/memory.db, else the user data folder)",
    )
    found.add_argument(
        "--scope",
        metavar="SCOPE",
        help="the current scope, where memories go: global, user:NAME, project:ID, ... "
        "(default: $PRIME_MEMORY_SCOPE, else the project the server runs in)",
    )
    found.add_argument(
        "--project",
        metavar="DIR",
        help="the project folder whose scope is current, for clients that start servers "
        "outside it (e.g. --project ${workspaceFolder}); default: $CLAUDE_PROJECT_DIR, "
        "else the git repository of the working directory",
    )
    found.add_argument("--transport", choices=["stdio", "streamable-http"], default="stdio")
    found.add_argument("--host", default="127.0.0.1", help="HTTP bind address (default: 127.0.0.1)")
    found.add_argument(
        "--port", type=int, default=8765, help="HTTP port; 0 picks a free one (default: 8765)"
    )
    found.add_argument(
        "--token",
        help="a shared bearer token HTTP requests may carry (default: $PRIME_MEMORY_TOKEN); "
        "with one set, or while the store holds a live per-user token (prime-memory token "
        "add), every request must carry one; one of the two is required to bind anything "
        "but loopback",
    )
    found.add_argument(
        "--allowed-host",
        action="append",
        default=[],
        metavar="HOST[:PORT]",
        help="an extra Host header value to accept over HTTP, e.g. memory.lan:8765 (repeatable)",
    )
    found.add_argument(
        "--allowed-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="an extra browser Origin to accept over HTTP (repeatable)",
    )
    return found
