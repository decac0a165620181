"""How the MCP server's tools reach the engine, and as whom.

The engine opens once, lazily (:class:`EngineHolder`); the server's scope is
resolved at start-up, and from the client's MCP roots at most once
(:class:`ScopeHolder`). Over HTTP, a request with a per-user token acts
within the token's scopes (:func:`request_grant`, and ``docs/team.md``).
:class:`Access` puts these together for the tools in
:mod:`~prime_memory_folding.mcp.server`: it runs engine calls where they
do not block the event loop, and says which scopes a request writes to and
reads.
"""

from __future__ import annotations

import logging
import threading
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Union

import anyio
import anyio.to_thread
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError

from ..core import scopes as scope_rules
from ..core.address import parse_record_id
from ..core.scopes import ScopeResolution
from ..engine import tokens as access
from ..errors import InvalidInput, NotFound, PrimeMemoryError
from ..storage import pushdown_of
from .privacy import STORE_NAME, Location, client_error, unknown_record
from .transport import REQUEST

if TYPE_CHECKING:
    from ..engine.facade import MemoryEngine

__all__ = [
    "Access",
    "EngineHolder",
    "EngineSource",
    "ScopeHolder",
    "allowed",
    "request_grant",
    "tokens_scopes",
]

logger = logging.getLogger("prime_memory_folding.mcp.server")

#: The engine, or a zero-argument callable that opens it on first use.
EngineSource = Union["MemoryEngine", Callable[[], "MemoryEngine"]]


class EngineHolder:
    """Opens the engine once, on first use or in the background, from any thread.

    The engine's messages then name the store :data:`~.mcp_privacy.STORE_NAME`,
    and :attr:`location` knows what else names it, to mask (docs/security.md).
    """

    def __init__(self, source: EngineSource) -> None:
        self._lock = threading.Lock()
        self._engine: MemoryEngine | None = None
        #: What names the store's location, once it is open.
        self.location: Location | None = None
        if callable(source) and not hasattr(source, "store"):
            self._open: Callable[[], MemoryEngine] | None = source
        else:
            self._open = None
            self._adopt(source)  # type: ignore[arg-type]

    def _adopt(self, engine: MemoryEngine) -> None:
        self.location = Location.of(engine)
        engine.display_path = STORE_NAME
        self._engine = engine

    def ready(self) -> MemoryEngine | None:
        """The engine if it is open already, without waiting."""
        return self._engine

    def get(self) -> MemoryEngine:
        if self._engine is not None:
            return self._engine
        with self._lock:
            if self._engine is None:
                assert self._open is not None
                try:
                    self._adopt(self._open())
                except PrimeMemoryError as exc:
                    # Not cached: the next call tries again, e.g. once a lock is released.
                    # The reason names the store, so it goes to the server's log only.
                    logger.warning("could not open the memory store: %s", exc)
                    raise ToolError(
                        f"could not open the memory store ({type(exc).__name__}; the server's "
                        "log says why); retry, and tell the server's operator if it keeps failing"
                    ) from exc
            assert self._engine is not None
            return self._engine

    def warm_up(self) -> None:
        """Open the engine in a daemon thread, so the first tool call does not wait."""
        if self._engine is not None or self._open is None:
            return

        def run() -> None:
            try:
                self.get()
            except ToolError:
                pass  # a known store problem, logged with its path and fix by get()
            except Exception:
                logger.warning("opening the memory store in the background failed", exc_info=True)

        threading.Thread(target=run, name="prime-memory-open", daemon=True).start()


class ScopeHolder:
    """The server's current scope: resolved at start-up, and from MCP roots at most once.

    Roots are asked for only when start-up found no project and the client
    offers them: the 2026-07-28 protocol deprecates roots, so they are a
    fallback, never a source that overrides the server's own resolution.
    """

    #: How long to wait for a client's answer to roots/list.
    ROOTS_TIMEOUT_S = 5.0

    def __init__(self, resolution: ScopeResolution | None) -> None:
        self._resolution = resolution
        self._asked = resolution is None

    def known(self) -> ScopeResolution | None:
        """The resolution as it stands, without asking the client."""
        return self._resolution

    async def get(self, ctx: Context | None) -> ScopeResolution | None:
        resolution = self._resolution
        if self._asked or resolution is None or resolution.source != "default" or ctx is None:
            return resolution
        self._asked = True
        folders = await _client_roots(ctx, self.ROOTS_TIMEOUT_S)
        if folders:
            try:
                found = scope_rules.resolve(
                    None, user=resolution.user.partition(":")[2], roots=folders
                )
            except PrimeMemoryError:
                return resolution
            if found.source == "roots":
                self._resolution = found
        return self._resolution


async def _client_roots(ctx: Context, timeout: float) -> list[str]:
    """The local folders among the client's MCP roots; empty when it offers none."""
    from urllib.parse import unquote, urlsplit

    try:
        capabilities = ctx.client_capabilities
        if capabilities is None or getattr(capabilities, "roots", None) is None:
            return []
        with anyio.fail_after(timeout), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # roots are deprecated; that is why they come last
            result = await ctx.session.list_roots()
    except Exception:
        logger.debug("the client did not list its roots", exc_info=True)
        return []
    folders = []
    for root in result.roots:
        parts = urlsplit(str(root.uri))
        if parts.scheme == "file" and parts.path:
            folders.append(unquote(parts.path))
    return folders


