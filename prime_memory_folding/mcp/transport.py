"""Transports for the MCP server: a strict stdio framing layer, and guarded HTTP.

stdio: the SDK's reader drops a line it cannot parse without a word, but
JSON-RPC 2.0 requires an answer. This reader sits in front of the SDK and
answers each bad line itself, then keeps serving:

- a line that is not UTF-8, or not JSON: ``-32700 Parse error``, id null;
- JSON that is not a valid JSON-RPC message: ``-32600 Invalid Request``, with
  the message's id when it is a usable one, else null;
- a line longer than :data:`MAX_LINE_BYTES` (16 MiB): ``-32600 Invalid
  Request``, id null. It is read and thrown away in bounded pieces, so an
  endless line cannot exhaust memory;
- a blank line (nothing but spaces, tabs and carriage returns, the JSON
  whitespace): no answer, since it holds no message and so no id to answer.

What counts as valid is what the SDK's own message model accepts. In
particular ``"params": null`` reads as no params, in requests and in
notifications alike, since some JSON encoders write absent members as null;
refusing it would make such a client's ``notifications/initialized`` go unheard.
A response gets no answer, but only a valid one (an object ``result``, or an
``error`` object with a code and a message); one shaped like a response that is
not valid, such as ``"error": null``, is answered ``-32600`` like any other
invalid message.

While serving, file descriptors 0 and 1 point at the null device and at
stderr, so a stray ``print`` from any library cannot corrupt the wire.

HTTP: the access gate every request passes first (:class:`AccessMiddleware`);
:mod:`~prime_memory_folding.mcp.http` assembles the server around it and
decides, at start-up, whether requests need a token.

Two kinds of bearer token open the HTTP server: the one shared token of
``--token`` / ``PRIME_MEMORY_TOKEN``, which acts with the server's own scopes,
and the per-user tokens kept in the store (``prime-memory token add``). Each
is looked up in the store on every request, so a revoked token stops working
at once on every server sharing the store. A request with a per-user token
acts as that user (:data:`REQUEST`). A request may name its project in the
``X-Prime-Memory-Project`` header.
"""

from __future__ import annotations

import hmac
import json
import logging
import os
import sys
from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, BinaryIO, Protocol

import anyio
import anyio.to_thread
from mcp.shared.message import SessionMessage
from mcp_types import (
    INVALID_REQUEST,
    PARSE_ERROR,
    ErrorData,
    JSONRPCError,
    JSONRPCNotification,
    JSONRPCRequest,
    jsonrpc_message_adapter,
)
from pydantic import ValidationError

from ..core.scopes import named_project
from ..errors import InvalidInput, PrimeMemoryError
from ..storage.base import TokenRow
from .sessions import Caller, with_caller

if TYPE_CHECKING:
    from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
    from mcp.server.mcpserver import MCPServer
    from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = [
    "MAX_LINE_BYTES",
    "PROJECT_HEADER",
    "REQUEST",
    "AccessMiddleware",
    "RequestIdentity",
    "TokenCheck",
    "classify_line",
    "read_line",
    "run_stdio",
    "stdio_streams",
]

#: The longest stdio line served, in bytes before the newline. A store call with
#: content at ``MAX_CONTENT_CHARS``, every character escaped, takes under 1.3 MB;
#: the rest is room for large metadata and vectors.
MAX_LINE_BYTES = 16 * 1024 * 1024
#: How much of an over-long line is read at a time while it is thrown away.
_DISCARD_CHUNK = 1024 * 1024
#: What JSON counts as whitespace (RFC 8259); ``bytes.strip()`` would also take \v and \f.
_JSON_WHITESPACE = b" \t\r\n"

logger = logging.getLogger("prime_memory_folding.mcp.server")


def _error(request_id: str | int | None, code: int, message: str) -> JSONRPCError:
    return JSONRPCError(jsonrpc="2.0", id=request_id, error=ErrorData(code=code, message=message))


def _usable_id(obj: Any) -> str | int | None:
    """The id of a rejected message when it is a valid JSON-RPC id, else None."""
    if not isinstance(obj, dict):
        return None
    request_id = obj.get("id")
    if isinstance(request_id, str) or (
        isinstance(request_id, int) and not isinstance(request_id, bool)
    ):
        return request_id
    return None


