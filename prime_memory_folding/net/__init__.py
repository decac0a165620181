"""What both HTTP servers (MCP and the inspector) share: Host and Origin checks, and
a listening socket announced once it serves."""
