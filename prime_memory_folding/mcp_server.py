"""The MCP server: a thin adapter from seven tools to :class:`MemoryEngine` calls.

Run it on stdio (what IDEs and agent hosts launch)::

    prime-memory-mcp                      # or: python3 -m prime_memory_folding.mcp_server
    prime-memory-mcp --store ./team.db

or on streamable HTTP, loopback only unless a bearer token is set::

    prime-memory-mcp --transport streamable-http --port 8765

Over HTTP, a request with a per-user token from the store acts as that user,
within the token's scopes (see ``prime_memory_folding.tokens`` and docs/team.md).

Every tool returns a pydantic model, which clients get as ``structuredContent``
(and as JSON text). ``tools/list`` advertises compact input schemas and no
output schemas: a host sends the list to the model in every session, and it
stays under 2,000 tokens (``benchmarks/tools_list.py``). Engine errors become
tool results with ``isError`` set and a message that says what to fix; protocol
errors stay JSON-RPC errors.

The engine (and numpy) load lazily: the server answers ``initialize`` first and
opens the store in the background, or on the first tool call.
"""

from __future__ import annotations

import argparse
import inspect
import logging
import os
import sys
import threading
import warnings
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Annotated, Any, Union

import anyio
import anyio.from_thread
import anyio.to_thread
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, ToolAnnotations
from mcp_types import Tool as ToolDefinition
from pydantic import Field, ValidationError

from . import scopes as scope_rules
from . import tokens as access
from .budget import count_tokens, fit
from .errors import InvalidInput, PrimeMemoryError
from .mcp_models import (
    EncodeOutput,
    FoldOutput,
    ForgetOutput,
    QueryHit,
    QueryOutput,
    RecordOutput,
    ScopeOutput,
    StatsOutput,
    StoreOutput,
    UpdateOutput,
    compact_schema,
    record_output,
    stats_output,
)
from .mcp_transport import REQUEST
from .records import MAX_CONTENT_CHARS
from .scopes import ScopeResolution
from .storage import is_postgres_url

if TYPE_CHECKING:
    from mcp.server.context import CallNext, HandlerResult, ServerRequestContext

    from .engine import MemoryEngine
    from .records import Hit
    from .storage.base import TokenRow

__all__ = [
    "EncodeOutput",
    "FoldOutput",
    "QueryHit",
    "QueryOutput",
    "RecordOutput",
    "ScopeOutput",
    "StatsOutput",
    "StoreOutput",
    "build_server",
    "main",
]

logger = logging.getLogger(__name__)

SERVER_NAME = "prime-memory-folding"

INSTRUCTIONS = """\
Long-term memory that survives across sessions. Before answering a question that may
depend on earlier work, call prime_memory_query with the domain and tags that fit. When
you learn a durable fact, decision or preference, save it with prime_memory_store. Use
the same domain and tag names every time: stats lists the ones already in use. The server
knows which project it serves: memories go to that project and queries see it, your user
scope and global, without any scope argument."""

#: The engine, or a zero-argument callable that opens it on first use.
#: The token budget of a query's answer unless the agent asks for another.
DEFAULT_QUERY_TOKENS = 1_500
#: The smallest budget a query's answer takes: one hit's fields and a few words.
MIN_QUERY_TOKENS = 300
#: A filter may forget this many memories without a confirm_count.
FORGET_UNCONFIRMED = 3

EngineSource = Union["MemoryEngine", Callable[[], "MemoryEngine"]]


# -- the engine, opened once -------------------------------------------------------