def classify_line(line: bytes) -> SessionMessage | JSONRPCError | None:
    """Turn one raw stdio line into a message for the server, or the error to answer.

    Returns None for a blank line, which JSON-RPC over stdio ignores.
    """
    try:
        message = jsonrpc_message_adapter.validate_json(line, by_name=False)
    except ValidationError:
        pass  # Fall through to find out which error to answer; this path is rare.
    else:
        # A request whose id is unusable would otherwise pass as a notification,
        # and one that also carries "result" or "error" as a response.
        ambiguous = (isinstance(message, JSONRPCNotification) and b'"id"' in line) or (
            not isinstance(message, (JSONRPCRequest, JSONRPCNotification))
            and b'"method"' in line
            and "method" in json.loads(line)
        )
        if not ambiguous:
            return SessionMessage(message)
    if not line.strip(_JSON_WHITESPACE):
        return None
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as exc:
        return _error(
            None,
            PARSE_ERROR,
            f"Parse error: the line is not valid UTF-8 ({exc.reason} at byte {exc.start})",
        )
    try:
        obj = json.loads(text)
    except ValueError as exc:
        return _error(None, PARSE_ERROR, f"Parse error: the line is not valid JSON ({exc})")
    except RecursionError:
        return _error(None, PARSE_ERROR, "Parse error: the JSON nests too deeply to read")
    if not (isinstance(obj, dict) and "id" in obj):
        try:
            return SessionMessage(jsonrpc_message_adapter.validate_python(obj, by_name=False))
        except ValidationError:
            pass
    if isinstance(obj, list):
        detail = "batches are not supported; send one JSON-RPC message per line"
    elif not isinstance(obj, dict):
        detail = "a JSON-RPC message must be a JSON object"
    elif obj.get("jsonrpc") != "2.0":
        detail = 'the "jsonrpc" member must be exactly "2.0"'
    elif "method" in obj and not isinstance(obj["method"], str):
        detail = 'the "method" member must be a string'
    elif "method" in obj and ("result" in obj or "error" in obj):
        detail = 'a request cannot also carry "result" or "error"'
    elif "id" in obj and _usable_id(obj) is None:
        detail = 'the "id" member must be a string or an integer, and never null'
    elif "params" in obj and not isinstance(obj["params"], dict):
        detail = 'the "params" member must be an object'
    else:
        detail = "the object is not a request, notification or response"
    return _error(_usable_id(obj), INVALID_REQUEST, f"Invalid Request: {detail}")


def read_line(stream: BinaryIO, limit: int = MAX_LINE_BYTES) -> bytes | None:
    """The next line of ``stream`` with its newline; b"" at the end of the stream.

    Returns None for a line longer than ``limit`` bytes (not counting the
    newline), after reading past its end without keeping it.
    """
    line = stream.readline(limit + 1)
    if len(line) <= limit or line.endswith(b"\n"):
        return line
    while True:
        chunk = stream.readline(_DISCARD_CHUNK)
        if not chunk or chunk.endswith(b"\n"):
            return None


_TOO_LONG = _error(
    None,
    INVALID_REQUEST,
    f"Invalid Request: the line is longer than {MAX_LINE_BYTES:,} bytes and was discarded; "
    "send smaller messages",
)


@asynccontextmanager
async def stdio_streams(
    stdin: BinaryIO, stdout: BinaryIO
) -> AsyncIterator[
    tuple[
        MemoryObjectReceiveStream[SessionMessage | Exception],
        MemoryObjectSendStream[SessionMessage],
    ]
]:
    """Streams for the low-level server's ``run``, over binary stdin and stdout.

    Bad lines are answered here and never reach the server.
    """
    read_send, read_recv = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_send, write_recv = anyio.create_memory_object_stream[SessionMessage](0)
    errors_send = write_send.clone()

    async def reader() -> None:
        async with read_send, errors_send:
            while True:
                line = await anyio.to_thread.run_sync(read_line, stdin)
                if line == b"":
                    break
                item = _TOO_LONG if line is None else classify_line(line)
                if item is None:
                    continue
                if isinstance(item, JSONRPCError):
                    await errors_send.send(SessionMessage(item))
                else:
                    await read_send.send(item)

    async def writer() -> None:
        async with write_recv:
            async for message in write_recv:
                data = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                stdout.write(data.encode("utf-8") + b"\n")
                stdout.flush()

    async with anyio.create_task_group() as tg:
        tg.start_soon(reader)
        tg.start_soon(writer)
        try:
            yield read_recv, write_send
        finally:
            # The reader may still be blocked on stdin; the writer ends when all senders close.
            tg.cancel_scope.cancel()


class _ClaimedStdio:
    """Private duplicates of fds 0 and 1 for the wire, with 0 and 1 diverted."""

    def __init__(self) -> None:
        self._saved: list[tuple[int, int]] = []
        sys.stdout.flush()
        wire_in = os.dup(0)
        wire_out = os.dup(1)
        null_in = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null_in, 0)
        os.close(null_in)
        os.dup2(2, 1)
        self._saved = [(0, wire_in), (1, wire_out)]
        self.stdin = os.fdopen(wire_in, "rb", closefd=False)
        self.stdout = os.fdopen(wire_out, "wb", closefd=False)

    def restore(self) -> None:
        sys.stdout.flush()
        for fd, saved in self._saved:
            os.dup2(saved, fd)
            os.close(saved)
        self._saved = []


def run_stdio(server: MCPServer) -> None:
    """Serve ``server`` on this process's stdin and stdout until stdin closes."""
    claimed = _ClaimedStdio()

    async def serve() -> None:
        lowlevel = server._lowlevel_server  # the SDK's own run_stdio_async drives it the same way
        async with stdio_streams(claimed.stdin, claimed.stdout) as (read, write):
            await lowlevel.run(read, write, lowlevel.create_initialization_options())

    try:
        anyio.run(serve)
    finally:
        claimed.restore()


# -- HTTP: the access gate ----------------------------------------------------------


