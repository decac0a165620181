"""Run a uvicorn server, and say where it serves once it handles Ctrl-C itself."""

from __future__ import annotations

import socket
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import uvicorn

__all__ = ["run_announced"]


def listening_socket(host: str, port: int) -> socket.socket:
    """A TCP socket bound to ``host:port`` (0 picks a free port) and listening.

    asyncio turns Nagle off on accepted connections only when the protocol is
    ``IPPROTO_TCP``, not 0. With Nagle on, a response body written after its
    headers waits for the client's delayed ACK: about 40 ms on every call.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(128)
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