def request_grant() -> access.Grant | None:
    """The grant of the HTTP request being served, when it carried a per-user token."""
    identity = REQUEST.get()
    if identity is None or identity.token is None:
        return None
    return access.Grant.of(identity.token, identity.project)


def allowed(check: Callable[[], None]) -> None:
    """Run a grant's check; a refusal becomes the tool's error result."""
    try:
        check()
    except InvalidInput as exc:
        raise ToolError(f"{type(exc).__name__}: {exc}") from exc


def tokens_scopes(grant: access.Grant) -> bool:
    """Whether the grant's token is limited to some scopes (it holds no ``*``)."""
    return scope_rules.ALL not in grant.token.scopes


class Access:
    """How a tool reaches the engine, and as whom.

    Args:
        holder: the engine, opened once.
        scopes: the server's own scope resolution.
    """

    def __init__(self, holder: EngineHolder, scopes: ScopeHolder) -> None:
        self._holder = holder
        self._scopes = scopes
        self._slow_calls = 0  # slow calls under way; counted on the event loop only

    async def call(self, fn: Callable[[MemoryEngine], Any], *, slow: bool = False) -> Any:
        """``fn(engine)``: on the event loop when quick, in a worker thread when ``slow``."""
        # Quick engine calls run on the event loop: a worker-thread hop per call
        # costs more than the call itself. Opening the store and folding can
        # take seconds, so those run in a worker thread. While one does, it may
        # hold the engine's lock: quick calls then wait for it in worker threads
        # too, so that the loop keeps serving (and a fold can report progress
        # through it) instead of blocking on the lock. On a PostgreSQL store
        # every call waits on the network, and on a database that is down for
        # up to the connection timeout, so every call runs in a worker thread.
        # So does every call over HTTP: a long query of one token then holds
        # the engine's lock but not the loop, and another token's call, which
        # reaches the lock while it runs, goes next (mcp_http.CallTurns keeps
        # each token to one call under way, so it cannot queue more).
        try:
            ready = self._holder.ready()
            engine = (
                ready if ready is not None else await anyio.to_thread.run_sync(self._holder.get)
            )
            if (
                not slow
                and not self._slow_calls
                and REQUEST.get() is None
                and pushdown_of(engine.storage) is None
            ):
                return fn(engine)
            self._slow_calls += 1 if slow else 0
            try:
                return await anyio.to_thread.run_sync(fn, engine)
            finally:
                self._slow_calls -= 1 if slow else 0
        except PrimeMemoryError as exc:
            raise client_error(exc, self._holder.location) from exc

    async def resolution_of(self, ctx: Context | None) -> ScopeResolution | None:
        """This request's scopes: its token's and project header's over HTTP, else the server's."""
        identity = REQUEST.get()
        if identity is not None and identity.token is not None:
            return access.Grant.of(identity.token, identity.project).resolution
        resolution = await self._scopes.get(ctx)
        if identity is not None and identity.project is not None:
            user = resolution.user if resolution is not None else scope_rules.user_scope()
            return ScopeResolution(
                current=identity.project,
                user=user,
                source="header",
                reason="from the request's project header",
            )
        return resolution

    async def current_scope(self, ctx: Context | None) -> str | None:
        """Where a write goes: the request's scope, or None to leave it to the engine."""
        resolution = await self.resolution_of(ctx)
        return None if resolution is None else resolution.current

    async def visible_scopes(
        self, ctx: Context | None, wanted: list[str] | None = None
    ) -> list[str] | None:
        """What a read sees: ``wanted``, else the request's default; narrowed by its token."""
        if wanted is None:
            resolution = await self.resolution_of(ctx)
            wanted = None if resolution is None else list(resolution.visible)
        grant = request_grant()
        if grant is None:
            return wanted
        held: list[str] = []
        if wanted is None or any(name.strip() == scope_rules.ALL for name in wanted):
            held = list(await self.call(lambda e: e.scope_counts()))
        try:
            return access.readable(grant.token, wanted, held)
        except InvalidInput as exc:
            raise ToolError(f"{type(exc).__name__}: {exc}") from exc

    async def writable(self, ctx: Context | None, scope: str | None) -> str | None:
        """The scope a write goes to, refused when the request's token may not write there."""
        where = scope or await self.current_scope(ctx)
        grant = request_grant()
        if grant is not None:
            target = where or grant.resolution.current
            allowed(lambda: grant.check_write(scope_rules.normalise_scope(target)))
        return where

    def guard_record(self, engine: MemoryEngine, record_id: str, write: bool) -> None:
        """Refuse to touch a record whose scope the request's token does not allow.

        A record outside the token's scopes answers exactly as one that does
        not exist (:func:`~.mcp_privacy.unknown_record`), after the same one
        look-up, so that no guess at another scope's ids can be confirmed.
        A read-only token's write is refused before any look-up.

        Raises:
            InvalidInput: a write through a read-only token.
            InvalidRecordId: a malformed id.
            NotFound: no record has the id, or the token may not see it.
        """
        grant = request_grant()
        if grant is None:
            return
        if write and grant.token.read_only:
            grant.check_write(grant.resolution.current)
        rid = parse_record_id(record_id)
        try:
            scope = engine.get(rid).scope
        except NotFound:
            scope = None
        if scope is None or not access.allows(grant.token, scope):
            raise unknown_record(rid)