_UNAUTHORIZED = (
    b'{"error":"unauthorized","error_description":"send the header Authorization: Bearer <token>"}'
)


_UNAVAILABLE = (
    b'{"error":"temporarily_unavailable","error_description":"the server could not reach its '
    b'store to check the token; try again"}'
)


def _bearer(header: bytes) -> bytes | None:
    """The token of an ``Authorization: Bearer <token>`` header, else None."""
    scheme, _, given = header.partition(b" ")
    # The scheme is case-insensitive (RFC 9110).
    return given if scheme.lower() == b"bearer" and given else None


async def _refuse(send: Send, status: int, body: bytes) -> None:
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
    ]
    if status == 401:
        headers.append((b"www-authenticate", b'Bearer realm="prime-memory"'))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


#: The header in which a client names its project: a scope name, a git remote URL or a path.
PROJECT_HEADER = "X-Prime-Memory-Project"


@dataclass(frozen=True, slots=True)
class RequestIdentity:
    """Who an HTTP request acts as, and the project it named.

    Attributes:
        token: the store's live token the request carried; None for the
            shared token or an open loopback server (the server's own scopes).
        project: the scope named by the project header, normalised, or None.
        caller: who the request counts against, for sessions and engine calls:
            ``token:<hash>``, ``shared``, or ``anonymous:<client address>``.
    """

    token: TokenRow | None
    project: str | None
    caller: str = field(default="", compare=False)


#: The identity of the HTTP request being served, set by :class:`AccessMiddleware`
#: and read by the MCP tools; None on stdio. The SDK hands each message's
#: context variables to the task that handles it.
REQUEST: ContextVar[RequestIdentity | None] = ContextVar("prime_memory_request", default=None)


class TokenCheck(Protocol):
    """What :class:`AccessMiddleware` asks the store."""

    def verify(self, secret: str) -> Awaitable[TokenRow | None]:
        """The live token whose secret this is, or None."""
        ...

    def required(self) -> Awaitable[bool]:
        """Whether the store holds any token, revoked ones too, so that requests need one."""
        ...


def _caller(row: TokenRow | None, shared: bool, scope: Scope) -> Caller:
    if row is not None:
        return Caller(f"token:{row.token_hash}", f"token {row.name!r}")
    if shared:
        return Caller("shared", "the shared token")
    client = scope.get("client")
    address = str(client[0]) if client else "unknown"
    return Caller(f"anonymous:{address}", f"the client at {address} (no token)")


class AccessMiddleware:
    """The bearer-token gate with per-user tokens from the store, and the project header.

    A request passes with the shared token (when one is set) or with a live
    token from the store. Without either it passes only on a server that
    started open (``always`` False: loopback, no shared token, no token in the
    store), and only until a token appears in the store: from the first
    request that finds one, the gate stays shut to requests without a token
    for the rest of the server's life. Anything refused gets 401 and a JSON
    body; a malformed project header gets 400.

    A request that passes carries its identity (:data:`REQUEST`) and its
    caller (:func:`~.mcp_sessions.caller_of`), which owns the sessions it opens.
    """

    def __init__(
        self,
        app: ASGIApp,
        tokens: TokenCheck,
        shared: str | None = None,
        *,
        always: bool = False,
    ) -> None:
        self.app = app
        self._tokens = tokens
        self._shared = shared.encode() if shared else None
        # Decided at start-up; an open server only ever closes.
        self._always = always or self._shared is not None

    async def _identify(self, given: bytes | None) -> tuple[bool, TokenRow | None, bool]:
        """(whether the request may pass, the store token it carried, whether it was shared)."""
        if (
            given is not None
            and self._shared is not None
            and hmac.compare_digest(given, self._shared)
        ):
            return True, None, True
        if given is not None:
            try:
                secret = given.decode("ascii")
            except UnicodeDecodeError:
                secret = ""
            row = await self._tokens.verify(secret) if secret else None
            if row is not None:
                return True, row, False
        if not self._always and await self._tokens.required():
            self._always = True
        return not self._always, None, False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or ())
        try:
            allowed, row, shared = await self._identify(_bearer(headers.get(b"authorization", b"")))
        except PrimeMemoryError as exc:
            logger.warning("could not check a request's token: %s", exc)
            await _refuse(send, 503, _UNAVAILABLE)
            return
        if not allowed:
            await _refuse(send, 401, _UNAUTHORIZED)
            return
        project = None
        raw = headers.get(PROJECT_HEADER.lower().encode())
        if raw is not None:
            try:
                project = named_project(raw.decode("utf-8"))
            except (UnicodeDecodeError, InvalidInput) as exc:
                detail = str(exc) if isinstance(exc, InvalidInput) else "it is not UTF-8"
                body = json.dumps(
                    {
                        "error": "invalid_request",
                        "error_description": f"the {PROJECT_HEADER} header is malformed: {detail}",
                    }
                ).encode()
                await _refuse(send, 400, body)
                return
        caller = _caller(row, shared, scope)
        token = REQUEST.set(RequestIdentity(row, project, caller.key))
        try:
            await self.app(with_caller(scope, caller), receive, send)
        finally:
            REQUEST.reset(token)
