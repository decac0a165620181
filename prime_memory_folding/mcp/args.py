"""The MCP server's command line: the arguments ``prime-memory-mcp`` takes.

:func:`~prime_memory_folding.mcp.server.main` parses them and runs the server;
``prime-memory setup`` writes them into IDE configurations.
"""

from __future__ import annotations

import argparse

from ..net.announce import MCP_HTTP_PORT

__all__ = ["CALLS_PER_TOKEN", "parser"]

#: Requests one caller may have under way at once over HTTP, by default.
CALLS_PER_TOKEN = 1


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


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
        "--create",
        action="store_true",
        help="create the store file if it is missing (also: PRIME_MEMORY_CREATE=1); without "
        "it only the default location is created, so a mistyped --store fails",
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
        "--port",
        type=int,
        default=MCP_HTTP_PORT,
        help=f"HTTP port; 0 picks a free one (default: {MCP_HTTP_PORT})",
    )
    found.add_argument(
        "--token",
        help="a shared bearer token HTTP requests may carry, at least 16 characters "
        "(default: $PRIME_MEMORY_TOKEN); with one set, or with any per-user token in the "
        "store (prime-memory token add), every request must carry one; one of the two is "
        "required to bind anything but loopback",
    )
    found.add_argument(
        "--require-token",
        action="store_true",
        help="refuse to start an HTTP server that would serve without authentication "
        "(loopback, no --token, no token in the store)",
    )
    found.add_argument(
        "--sessions-per-token",
        type=_positive,
        default=32,
        metavar="N",
        help="open MCP sessions one token (or one client without a token) may hold over "
        "HTTP (default: 32)",
    )
    found.add_argument(
        "--session-idle",
        type=_positive,
        default=300,
        metavar="SECONDS",
        help="close an HTTP session after this long without a request (default: 300)",
    )
    found.add_argument(
        "--calls-per-token",
        type=_positive,
        default=CALLS_PER_TOKEN,
        metavar="N",
        help="requests one token (or one client without a token) may have under way at once "
        f"over HTTP; its others wait their turn, and other tokens' do not (default: "
        f"{CALLS_PER_TOKEN})",
    )
    found.add_argument(
        "--allowed-host",
        action="append",
        default=[],
        metavar="HOST[:PORT]",
        help="an extra Host header value to accept over HTTP, exactly as clients send it, "
        "e.g. memory.lan:8765 (repeatable); its http:// and https:// origins are accepted too",
    )
    found.add_argument(
        "--allowed-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="an extra browser Origin to accept over HTTP, exactly: scheme, host and port, "
        "e.g. https://app.example (repeatable)",
    )
    return found
