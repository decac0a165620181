"""The MCP server: tools, resources and prompts over stdio and streamable HTTP
(``python3 -m prime_memory_folding.mcp_server``)."""
