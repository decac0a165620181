"""Streamable HTTP: when the MCP server may start, and what every request passes on the way in.

**Whether requests need a token is decided once, at start-up.** A server needs
one when the shared ``--token`` / ``PRIME_MEMORY_TOKEN`` is set, when the store
holds any per-user token (revoked ones count: a store that ever had tokens is
a team's store), or when it binds anything but loopback. From then on a
request without a valid token gets ``401``, whatever later happens to the
token table. A server that starts open (loopback, no token anywhere) says so
on stderr, and closes for good at the first request after a token appears in
the store; ``--require-token`` makes it refuse to start open instead.

**Every request then passes, in order** (outermost first):

1. the access gate (:class:`~.mcp_transport.AccessMiddleware`): the token,
   checked on a store connection of its own (:class:`StoreTokenCheck`), so
   that no request waits for another's engine call to learn who it is; the
   project header; and who the request acts as and counts against;
2. the Host and Origin checks of :mod:`.http_guard`, exact (host and port);
3. the new-scope check (:class:`NewScopeWarning`): a project header that
   names a scope holding no memories yet is let through, and logged once;
4. turns (:class:`CallTurns`): one caller has at most a few requests under
   way at once, and the rest of its requests wait for those, while every
   other caller's go ahead, so one token's many connections cannot hold the
   engine for everyone else;
5. the session manager of :mod:`.mcp_sessions`: a session belongs to the
   caller that opened it, one caller holds a bounded number, and idle ones close;
6. the SDK's transport, which caps the body at 4 MiB.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import anyio
import anyio.to_thread

from ..core.places import default_store
from ..engine import tokens as access
from ..engine.tokens import MIN_TOKEN_CHARS
from ..errors import PrimeMemoryError
from ..net.announce import CannotListen, listening_socket, run_announced
from ..net.guard import HostRules, allowed_hosts, is_loopback
from ..storage import is_postgres_url
from ..storage.pg_connect import redact
from .args import CALLS_PER_TOKEN
from .sessions import OwnedSessions, SessionLimits, caller_of
from .transport import PROJECT_HEADER, REQUEST, AccessMiddleware, TokenCheck

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

    from ..storage import Storage
    from ..storage.base import TokenRow

__all__ = [
    "OPEN_NOTICE",
    "CallTurns",
    "HostGuard",
    "Start",
    "StoreTokenCheck",
    "check_start",
    "host_rules",
    "http_app",
    "http_bind_problem",
    "run_http",
    "serve",
    "start_rule",
    "store_tokens",
    "token_problem",
]

#: How often, in seconds, a thread that computes in Python lets the others run
#: while the server serves HTTP (Python's default is 5 ms). A call that arrives
#: while another token's long query computes then waits a fraction of a
#: millisecond at each step it needs the interpreter for, not up to 5 ms
#: (benchmarks/fairness.py; docs/security.md).
SWITCH_INTERVAL_S = 0.0005

#: What a server that starts without authentication says on stderr.
OPEN_NOTICE = (
    "prime-memory-mcp: serving without authentication: loopback only, no tokens in the "
    "store; --require-token refuses this"
)


def token_problem(token: str | None) -> str | None:
    """Why the shared token is refused (too short), or None."""
    if token is not None and len(token) < MIN_TOKEN_CHARS:
        return (
            f"--token (or PRIME_MEMORY_TOKEN) must be at least {MIN_TOKEN_CHARS} characters, "
            f"got {len(token)}; use a long random secret, e.g. the output of "
            "python3 -c 'import secrets; print(secrets.token_urlsafe(32))'"
        )
    return None


def http_bind_problem(host: str, token: str | None, store_tokens: bool = False) -> str | None:
    """Why the server must not start on ``host``, or None when it may.

    ``store_tokens``: the store holds a live per-user token, which then every
    request must carry (or the shared ``token``).
    """
    if not is_loopback(host) and not token and not store_tokens:
        return (
            f"refusing to serve HTTP on {host} without a bearer token: anyone who can reach it "
            "could read and change the memory store. Set --token or PRIME_MEMORY_TOKEN, "
            "add a user's token with prime-memory token add NAME, or bind 127.0.0.1"
        )
    return None


@dataclass(frozen=True)
class Start:
    """How an HTTP server starts: whether every request needs a token, or why it may not start.

    Attributes:
        required: every request must carry a valid token.
        problem: why the server must not start, or None.
    """

    required: bool
    problem: str | None = None


def start_rule(
    host: str, token: str | None, held: int, live: int, *, require_token: bool = False
) -> Start:
    """Decide, once, whether requests need a token (see the module's docstring).

    Args:
        host: the bind address.
        token: the shared token, if any.
        held: tokens in the store, revoked ones too.
        live: tokens in the store not revoked.
        require_token: refuse to start without authentication.
    """
    problem = token_problem(token) or http_bind_problem(host, token, store_tokens=live > 0)
    required = bool(token) or held > 0 or not is_loopback(host)
    if problem is None and require_token and not required:
        problem = (
            "refusing to serve without authentication (--require-token): the store holds no "
            "token and no --token was given; add one with prime-memory token add NAME, "
            "or set --token"
        )
    return Start(required=required, problem=problem)


def store_tokens(store: str | None) -> tuple[int, int]:
    """(tokens the store holds, revoked ones too; those not revoked), read once.

    Raises:
        PrimeMemoryError: the store cannot be opened or read.
    """
    from ..engine.facade import default_store
    from ..storage import open_storage

    storage = open_storage(store or default_store())
    try:
        rows = storage.tokens()
    finally:
        storage.close()
    return len(rows), sum(1 for row in rows if row.revoked_at is None)


logger = logging.getLogger(__name__)

#: Live records per scope, as the server's engine counts them; None while it is not open.
ScopesHeld = Callable[[], "Mapping[str, int] | None"]


class NewScopeWarning:
    """Logs, once per scope, a project header that names a scope holding no memories yet.

    Such a request goes ahead: a team's first memory in a new project starts
    its scope. But a typo in the header starts one too, so the server's log
    says so (and ``prime_memory_stats`` says the scope is new). Each scope is
    looked up once: when it held memories, or when the warning was given.
    """

    def __init__(self, app: ASGIApp, held: ScopesHeld) -> None:
        self.app = app
        self._held = held
        self._settled: set[str] = set()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        identity = REQUEST.get()
        project = None if identity is None else identity.project
        if scope["type"] == "http" and project is not None and project not in self._settled:
            self._settled.add(project)  # before the wait: a request beside this one skips it
            try:
                counts = await anyio.to_thread.run_sync(self._held)
            except PrimeMemoryError as exc:
                logger.debug("could not count the memories of %s: %s", project, exc)
                counts = None
            if counts is None:
                self._settled.discard(project)  # not known yet; the next request looks again
            elif not counts.get(project):
                logger.warning(
                    "the %s header names %s, a scope that holds no memories yet: its first "
                    "memory starts it (check the header for a typo if memories were expected)",
                    PROJECT_HEADER,
                    project,
                )
        await self.app(scope, receive, send)


class HostGuard:
    """Refuses a request whose Host (``421``) or Origin (``403``) is not allowed exactly."""

    def __init__(self, app: ASGIApp, rules: HostRules) -> None:
        self.app = app
        self.rules = rules

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            found: dict[bytes, list[bytes]] = {}
            for name, value in scope.get("headers") or ():
                found.setdefault(name, []).append(value)
            hosts, origins = found.get(b"host", []), found.get(b"origin", [])
            if len(hosts) != 1:
                refused: str | None = "host"
            elif len(origins) > 1:
                refused = "origin"
            else:
                refused = self.rules.refusal(
                    hosts[0].decode("latin-1"), origins[0].decode("latin-1") if origins else None
                )
            if refused is not None:
                await _refuse(send, *_REFUSALS[refused])
                return
        await self.app(scope, receive, send)


_REFUSALS = {
    "host": (
        421,
        "misdirected_request",
        "the Host header names no host this server answers to; to reach it by another "
        "name, start it with --allowed-host NAME:PORT",
    ),
    "origin": (
        403,
        "forbidden_origin",
        "requests from this Origin are refused; to allow a browser page, start the server "
        "with --allowed-origin SCHEME://HOST:PORT",
    ),
}


async def _refuse(send: Send, status: int, error: str, description: str) -> None:
    body = json.dumps({"error": error, "error_description": description}).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class CallTurns:
    """Lets each caller have at most ``per_caller`` requests under way; the rest wait in turn.

    A request that arrives while its caller has as many under way waits for
    one of them to end, in the order they came; requests of other callers do
    not wait for it. The engine serves one call at a time (its lock), so a
    caller's share of it is about what it has under way: one token's 32
    connections get ``per_caller`` of them, not 32.

    Only JSON-RPC requests take turns: a client's answer to the server's own
    request (a tool waiting for it holds a turn) and a notification (say, one
    that cancels a request under way) pass at once. A body is read to tell,
    when it is at most :attr:`PEEK_BYTES` long; a longer one takes a turn. A
    ``GET`` (a stream held open) and a ``DELETE`` (the end of a session) pass too.
    """

    #: The longest body read to tell a request from an answer or a notification.
    PEEK_BYTES = 64 * 1024

    def __init__(self, app: ASGIApp, per_caller: int = CALLS_PER_TOKEN) -> None:
        if per_caller < 1:
            raise ValueError("per_caller must be at least 1")
        self.app = app
        self.per_caller = per_caller
        # Each caller's limiter and how many of its requests hold or wait for it.
        self._turns: dict[str, tuple[anyio.CapacityLimiter, int]] = {}

    def waiting_or_running(self, caller: str) -> int:
        """How many of ``caller``'s requests are under way or waiting their turn."""
        found = self._turns.get(caller)
        return 0 if found is None else found[1]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        caller = caller_of(scope) if scope["type"] == "http" else None
        if caller is None or scope.get("method") != "POST":
            await self.app(scope, receive, send)
            return
        read, receive = await _peek(receive, self.PEEK_BYTES)
        if read is not None and not _holds_a_request(read):
            await self.app(scope, receive, send)
            return
        limiter, users = self._turns.get(caller.key, (None, 0))
        if limiter is None:
            limiter = anyio.CapacityLimiter(self.per_caller)
        self._turns[caller.key] = (limiter, users + 1)
        try:
            async with limiter:
                await self.app(scope, receive, send)
        finally:
            limiter, users = self._turns[caller.key]
            if users <= 1:
                del self._turns[caller.key]
            else:
                self._turns[caller.key] = (limiter, users - 1)


async def _peek(receive: Receive, limit: int) -> tuple[bytes | None, Receive]:
    """(the request's body if it is at most ``limit`` bytes, else None; a ``receive``
    that hands the app everything read here first)."""
    messages: list[Message] = []
    size = 0
    while True:
        message = await receive()
        messages.append(message)
        if message["type"] != "http.request":
            break
        size += len(message.get("body", b""))
        if not message.get("more_body", False) or size > limit:
            break
    complete = (
        messages[-1]["type"] == "http.request"
        and not messages[-1].get("more_body", False)
        and size <= limit
    )
    body = b"".join(m.get("body", b"") for m in messages if m["type"] == "http.request")

    async def replay() -> Message:
        return messages.pop(0) if messages else await receive()

    return (body if complete else None), replay


def _holds_a_request(body: bytes) -> bool:
    """Whether a JSON-RPC body holds a request (a method and an id); True if unreadable."""
    try:
        found = json.loads(body)
    except (ValueError, RecursionError):
        return True
    items = found if isinstance(found, list) else [found]
    return any(not isinstance(m, dict) or ("method" in m and "id" in m) for m in items) or not items


class StoreTokenCheck:
    """The access gate's questions about tokens, asked of the store on a connection of its own.

    Each runs in a worker thread, and not behind the engine's lock: a
    request's token is checked while other requests' engine calls (a long
    query, a fold) are under way. Opened on first use.

    Raises:
        PrimeMemoryError: the store cannot be opened or read (from either question).
    """

    def __init__(self, store: str | None) -> None:
        self._store = store
        self._storage: Storage | None = None
        self._lock = threading.Lock()

    def _opened(self) -> Storage:
        if self._storage is None:
            from ..engine.facade import default_store
            from ..storage import open_storage

            self._storage = open_storage(self._store or default_store())
        return self._storage

    def _verify(self, secret: str) -> TokenRow | None:
        with self._lock:
            return access.verify(self._opened(), secret)

    def _held(self) -> bool:
        with self._lock:
            return bool(self._opened().tokens())

    async def verify(self, secret: str) -> TokenRow | None:
        return await anyio.to_thread.run_sync(self._verify, secret)

    async def required(self) -> bool:
        return await anyio.to_thread.run_sync(self._held)

    def close(self) -> None:
        with self._lock:
            if self._storage is not None:
                self._storage.close()
                self._storage = None


def host_rules(
    host: str, port: int, extra_hosts: Sequence[str] = (), extra_origins: Sequence[str] = ()
) -> HostRules:
    """The Hosts and Origins a server bound to ``host:port`` accepts.

    Its own addresses (:func:`~.http_guard.allowed_hosts`) under ``http://``;
    each ``--allowed-host`` under ``http://`` and ``https://`` (a TLS proxy
    in front); each ``--allowed-origin`` as given.
    """
    named = [h.strip().lower() for h in extra_hosts if h.strip()]
    return HostRules.of(
        [*allowed_hosts(host, port), *named], [*(f"https://{h}" for h in named), *extra_origins]
    )


class _NoTokens:
    """A TokenCheck for a server without a store of tokens: only the shared token opens it."""

    async def verify(self, secret: str) -> None:
        return None

    async def required(self) -> bool:
        return False


def http_app(
    server: MCPServer,
    *,
    host: str,
    port: int,
    token: str | None,
    required: bool | None = None,
    allowed_hosts: Sequence[str] = (),
    allowed_origins: Sequence[str] = (),
    tokens: TokenCheck | None = None,
    limits: SessionLimits | None = None,
    calls_per_token: int = CALLS_PER_TOKEN,
    clock: Callable[[], float] = time.monotonic,
    scopes_held: ScopesHeld | None = None,
) -> ASGIApp:
    """The streamable-HTTP ASGI app with every check of the module's docstring.

    ``required`` None: a token is required when ``token`` is set or ``host`` is
    not loopback. The session manager is ``server.session_manager``.
    ``scopes_held`` counts memories per scope for :class:`NewScopeWarning`;
    without it no header is checked.
    """
    from mcp.server.streamable_http_manager import StreamableHTTPASGIApp
    from mcp.server.transport_security import TransportSecuritySettings
    from starlette.applications import Starlette
    from starlette.routing import Route

    if required is None:
        required = bool(token) or not is_loopback(host)
    sessions = OwnedSessions(
        server._lowlevel_server,
        limits=limits or SessionLimits(),
        # Host and Origin are checked exactly before here (HostGuard); the SDK's own
        # check would admit any port of a loopback name. Its Content-Type check stays.
        security_settings=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        clock=clock,
    )
    server._lowlevel_server._session_manager = sessions  # what server.session_manager reads
    app: ASGIApp = Starlette(
        routes=[Route("/mcp", endpoint=StreamableHTTPASGIApp(sessions))],
        lifespan=lambda _: sessions.run(),
    )
    app = CallTurns(app, calls_per_token)
    if scopes_held is not None:
        app = NewScopeWarning(app, scopes_held)
    app = HostGuard(app, host_rules(host, port, allowed_hosts, allowed_origins))
    return AccessMiddleware(app, tokens or _NoTokens(), token, always=required)


def run_http(
    server: MCPServer,
    *,
    host: str,
    port: int,
    token: str | None,
    required: bool,
    allowed_hosts: Sequence[str] = (),
    allowed_origins: Sequence[str] = (),
    tokens: TokenCheck | None = None,
    limits: SessionLimits | None = None,
    calls_per_token: int = CALLS_PER_TOKEN,
    scopes_held: ScopesHeld | None = None,
    store: str | None = None,
) -> None:
    """Serve streamable HTTP on ``host:port`` until interrupted.

    ``required``: what :func:`start_rule` decided. A server that starts open
    says so on stderr first; then the ``store`` it serves (a URL without its
    password) and the address.
    """
    import uvicorn

    sock = listening_socket(host, port)
    bound_port = sock.getsockname()[1]
    app = http_app(
        server,
        host=host,
        port=bound_port,
        token=token,
        required=required,
        allowed_hosts=allowed_hosts,
        allowed_origins=allowed_origins,
        tokens=tokens,
        limits=limits,
        calls_per_token=calls_per_token,
        scopes_held=scopes_held,
    )
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    name = f"[{host}]" if ":" in host else host
    address = f"http://{name}:{bound_port}/mcp"

    def announce() -> None:
        if not required:
            print(OPEN_NOTICE, file=sys.stderr, flush=True)
        if store is not None:
            shown = redact(store) if is_postgres_url(store) else store
            print(f"prime-memory-mcp: store {shown}", file=sys.stderr, flush=True)
        print(
            f"prime-memory-mcp: serving streamable HTTP on {address}", file=sys.stderr, flush=True
        )

    run_announced(config, [sock], announce)


def check_start(
    host: str, token: str | None, store: str | None, *, require_token: bool = False
) -> Start:
    """:func:`start_rule` with the store's tokens read when the rule depends on them.

    A store that cannot be read when it must be makes a problem: the server
    cannot tell whether requests need a token, so it does not start.
    """
    problem = token_problem(token)
    if problem is not None:
        return Start(required=True, problem=problem)
    if token:
        return start_rule(host, token, 0, 0, require_token=require_token)
    try:
        held, live = store_tokens(store)
    except PrimeMemoryError as exc:
        return Start(
            required=True,
            problem=f"could not read the store's tokens to decide whether requests need one: {exc}",
        )
    return start_rule(host, token, held, live, require_token=require_token)


def serve(
    server: MCPServer,
    args: argparse.Namespace,
    token: str | None,
    scopes_held: ScopesHeld | None = None,
) -> int:
    """Run ``prime-memory-mcp --transport streamable-http`` with its parsed ``args``.

    ``scopes_held``: the engine's live records per scope (:class:`NewScopeWarning`).

    Returns 2, having said why on stderr, when :func:`check_start` refuses to
    start, and 1 when the address cannot be bound (a port in use, say).
    """
    start = check_start(args.host, token, args.store, require_token=args.require_token)
    if start.problem is not None:
        print(f"prime-memory-mcp: {start.problem}", file=sys.stderr)
        return 2
    tokens = StoreTokenCheck(args.store)
    try:
        run_http(
            server,
            host=args.host,
            port=args.port,
            token=token,
            required=start.required,
            allowed_hosts=args.allowed_host,
            allowed_origins=args.allowed_origin,
            tokens=tokens,
            limits=SessionLimits(per_caller=args.sessions_per_token, idle_s=args.session_idle),
            calls_per_token=args.calls_per_token,
            scopes_held=scopes_held,
            store=args.store or default_store(),
        )
    except CannotListen as exc:
        print(f"prime-memory-mcp: {exc}", file=sys.stderr)
        return 1
    finally:
        tokens.close()
    return 0