class _EngineHolder:
    """Opens the engine once, on first use or in the background, from any thread."""

    def __init__(self, source: EngineSource) -> None:
        self._lock = threading.Lock()
        self._engine: MemoryEngine | None = None
        if callable(source) and not hasattr(source, "store"):
            self._open: Callable[[], MemoryEngine] | None = source
        else:
            self._open = None
            self._engine = source  # type: ignore[assignment]

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
                    self._engine = self._open()
                except PrimeMemoryError as exc:
                    # Not cached: the next call tries again, e.g. once a lock is released.
                    raise ToolError(f"could not open the memory store: {exc}") from exc
            return self._engine

    def warm_up(self) -> None:
        """Open the engine in a daemon thread, so the first tool call does not wait."""
        if self._engine is not None or self._open is None:
            return

        def run() -> None:
            try:
                self.get()
            except ToolError as exc:
                # A known store problem: its message names the path and the fix.
                logger.warning("%s", exc)
            except Exception:
                logger.warning("opening the memory store in the background failed", exc_info=True)

        threading.Thread(target=run, name="prime-memory-open", daemon=True).start()


class _ScopeHolder:
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


class _MemoryServer(MCPServer):
    """MCPServer that answers an unknown tool or prompt name with -32602.

    The 2025-11-25 spec lists unknown tools among protocol errors, while bad
    arguments and execution failures stay ``isError`` tool results, which say
    what to fix.
    """

    tool_names: frozenset[str] = frozenset()
    #: What the HTTP gate asks the store about per-user tokens (set by build_server).
    token_check: _StoreTokens | None = None

    async def list_tools(self) -> list[ToolDefinition]:
        """The tools as advertised: compact input schemas, and no output schemas.

        Every word here reaches the model in every session. An output schema
        would more than double the list, and the spec makes it optional: calls
        still return ``structuredContent``, validated against the tool's model.
        """
        return [
            tool.model_copy(
                update={"input_schema": compact_schema(tool.input_schema), "output_schema": None}
            )
            for tool in await super().list_tools()
        ]

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        if name not in self.tool_names:
            raise MCPError(
                code=INVALID_PARAMS,
                message=f"Unknown tool: {name}; call tools/list for the available tools",
            )
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            if isinstance(exc.__cause__, ValidationError):
                raise ToolError(_explain_arguments(name, exc.__cause__)) from exc.__cause__
            raise

    async def get_prompt(
        self, name: str, arguments: dict[str, Any] | None = None, context: Any = None
    ) -> Any:
        # The prompts spec answers an unknown name or a missing argument with -32602.
        try:
            return await super().get_prompt(name, arguments, context)
        except ValueError as exc:
            raise MCPError(code=INVALID_PARAMS, message=str(exc)) from exc


def _explain_arguments(tool: str, error: ValidationError) -> str:
    problems = []
    for item in error.errors(include_url=False):
        where = ".".join(str(part) for part in item["loc"]) or "arguments"
        problems.append(f"{where}: {item['msg']} (got {item.get('input')!r})")
    return f"Invalid arguments for {tool}: " + "; ".join(problems) + ". Fix them and call again."


def _annotations(
    title: str, *, read_only: bool, destructive: bool, idempotent: bool
) -> ToolAnnotations:
    return ToolAnnotations(
        title=title,
        read_only_hint=read_only,
        destructive_hint=destructive,
        idempotent_hint=idempotent,
        open_world_hint=False,
    )


Label = Annotated[str, Field(min_length=1, max_length=200)]
Tags = Annotated[
    list[str] | None,
    Field(description="Lower-case labels such as 'architecture' or 'bug'."),
]
Vector = Annotated[
    list[float] | None,
    Field(description="An embedding, as long as the store's other vectors."),
]


Scope = Annotated[
    str | None,
    Field(
        description="Leave this out for the current project. 'global' for a fact true in every "
        "project, the user scope (prime_memory_stats: user_scope) for a personal preference.",
        max_length=512,
    ),
]
Scopes = Annotated[
    list[str] | None,
    Field(
        description="Leave this out for the current project, user scope and global; ['*'] for all."
    ),
]


