"""Run a uvicorn server, and say where it serves once it handles Ctrl-C itself."""

from __future__ import annotations

import socket
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import uvicorn

__all__ = ["run_announced"]


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
