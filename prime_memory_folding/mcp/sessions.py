"""MCP sessions over streamable HTTP: owned by their caller, capped per caller, reaped when idle.

Which requests have sessions: a client that speaks a protocol version with
the ``initialize`` handshake (2025-11-25 and before) gets an
``Mcp-Session-Id`` from its ``initialize`` and sends it with every later
request; the SDK keeps the session (its message loop and streams) in this
process until the client ends it (``DELETE``), or it sits idle too long. A
2026-07-28 request stands alone and opens no session, so nothing here applies
to it.

What this adds to the SDK's session manager
(:class:`~mcp.server.streamable_http_manager.StreamableHTTPSessionManager`):

- **Owned.** The access gate names the caller of every request (a store
  token, the shared token, or an anonymous client by its address) and hands
  it to the SDK as the request's user, which the SDK then requires of every
  request for that session: with any other credential, or none, a session
  answers ``404`` as if it did not exist, whatever the method.
- **Capped per caller.** One caller holds at most
  :attr:`SessionLimits.per_caller` sessions at once; the one past it gets
  ``429`` and a message that says so, and every other caller goes on opening
  sessions. The SDK's own cap on all sessions stays as a last resort.
- **Reaped when idle.** A session with no request in flight (an open ``GET``
  stream counts as one) for :attr:`SessionLimits.idle_s` is closed, by an
  injectable clock; its id then answers ``404`` and the client opens another.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

import anyio
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

if TYPE_CHECKING:
    from mcp.server.auth.middleware.bearer_auth import AuthorizationContext
    from mcp.server.lowlevel.server import Server
    from mcp.server.streamable_http import StreamableHTTPServerTransport
    from mcp.server.transport_security import TransportSecuritySettings
    from starlette.types import Receive, Scope, Send

__all__ = [
    "CALLER_KEY",
    "Caller",
    "OwnedSessions",
    "SessionActivity",
    "SessionLimits",
    "caller_of",
    "with_caller",
]

#: Where the access gate leaves the request's :class:`Caller` in the ASGI scope.
CALLER_KEY = "prime_memory.caller"


class Caller(NamedTuple):
    """Who a request counts against: ``key`` identifies it, ``label`` names it in messages."""

    key: str
    label: str


def with_caller(scope: Scope, caller: Caller) -> Scope:
    """A copy of ``scope`` that names ``caller``, for this module and as the SDK's user."""
    user = AuthenticatedUser(AccessToken(token="", client_id=caller.key, scopes=[]))
    return {**scope, CALLER_KEY: caller, "user": user}


def caller_of(scope: Scope) -> Caller | None:
    """The caller the access gate named for this request, if any."""
    found = scope.get(CALLER_KEY)
    return found if isinstance(found, Caller) else None


@dataclass(frozen=True)
class SessionLimits:
    """How many sessions a caller may hold, and how long one may sit idle.

    Attributes:
        per_caller: open sessions per caller (a token, the shared token, or
            an anonymous client address on a server without tokens).
        idle_s: seconds without a request in flight after which a session closes.
        total: open sessions of all callers together (the SDK's cap).
    """

    per_caller: int = 32
    idle_s: float = 300.0
    total: int = 10_000

    def __post_init__(self) -> None:
        if self.per_caller < 1 or self.total < 1:
            raise ValueError("session limits must be at least 1")
        if not 0 < self.idle_s < float("inf"):
            raise ValueError("the idle timeout must be a positive number of seconds")


@dataclass
class _Busy:
    in_flight: int = 0
    last: float = 0.0


@dataclass
class SessionActivity:
    """When each session was last busy, by ``clock``, and which have been idle too long."""

    idle_s: float
    clock: Callable[[], float] = time.monotonic
    _sessions: dict[str, _Busy] = field(default_factory=dict)

    def opened(self, session: str) -> None:
        """A session began with its opening request in flight."""
        self._sessions[session] = _Busy(in_flight=1, last=self.clock())

    def began(self, session: str) -> None:
        busy = self._sessions.get(session)
        if busy is not None:
            busy.in_flight += 1

    def ended(self, session: str) -> None:
        busy = self._sessions.get(session)
        if busy is not None:
            busy.in_flight = max(0, busy.in_flight - 1)
            busy.last = self.clock()

    def closed(self, session: str) -> None:
        self._sessions.pop(session, None)

    def idle(self) -> list[str]:
        """The sessions with nothing in flight for at least ``idle_s``, oldest first."""
        now = self.clock()
        quiet = [
            (busy.last, session)
            for session, busy in self._sessions.items()
            if not busy.in_flight and now - busy.last >= self.idle_s
        ]
        return [session for _, session in sorted(quiet)]


class _Opening:
    """A caller's claim on one more session while its opening request is served."""

    def __init__(self, caller: str) -> None:
        self.caller = caller
        self.session: str | None = None


