"""Run the inspector: bind, print the address with its token, open a browser, serve."""

from __future__ import annotations

import socket
import threading
import webbrowser
from collections.abc import Callable
from typing import TextIO

from ..engine.facade import MemoryEngine
from ..engine.tokens import MIN_TOKEN_CHARS
from ..net.announce import listening_socket, run_announced
from .app import create_app
from .security import Secrets, allowed_hosts, is_loopback

__all__ = ["bind_problem", "listening_socket", "serve"]

_WILDCARDS = ("0.0.0.0", "::")


def bind_problem(host: str, token: str | None) -> str | None:
    """Why the inspector must not start on ``host`` with this token, or None."""
    if is_loopback(host):
        return None
    if not token:
        return (
            f"binding to {host} makes the inspector reachable from other machines; "
            "pass --token with a long random secret to do that, or use an SSH tunnel "
            "(see docs/inspector.md)"
        )
    if len(token) < MIN_TOKEN_CHARS:
        return f"--token must be at least {MIN_TOKEN_CHARS} characters"
    return None


def _hosts(host: str, port: int) -> list[str]:
    hosts = list(allowed_hosts(host, port))
    if host in _WILDCARDS:
        name = socket.gethostname()
        try:
            _, aliases, addresses = socket.gethostbyname_ex(name)
        except OSError:
            aliases, addresses = [], []
        hosts.extend(f"{h}:{port}" for h in {name, *aliases, *addresses})
        hosts.extend(allowed_hosts("127.0.0.1", port))
    return hosts


def serve(
    engine: MemoryEngine,
    *,
    host: str,
    port: int,
    token: str,
    open_browser: bool,
    out: TextIO,
    warn: Callable[[str], None],
) -> None:
    """Serve the inspector until interrupted; prints its address (with the token) to ``out``.

    Raises:
        ValueError: :func:`bind_problem` refuses ``host`` with this token.
    """
    problem = bind_problem(host, token)
    if problem:
        raise ValueError(problem)
    if not is_loopback(host):
        warn(
            f"warning: the inspector on {host} is reachable from other machines, over plain "
            "HTTP; anyone who learns the token can read and change every memory"
        )
    with listening_socket(host, port) as sock:
        _serve_on(sock, engine, host=host, token=token, open_browser=open_browser, out=out)


def _serve_on(
    sock: socket.socket,
    engine: MemoryEngine,
    *,
    host: str,
    token: str,
    open_browser: bool,
    out: TextIO,
) -> None:
    import uvicorn

    bound = sock.getsockname()[1]
    shown = "127.0.0.1" if host in _WILDCARDS else (f"[{host}]" if ":" in host else host)
    keys = Secrets(token=token, cookie=f"prime_memory_inspector_{bound}")
    app = create_app(engine, keys, _hosts(host, bound))
    url = f"http://{shown}:{bound}/?token={token}"
    print(f"Prime Memory inspector for {engine.path}", file=out)

    def announce() -> None:
        print(f"Open: {url}", file=out, flush=True)
        if open_browser:
            threading.Timer(0.5, webbrowser.open, args=(url,)).start()

    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off")
    run_announced(config, [sock], announce)