class _StoreTokens:
    """The HTTP gate's questions about tokens, answered by the engine's store."""

    def __init__(self, call: Callable[..., Any]) -> None:
        self._call = call

    async def verify(self, secret: str) -> TokenRow | None:
        row: TokenRow | None = await self._call(lambda e: e.verify_token(secret))
        return row

    async def required(self) -> bool:
        return bool(await self._call(lambda e: e.live_tokens()))


def _grant() -> access.Grant | None:
    """The grant of the HTTP request being served, when it carried a per-user token."""
    identity = REQUEST.get()
    if identity is None or identity.token is None:
        return None
    return access.Grant.of(identity.token, identity.project)


def _allowed(check: Callable[[], None]) -> None:
    """Run a grant's check; a refusal becomes the tool's error result."""
    try:
        check()
    except InvalidInput as exc:
        raise ToolError(f"{type(exc).__name__}: {exc}") from exc


def build_server(engine: EngineSource, scope: ScopeResolution | None = None) -> _MemoryServer:
    """Build the MCP server over ``engine``.

    Args:
        engine: a :class:`MemoryEngine`, or a zero-argument callable that opens
            one; the callable runs once, in the background after the client's
            ``initialize`` or on the first tool call, whichever comes first.
        scope: the scope the server resolved at start-up. When it found no
            project, the client's MCP roots are asked once, at the first call
            that needs the scope. None leaves the scope to the engine.
    """
    holder = _EngineHolder(engine)
    scope_holder = _ScopeHolder(scope)

    async def warm_after_handshake(
        ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        result = await call_next(ctx)
        if ctx.method in ("notifications/initialized", "server/discover"):
            holder.warm_up()
        return result

    server = _MemoryServer(
        SERVER_NAME,
        title="Prime Memory Folding",
        instructions=INSTRUCTIONS,
        version=_version(),
        log_level="WARNING",
        middleware=[warm_after_handshake],
    )

    def tool(hints: ToolAnnotations) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        def register(fn: Callable[..., Any]) -> Callable[..., Any]:
            server.add_tool(fn, description=inspect.cleandoc(fn.__doc__ or ""), annotations=hints)
            return fn

        return register

    slow_calls = 0  # slow calls under way; counted on the event loop only

    async def call(fn: Callable[[MemoryEngine], Any], *, slow: bool = False) -> Any:
        # Quick engine calls run on the event loop: a worker-thread hop per call
        # costs more than the call itself. Opening the store and folding can
        # take seconds, so those run in a worker thread. While one does, it may
        # hold the engine's lock: quick calls then wait for it in worker threads
        # too, so that the loop keeps serving (and a fold can report progress
        # through it) instead of blocking on the lock. On a PostgreSQL store
        # every call waits on the network, and on a database that is down for
        # up to the connection timeout, so every call runs in a worker thread.
        nonlocal slow_calls
        try:
            ready = holder.ready()
            engine = ready if ready is not None else await anyio.to_thread.run_sync(holder.get)
            if not slow and not slow_calls and not is_postgres_url(engine.path):
                return fn(engine)
            slow_calls += 1 if slow else 0
            try:
                return await anyio.to_thread.run_sync(fn, engine)
            finally:
                slow_calls -= 1 if slow else 0
        except PrimeMemoryError as exc:
            raise ToolError(f"{type(exc).__name__}: {exc}") from exc

    async def resolution_of(ctx: Context | None) -> ScopeResolution | None:
        """This request's scopes: its token's and project header's over HTTP, else the server's."""
        identity = REQUEST.get()
        if identity is not None and identity.token is not None:
            return access.Grant.of(identity.token, identity.project).resolution
        resolution = await scope_holder.get(ctx)
        if identity is not None and identity.project is not None:
            user = resolution.user if resolution is not None else scope_rules.user_scope()
            return ScopeResolution(
                current=identity.project,
                user=user,
                source="header",
                reason="from the request's project header",
            )
        return resolution

    async def current_scope(ctx: Context | None) -> str | None:
        """Where a write goes: the request's scope, or None to leave it to the engine."""
        resolution = await resolution_of(ctx)
        return None if resolution is None else resolution.current

    async def visible_scopes(
        ctx: Context | None, wanted: list[str] | None = None
    ) -> list[str] | None:
        """What a read sees: ``wanted``, else the request's default; narrowed by its token."""
        if wanted is None:
            resolution = await resolution_of(ctx)
            wanted = None if resolution is None else list(resolution.visible)
        grant = _grant()
        if grant is None:
            return wanted
        held: list[str] = []
        if wanted is None or any(name.strip() == scope_rules.ALL for name in wanted):
            held = list(await call(lambda e: e.stats().scopes))
        try:
            return access.readable(grant.token, wanted, held)
        except InvalidInput as exc:
            raise ToolError(f"{type(exc).__name__}: {exc}") from exc

    async def writable(ctx: Context | None, scope: str | None) -> str | None:
        """The scope a write goes to, refused when the request's token may not write there."""
        where = scope or await current_scope(ctx)
        grant = _grant()
        if grant is not None:
            target = where or grant.resolution.current
            _allowed(lambda: grant.check_write(scope_rules.normalise_scope(target)))
        return where

    def guard_record(engine: MemoryEngine, record_id: str, write: bool) -> None:
        """Refuse to touch a record whose scope the request's token does not allow."""
        grant = _grant()
        if grant is None:
            return
        if write and grant.token.read_only:
            grant.check_write(grant.resolution.current)
        grant.check_scope(engine.get(record_id).scope)

    server.token_check = _StoreTokens(call)

    @tool(_annotations("Encode an address", read_only=True, destructive=False, idempotent=True))
    async def prime_memory_encode(
        domain: Label,
        subdomain: Label = "general",
        tags: Tags = None,
        instance_key: Annotated[
            str | None, Field(description="A stable key that names one instance, e.g. a file path.")
        ] = None,
        scope: Scope = None,
        ctx: Context | None = None,
    ) -> EncodeOutput:
        """Show the 128-bit prime address a memory with these labels would get; stores nothing."""
        where = scope or await current_scope(ctx)
        encoded = await call(lambda e: e.encode(domain, subdomain, tags or (), instance_key, where))
        return EncodeOutput(
            address=str(encoded.address),
            address_hex=f"{encoded.address:032x}",
            record_id=encoded.record_id,
            domain_prime=encoded.domain_prime,
            subdomain_prime=encoded.subdomain_prime,
            concept_bucket=encoded.concept_bucket,
            instance_id=encoded.instance_id,
            provisional=encoded.provisional,
        )

    @tool(_annotations("Store a memory", read_only=False, destructive=False, idempotent=False))
    async def prime_memory_store(
        content: Annotated[
            str,
            Field(
                description=f"Not blank, no NUL, at most {MAX_CONTENT_CHARS:,} characters: "
                "split longer text."
            ),
        ],
        domain: Label = "memory",
        subdomain: Label = "general",
        tags: Tags = None,
        importance: Annotated[float, Field(ge=0.0, le=1.0)] = 0.5,
        vector: Vector = None,
        metadata: Annotated[
            dict[str, Any] | None, Field(description="Any JSON object, e.g. a source file or URL.")
        ] = None,
        scope: Scope = None,
        ctx: Context | None = None,
    ) -> StoreOutput:
        """Save a durable fact, decision or preference to long-term memory.

        Storing the same content and labels again reinforces that memory.
        """
        where = await writable(ctx, scope)
        grant = _grant()
        if grant is not None:
            metadata = {**(metadata or {}), access.CREATED_BY: grant.name}
        result = await call(
            lambda e: e.store_result(
                content,
                domain=domain,
                subdomain=subdomain,
                tags=tags or (),
                importance=importance,
                vector=vector,
                metadata=metadata,
                scope=where,
            )
        )
        return StoreOutput(created=result.created, record=record_output(result.record))

    @tool(_annotations("Query memories", read_only=True, destructive=False, idempotent=True))
    async def prime_memory_query(
        text: Annotated[str | None, Field(description="Words to rank by.")] = None,
        domain: Label | None = None,
        subdomain: Label | None = None,
        tags: Annotated[list[str] | None, Field(description="Every one of these tags.")] = None,
        any_tags: Annotated[
            list[str] | None, Field(description="At least one of these tags.")
        ] = None,
        exclude_tags: Annotated[list[str] | None, Field(description="None of these tags.")] = None,
        min_strength: Annotated[float, Field(ge=0.0, le=1.0)] = 0.0,
        vector: Vector = None,
        limit: Annotated[int, Field(ge=1, le=100)] = 10,
        include_vectors: Annotated[
            bool, Field(description="Return each hit's vector too.")
        ] = False,
        scopes: Scopes = None,
        since: Annotated[
            str | None,
            Field(description="Only memories stored or changed since: 2024-05-01, 7d, 2 weeks."),
        ] = None,
        until: Annotated[str | None, Field(description="Only those before it.")] = None,
        max_tokens: Annotated[
            int,
            Field(
                ge=MIN_QUERY_TOKENS,
                le=100_000,
                description="The answer's size in tokens; left_out counts hits that did not fit.",
            ),
        ] = DEFAULT_QUERY_TOKENS,
        ctx: Context | None = None,
    ) -> QueryOutput:
        """Recall memories, best first, before answering what may depend on earlier work.

        Gate by domain and tags; rank by text or vector.
        """
        seen = await visible_scopes(ctx, scopes)
        ranked = await call(
            lambda e: e.query(
                text=text,
                domain=domain,
                subdomain=subdomain,
                tags=tags or (),
                any_tags=any_tags or (),
                exclude_tags=exclude_tags or (),
                min_strength=min_strength,
                vector=vector,
                limit=limit,
                scopes=seen,
                since=since,
                until=until,
                reinforce=True,  # what an agent recalls stays strong
            )
        )

        def shown(hit: Hit) -> QueryHit:
            return QueryHit(
                record_id=hit.record.record_id,
                content=hit.record.content,
                domain=hit.record.domain,
                subdomain=hit.record.subdomain,
                tags=list(hit.record.tags),
                score=hit.score,
                score_parts=dict(hit.score_parts),
                strength=hit.record.strength,
                created_at=hit.record.created_at,
                updated_at=hit.record.updated_at,
                scope=hit.record.scope,
                vector=list(hit.record.vector)
                if include_vectors and hit.record.vector is not None
                else None,
            )

        # The hits fill what the answer's own fields leave of the budget, as the
        # SDK sends it (JSON indented by 2). The whole answer is then counted, and
        # refitted tighter in the rare case that joining the hits cost more.
        room = max_tokens - count_tokens(
            QueryOutput(
                count=limit, hits=[], tokens_used=max_tokens, left_out=limit
            ).model_dump_json(indent=2)
        )
        while True:
            fitted = fit(
                ranked, room, cost=lambda hit: count_tokens(shown(hit).model_dump_json(indent=2))
            )
            out = [shown(hit) for hit in fitted]
            answer = QueryOutput(
                count=len(out), hits=out, tokens_used=max_tokens, left_out=fitted.left_out
            )
            used = count_tokens(answer.model_dump_json(indent=2))
            if used <= max_tokens or room <= 1:
                answer.tokens_used = used
                return answer
            room -= used - max_tokens

    @tool(_annotations("Fold memories", read_only=False, destructive=True, idempotent=False))
    async def prime_memory_fold(
        ctx: Context,
        dry_run: Annotated[bool, Field(description="Only report what would change.")] = True,
        full: Annotated[
            bool,
            Field(description="Screen every memory, not only those changed since the last fold."),
        ] = False,
    ) -> FoldOutput:
        """Consolidate memory: decay strength, merge near-duplicates, archive what has faded."""
        grant = _grant()
        if grant is not None:
            if scope_rules.ALL not in grant.token.scopes:
                raise ToolError(
                    f"token {grant.name!r} may not fold: a fold sees every scope, and the token "
                    "is limited to " + ", ".join(grant.token.scopes)
                )
            if not dry_run:
                _allowed(lambda: grant.check_write(scope_rules.GLOBAL))

        def progress(step: str, done: int, total: int) -> None:
            # Runs in the fold's worker thread; a client that asked for progress
            # hears of each step. Best effort: a lost notification must not fail a fold.
            try:
                anyio.from_thread.run(ctx.report_progress, done, total, step)
            except Exception:
                logger.debug("could not report fold progress", exc_info=True)

        report = await call(
            lambda e: e.fold(dry_run=dry_run, progress=progress, full=full), slow=True
        )
        return FoldOutput(
            dry_run=report.dry_run,
            records_before=report.records_before,
            records_after=report.records_after,
            decayed=report.decayed,
            pruned=report.pruned,
            clustered=report.clustered,
            folded=report.folded,
            created=report.created,
            bytes_before=report.bytes_before,
            bytes_after=report.bytes_after,
            duration_s=report.duration_s,
            pruned_ids=list(report.pruned_ids),
            created_ids=list(report.created_ids),
            folded_from={key: list(ids) for key, ids in report.folded_from.items()},
        )

    @tool(_annotations("Memory statistics", read_only=True, destructive=False, idempotent=True))
    async def prime_memory_stats(ctx: Context | None = None) -> StatsOutput:
        """Count memories per domain, tag and scope, and say where new ones go and why.

        Call it to reuse existing domain and tag names.
        """
        return await stats_of(ctx)

    async def stats_of(ctx: Context | None) -> StatsOutput:
        resolution = await resolution_of(ctx) or await call(lambda e: e.whoami())
        out = stats_output(await call(lambda e: e.stats()), resolution)
        grant = _grant()
        if grant is not None:
            # A token sees the record counts of its own scopes only.
            out.scopes = {
                name: count
                for name, count in out.scopes.items()
                if access.allows(grant.token, name)
            }
            out.records = sum(out.scopes.values())
            out.visible_scopes = await visible_scopes(ctx) or []
        return out

    @tool(_annotations("Forget memories", read_only=False, destructive=True, idempotent=False))
    async def prime_memory_forget(
        record_id: str | None = None,
        domain: Label | None = None,
        subdomain: Label | None = None,
        tags: Annotated[list[str] | None, Field(description="Every one of these tags.")] = None,
        scopes: Scopes = None,
        confirm_count: Annotated[
            int | None,
            Field(
                ge=0,
                description=f"How many match, to forget more than {FORGET_UNCONFIRMED} by "
                "filter; a call without it says.",
            ),
        ] = None,
        ctx: Context | None = None,
    ) -> ForgetOutput:
        """Forget a wrong or outdated memory by record_id, or those a filter matches.

        They move to the archive, where a person can restore them.
        """
        has_filter = domain is not None or subdomain is not None or bool(tags)
        if (record_id is None) == (not has_filter):
            raise ToolError(
                "give either record_id or a filter (domain, subdomain, tags), not both or neither"
            )
        grant = _grant()
        if grant is not None and grant.token.read_only:
            _allowed(lambda: grant.check_write(grant.resolution.current))
        if record_id is not None:

            def forget_one(engine: MemoryEngine) -> Any:
                guard_record(engine, record_id, write=True)
                return engine.forget(record_id)

            record = await call(forget_one)
            return ForgetOutput(forgotten=1, record_ids=[record.record_id])
        seen = await visible_scopes(ctx, scopes)

        def forget_matching(engine: MemoryEngine) -> list[str]:
            ids = engine.match_ids(domain=domain, subdomain=subdomain, tags=tags or (), scopes=seen)
            if len(ids) > FORGET_UNCONFIRMED and confirm_count != len(ids):
                raise ToolError(
                    f"{len(ids)} memories match; nothing was forgotten. To forget them all, call "
                    f"again with confirm_count={len(ids)}"
                )
            if ids:
                engine.archive(ids, detail="forgotten by filter")
            return ids

        ids = await call(forget_matching)
        return ForgetOutput(forgotten=len(ids), record_ids=ids[:100])

    @tool(_annotations("Correct a memory", read_only=False, destructive=False, idempotent=True))
    async def prime_memory_update(
        record_id: str,
        content: Annotated[
            str | None, Field(description="The corrected text.", max_length=MAX_CONTENT_CHARS)
        ] = None,
        tags: Annotated[list[str] | None, Field(description="The new tags, all of them.")] = None,
        importance: Annotated[float | None, Field(ge=0.0, le=1.0)] = None,
        scope: Annotated[str | None, Field(description="Move it to this scope.")] = None,
    ) -> UpdateOutput:
        """Correct a memory in place; its id stays.

        The version it replaces is kept as history.
        """
        changes: dict[str, Any] = {
            name: value
            for name, value in (
                ("content", content),
                ("tags", tags),
                ("importance", importance),
                ("scope", scope),
            )
            if value is not None
        }
        if not changes:
            raise ToolError("nothing to change: give content, tags, importance or scope")

        grant = _grant()
        if grant is not None and scope is not None:
            _allowed(lambda: grant.check_write(scope_rules.normalise_scope(scope)))

        def correct(engine: MemoryEngine) -> UpdateOutput:
            guard_record(engine, record_id, write=True)
            record = engine.update(record_id, **changes)
            return UpdateOutput(
                record=record_output(record), versions=len(engine.history(record.record_id))
            )

        result: UpdateOutput = await call(correct)
        return result

    server.tool_names = frozenset(
        [
            "prime_memory_encode",
            "prime_memory_store",
            "prime_memory_query",
            "prime_memory_fold",
            "prime_memory_stats",
            "prime_memory_forget",
            "prime_memory_update",
        ]
    )

    @server.resource(
        "memory://stats",
        name="stats",
        title="Memory statistics",
        description="The same summary as prime_memory_stats, as JSON.",
        mime_type="application/json",
    )
    async def stats_resource() -> str:
        return (await stats_of(None)).model_dump_json()

    @server.resource(
        "memory://scope",
        name="scope",
        title="The current scope",
        description="Where memories go, what queries see by default, and how the server "
        "found it, as JSON.",
        mime_type="application/json",
    )
    async def scope_resource() -> str:
        if REQUEST.get() is not None:
            resolution = await resolution_of(None) or await call(lambda e: e.whoami())
        else:
            resolution = scope_holder.known() or await call(lambda e: e.whoami())
        shown = ScopeOutput(**resolution.as_dict())
        if _grant() is not None:
            shown.visible = await visible_scopes(None) or []
        return shown.model_dump_json()

    @server.resource(
        "memory://record/{record_id}",
        name="record",
        title="One memory",
        description="A stored memory by its 32-hex-digit record id, as JSON.",
        mime_type="application/json",
    )
    async def record_resource(record_id: str) -> str:
        def fetch(engine: MemoryEngine) -> Any:
            guard_record(engine, record_id, write=False)
            return engine.get(record_id)

        return record_output(await call(fetch)).model_dump_json()

    @server.prompt(
        name="recall",
        title="Recall before answering",
        description="Ask the assistant to look up what memory holds on a topic before it answers.",
    )
    def recall(topic: str) -> str:
        return (
            f"Before answering, call prime_memory_stats to see which domains and tags exist, then "
            f"prime_memory_query for what is known about: {topic}. Answer from those memories, say "
            f"which ones you used, and store any new durable fact with prime_memory_store."
        )

    return server


def _version() -> str:
    from . import __version__

    return __version__


# -- command line ------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="prime-memory-mcp",
        description="Serve a Prime Memory Folding store over the Model Context Protocol.",
    )
    parser.add_argument(
        "--store",
        metavar="PATH|URL",
        help="the store: a file or a postgresql:// URL (default: $PRIME_MEMORY_STORE, else "
        "$PRIME_MEMORY_HOME/memory.db, else the user data folder)",
    )
    parser.add_argument(
        "--scope",
        metavar="SCOPE",
        help="the current scope, where memories go: global, user:NAME, project:ID, ... "
        "(default: $PRIME_MEMORY_SCOPE, else the project the server runs in)",
    )
    parser.add_argument(
        "--project",
        metavar="DIR",
        help="the project folder whose scope is current, for clients that start servers "
        "outside it (e.g. --project ${workspaceFolder}); default: $CLAUDE_PROJECT_DIR, "
        "else the git repository of the working directory",
    )
    parser.add_argument("--transport", choices=["stdio", "streamable-http"], default="stdio")
    parser.add_argument(
        "--host", default="127.0.0.1", help="HTTP bind address (default: 127.0.0.1)"
    )
    parser.add_argument(
        "--port", type=int, default=8765, help="HTTP port; 0 picks a free one (default: 8765)"
    )
    parser.add_argument(
        "--token",
        help="a shared bearer token HTTP requests may carry (default: $PRIME_MEMORY_TOKEN); "
        "with one set, or while the store holds a live per-user token (prime-memory token "
        "add), every request must carry one; one of the two is required to bind anything "
        "but loopback",
    )
    parser.add_argument(
        "--allowed-host",
        action="append",
        default=[],
        metavar="HOST[:PORT]",
        help="an extra Host header value to accept over HTTP, e.g. memory.lan:8765 (repeatable)",
    )
    parser.add_argument(
        "--allowed-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="an extra browser Origin to accept over HTTP (repeatable)",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the server until the client disconnects (stdio) or it is interrupted (HTTP)."""
    args = _parser().parse_args(argv)
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="%(name)s: %(message)s")
    from . import mcp_transport

    token = args.token if args.token is not None else os.environ.get("PRIME_MEMORY_TOKEN") or None
    http = args.transport == "streamable-http"
    try:
        resolution = scope_rules.resolve(args.scope, project=args.project)
    except PrimeMemoryError as exc:
        print(f"prime-memory-mcp: {exc}", file=sys.stderr)
        return 2
    logger.info("scope %s: %s", resolution.current, resolution.reason)
    opened: list[MemoryEngine] = []

    def open_engine() -> MemoryEngine:
        from .engine import MemoryEngine

        opened.append(MemoryEngine(args.store, scope=resolution))
        return opened[-1]

    source: EngineSource = open_engine
    if http and mcp_transport.http_bind_problem(args.host, token):
        # Beyond loopback without the shared token: only the store's own tokens may open it.
        try:
            source = open_engine()
            live = bool(source.live_tokens())
        except PrimeMemoryError as exc:
            print(f"prime-memory-mcp: {exc}", file=sys.stderr)
            return 2
        problem = mcp_transport.http_bind_problem(args.host, token, store_tokens=live)
        if problem:
            print(f"prime-memory-mcp: {problem}", file=sys.stderr)
            source.close()
            return 2
    server = build_server(source, resolution)
    try:
        if args.transport == "stdio":
            mcp_transport.run_stdio(server)
        else:
            mcp_transport.run_http(
                server,
                host=args.host,
                port=args.port,
                token=token,
                allowed_hosts=args.allowed_host,
                allowed_origins=args.allowed_origin,
                tokens=server.token_check,
            )
    except KeyboardInterrupt:
        pass
    finally:
        for engine in opened:
            engine.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
