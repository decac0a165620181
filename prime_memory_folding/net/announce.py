"""Run a uvicorn server, and say where it serves once it handles Ctrl-C itself.

The two HTTP servers have their own default ports, so that both can run at
once: the MCP server :data:`MCP_HTTP_PORT`, which IDE configurations name, and
the inspector :data:`INSPECTOR_PORT`, away from the MCP ports a team runs side
by side (docs/team.md).
"""

from __future__ import annotations

import errno
import socket
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import uvicorn

__all__ = ["INSPECTOR_PORT", "MCP_HTTP_PORT", "CannotListen", "listening_socket", "run_announced"]

#: The MCP server's HTTP port unless ``--port`` says otherwise.
MCP_HTTP_PORT = 8765
#: The inspector's (``prime-memory ui``) port unless ``--port`` says otherwise.
INSPECTOR_PORT = 8770


class CannotListen(OSError):
    """An address that cannot be bound; the message says why and what to do."""


def _cannot_listen(host: str, port: int, exc: OSError) -> CannotListen:
    where = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    free = "pass --port N for another port, or --port 0 for any free one"
    if exc.errno == errno.EADDRINUSE:
        why = f"the port is in use, perhaps by another server; {free}"
    elif exc.errno == errno.EACCES:
        why = f"permission denied (ports below 1024 need privileges); {free}"
    elif exc.errno == errno.EADDRNOTAVAIL:
        why = "no network interface of this machine has that address; check --host"
    else:
        why = exc.strerror or str(exc)
    return CannotListen(f"cannot listen on {where}: {why}")


def listening_socket(host: str, port: int) -> socket.socket:
    """A TCP socket bound to ``host:port`` (0 picks a free port) and listening.

    asyncio turns Nagle off on accepted connections only when the protocol is
    ``IPPROTO_TCP``, not 0. With Nagle on, a response body written after its
    headers waits for the client's delayed ACK: about 40 ms on every call.

    Raises:
        CannotListen: the address is in use, not this machine's, or not allowed;
            its message is one line that says what to do.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(128)
    except OSError as exc:
        sock.close()
        raise _cannot_listen(host, port, exc) from exc
    return sock


def run_announced(
    config: uvicorn.Config, sockets: Sequence[socket.socket], announce: Callable[[], None]
) -> None:
    """Serve on ``sockets`` until interrupted; call ``announce`` once the server has started.

    By then the server handles Ctrl-C (SIGINT) itself. A process started with
    SIGINT ignored, as a script's background job is, would otherwise drop a
    Ctrl-C sent as soon as the address shows, and keep serving.
    """
    import uvicorn

    class Announcing(uvicorn.Server):
        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets=sockets)
            if self.started:
                announce()

    Announcing(config).run(sockets=list(sockets))