_OPENING: ContextVar[_Opening | None] = ContextVar("prime_memory_opening", default=None)


class OwnedSessions(StreamableHTTPSessionManager):
    """The SDK's session manager with sessions capped per caller and reaped by a clock.

    Args:
        app: the low-level MCP server.
        limits: the caps and the idle timeout.
        security_settings: the SDK's transport checks (Host and Origin are
            checked before a request gets here; see :mod:`.http_guard`).
        clock: seconds, for the idle timeout; inject one in tests.
    """

    def __init__(
        self,
        app: Server[Any],
        *,
        limits: SessionLimits = SessionLimits(),
        security_settings: TransportSecuritySettings | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(
            app,
            security_settings=security_settings,
            # The SDK's idle timer reads the event loop's clock; ours reads ``clock``.
            session_idle_timeout=None,
            max_sessions=limits.total,
        )
        self.limits = limits
        self.activity = SessionActivity(limits.idle_s, clock)
        self._callers: dict[str, str] = {}  # session id -> its caller's key
        self._opening: Counter[str] = Counter()  # opening requests not yet admitted, per caller

    def held_by(self, caller: str) -> int:
        """How many sessions ``caller`` holds, counting those it is opening."""
        return sum(1 for key in self._callers.values() if key == caller) + self._opening[caller]

    @asynccontextmanager
    async def run(self) -> AsyncIterator[None]:
        async with super().run(), anyio.create_task_group() as tasks:
            tasks.start_soon(self._reap_forever)
            try:
                yield
            finally:
                tasks.cancel_scope.cancel()

    async def _reap_forever(self) -> None:
        # Looking often enough that a session lives at most a quarter past its timeout.
        every = min(self.limits.idle_s / 4, 30.0)
        while True:
            await anyio.sleep(every)
            await self.reap()

    async def reap(self) -> list[str]:
        """Close every session idle for the timeout or longer, by the clock; their ids."""
        closed = self.activity.idle()
        for session in closed:
            transport = self._server_instances.get(session)
            if transport is not None:
                await self._discard_session(session, transport)
            self._forget(session)
        return closed

    def _forget(self, session: str) -> None:
        self._callers.pop(session, None)
        self.activity.closed(session)

    async def _discard_session(
        self, session_id: str, transport: StreamableHTTPServerTransport
    ) -> None:
        self._forget(session_id)
        await super()._discard_session(session_id, transport)

    def _admit_session(
        self, requestor: AuthorizationContext | None
    ) -> StreamableHTTPServerTransport | None:
        transport = super()._admit_session(requestor)
        opening = _OPENING.get()
        if transport is not None and opening is not None and transport.mcp_session_id:
            session = transport.mcp_session_id
            opening.session = session
            self._opening[opening.caller] -= 1
            self._callers[session] = opening.caller
            self.activity.opened(session)
        return transport

    async def _handle_stateful_request(self, scope: Scope, receive: Receive, send: Send) -> None:
        caller = caller_of(scope)
        headers = dict(scope.get("headers") or ())
        raw = headers.get(MCP_SESSION_ID_HEADER.lower().encode())
        if caller is None:
            await super()._handle_stateful_request(scope, receive, send)
        elif raw is None:
            await self._open(caller, scope, receive, send)
        else:
            session = raw.decode("latin-1")
            mine = self._callers.get(session) == caller.key
            if mine:
                self.activity.began(session)
            try:
                await super()._handle_stateful_request(scope, receive, send)
            finally:
                if mine:
                    self.activity.ended(session)

    async def _open(self, caller: Caller, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve a request that would open a session, unless ``caller`` holds its cap."""
        # Counted and claimed with no await in between, so a burst cannot overshoot.
        if self.held_by(caller.key) >= self.limits.per_caller:
            await _too_many(caller, self.limits, send)
            return
        opening = _Opening(caller.key)
        self._opening[caller.key] += 1
        reset = _OPENING.set(opening)
        try:
            await super()._handle_stateful_request(scope, receive, send)
        finally:
            _OPENING.reset(reset)
            if opening.session is None:
                self._opening[caller.key] -= 1
            else:
                self.activity.ended(opening.session)
            if self._opening[caller.key] <= 0:
                del self._opening[caller.key]


async def _too_many(caller: Caller, limits: SessionLimits, send: Send) -> None:
    message = (
        f"{caller.label} already holds {limits.per_caller} open MCP sessions, the most one "
        "caller may hold; end one you no longer use (DELETE /mcp with its Mcp-Session-Id "
        f"header), or wait until one has been idle for {limits.idle_s:g} s and closes"
    )
    body = json.dumps(
        {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": message}}
    ).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
    ]
    await send({"type": "http.response.start", "status": 429, "headers": headers})
    await send({"type": "http.response.body", "body": body})
