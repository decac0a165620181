"""``python3 -m prime_memory_folding.mcp_server``: the MCP server, which lives in
:mod:`prime_memory_folding.mcp.server`."""

from __future__ import annotations

import sys

from .mcp.server import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main())
