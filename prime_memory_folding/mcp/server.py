"""The MCP server: a thin adapter from eight tools to :class:`MemoryEngine` calls.

Run it on stdio (what IDEs and agent hosts launch)::

    prime-memory-mcp                      # or: python3 -m prime_memory_folding.mcp.server
    prime-memory-mcp --store ./team.db

or on streamable HTTP, loopback only unless a bearer token is set::

    prime-memory-mcp --transport streamable-http --port 8765

Over HTTP, a request with a per-user token from the store acts as that user,
within the token's scopes (see ``prime_memory_folding.engine.tokens`` and docs/team.md).

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

import difflib
import inspect
import logging
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, cast

import anyio
import anyio.from_thread
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import (
    ResourceError,
    ResourceNotFoundError,
    ToolError,
    UnexpectedResourceError,
)
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, ToolAnnotations
from mcp_types import Tool as ToolDefinition
from pydantic import Field, ValidationError

from ..core import scopes as scope_rules
from ..core.address import parse_record_id
from ..core.filters import Filters
from ..core.places import default_store, default_store_path
from ..core.records import MAX_CONTENT_CHARS, Restatement
from ..core.scopes import ScopeResolution
from ..engine import tokens as access
from ..engine.budget import count_tokens, fit
from ..errors import InvalidRecordId, NotFound, PrimeMemoryError
from ..storage import is_postgres_url
from ..storage.pg_connect import redact
from .access import (
    Access,
    EngineHolder,
    EngineSource,
    ScopeHolder,
    allowed,
    request_grant,
    tokens_scopes,
)
from .args import parser
from .models import (
    CitationOutput,
    EncodeOutput,
    FoldOutput,
    ForgetOutput,
    QueryHit,
    QueryOutput,
    RecordOutput,
    ReinforceOutput,
    ScopeOutput,
    StatsOutput,
    StoreOutput,
    UpdateOutput,
    compact_schema,
    possible_supersessions,
    record_output,
    stats_output,
)
from .transport import REQUEST

if TYPE_CHECKING:
    from mcp.server.context import CallNext, HandlerResult, ServerRequestContext

    from ..core.records import Hit
    from ..engine.facade import MemoryEngine

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
scope and global, without any scope argument. Queries change nothing: pass the ids of the
memories you used to prime_memory_reinforce, so that they stay strong."""

#: The token budget of a query's answer unless the agent asks for another.
DEFAULT_QUERY_TOKENS = 1_500
#: The smallest budget a query's answer takes: one hit's fields and a few words.
MIN_QUERY_TOKENS = 300
#: A filter may forget this many memories without a confirm_count.
FORGET_UNCONFIRMED = 3


class _MemoryServer(MCPServer):
    """MCPServer that answers an unknown tool or prompt name with -32602.

    The 2025-11-25 spec lists unknown tools among protocol errors, while bad
    arguments and execution failures stay ``isError`` tool results, which say
    what to fix.
    """

    tool_names: frozenset[str] = frozenset()

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
        schema = self._tool_input_schema(name) or {}
        takes = list(schema.get("properties", {}))
        unknown = [key for key in arguments if key not in takes]
        if unknown:
            # Pydantic would drop them silently: a misspelt filter would widen a
            # query, or a misspelt label be lost from a stored memory.
            raise ToolError(_explain_unknown(name, unknown, takes))
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            if isinstance(exc.__cause__, ValidationError):
                raise ToolError(_explain_arguments(name, exc.__cause__)) from exc.__cause__
            raise

    async def read_resource(self, uri: Any, context: Any = None) -> Any:
        # The SDK answers an unknown URI with a bare "Unknown resource", and a
        # crash with "Error creating resource from template" plus a traceback
        # in the log. Say what this server offers, and log a crash in one line.
        shown = str(uri)[:200]
        try:
            return await super().read_resource(uri, context)
        except UnexpectedResourceError as exc:
            cause = exc.__cause__ or exc
            logger.warning("reading %s failed: %s: %r", shown, type(cause).__name__, str(cause))
            raise ResourceError(
                f"could not read {shown} ({type(cause).__name__}; the server's log says why); "
                "retry, and tell the server's operator if it keeps failing"
            ) from None
        except ResourceNotFoundError as exc:
            if not str(exc).startswith("Unknown resource"):
                raise
            offered = [str(r.uri) for r in await self.list_resources()]
            offered += [t.uri_template for t in await self.list_resource_templates()]
            raise ResourceNotFoundError(
                f"no resource {shown}; this server reads " + ", ".join(offered)
            ) from None

    async def get_prompt(
        self, name: str, arguments: dict[str, Any] | None = None, context: Any = None
    ) -> Any:
        # The prompts spec answers an unknown name or a missing argument with -32602.
        try:
            return await super().get_prompt(name, arguments, context)
        except ValueError as exc:
            raise MCPError(code=INVALID_PARAMS, message=str(exc)) from exc


def _explain_unknown(tool: str, unknown: list[str], takes: list[str]) -> str:
    named = []
    for key in unknown[:10]:  # a hostile call may send thousands, each of any length
        close = difflib.get_close_matches(key, takes, n=1)
        named.append(f"{key[:64]!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
    if len(unknown) > 10:
        named.append(f"and {len(unknown) - 10} more")
    return (
        f"Unknown argument{'s' if len(unknown) > 1 else ''} for {tool}: {', '.join(named)}; "
        f"it takes {', '.join(takes) if takes else 'no arguments'}. Nothing was done; "
        "call again with those names."
    )


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
    Field(description="As long as the store's other vectors."),
]


Scope = Annotated[
    str | None,
    Field(
        description="Leave this out for the current project; 'global' if true everywhere; "
        "stats' user_scope if personal.",
        max_length=512,
    ),
]
Scopes = Annotated[
    list[str] | None,
    Field(description="Leave this out for the project, user and global scopes; ['*']: all."),
]
#: The same as Scope and Scopes, for tools that say it second (the list says each thing once).
SameScope = Annotated[str | None, Field(description="As in prime_memory_store.", max_length=512)]
SameScopes = Annotated[list[str] | None, Field(description="As in prime_memory_query.")]
SameVector = Annotated[list[float] | None, Field(description="As in prime_memory_store.")]


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
    holder = EngineHolder(engine)
    scope_holder = ScopeHolder(scope)

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

    # How each tool reaches the engine, and the scopes its request writes to and reads.
    reach = Access(holder, scope_holder)
    call, resolution_of = reach.call, reach.resolution_of
    visible_scopes = reach.visible_scopes
    writable, guard_record = reach.writable, reach.guard_record

    @tool(_annotations("Encode an address", read_only=True, destructive=False, idempotent=True))
    async def prime_memory_encode(
        domain: Label,
        subdomain: Label = "general",
        tags: list[str] | None = None,
        instance_key: Annotated[
            str | None, Field(description="Names one instance, e.g. a file path.")
        ] = None,
        scope: SameScope = None,
        ctx: Context | None = None,
    ) -> EncodeOutput:
        """The 128-bit prime address a memory with these labels would get; stores nothing."""
        where = await writable(ctx, scope)  # a token may encode only where it may store
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
            Field(description=f"At most {MAX_CONTENT_CHARS:,} characters: split longer text."),
        ],
        domain: Label = "memory",
        subdomain: Label = "general",
        tags: Tags = None,
        importance: Annotated[float, Field(ge=0.0, le=1.0)] = 0.5,
        vector: Vector = None,
        metadata: Annotated[
            dict[str, Any] | None, Field(description="Any JSON object, e.g. a URL.")
        ] = None,
        scope: Scope = None,
        session: Annotated[
            str | None,
            Field(description="The conversation it belongs to (its memories share context)."),
        ] = None,
        cites: Annotated[
            list[dict[str, Any]] | None,
            Field(
                description="Code it is about: [{path, lines '70-95' or symbol, commit}], "
                "repo-relative."
            ),
        ] = None,
        supersedes: Annotated[
            str | None, Field(description="Id of an older memory this replaces.")
        ] = None,
        ctx: Context | None = None,
    ) -> StoreOutput:
        """Save a durable fact, decision or preference to long-term memory.

        Storing the same content and labels again reinforces that memory.
        """
        where = await writable(ctx, scope)
        grant = request_grant()
        if grant is not None:
            metadata = {**(metadata or {}), access.CREATED_BY: grant.name}
        repo = None
        if cites:
            # Paths are relative to the project's repository: the one the client's
            # roots named, when they did, else the engine's own (its scope's folder).
            resolution = await resolution_of(ctx)
            repo = None if resolution is None else resolution.folder

        def save(engine: MemoryEngine) -> tuple[Any, list[Restatement]]:
            if supersedes is not None:
                guard_record(engine, supersedes, write=True)
            stored = engine.store_result(
                content,
                domain=domain,
                subdomain=subdomain,
                tags=tags or (),
                importance=importance,
                vector=vector,
                metadata=metadata,
                scope=where,
                session=session,
                cites=cites,
                repo=repo,
                supersedes=supersedes,
            )
            if supersedes is not None:
                return stored, []
            return stored, engine.possibly_supersedes(stored.record.record_id)

        result, hints = await call(save)
        return StoreOutput(
            created=result.created,
            record=record_output(result.record),
            superseded=None if supersedes is None else parse_record_id(supersedes),
            possibly_supersedes=possible_supersessions(hints),
        )

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
        vector: SameVector = None,
        limit: Annotated[int, Field(ge=1, le=100)] = 10,
        include_vectors: Annotated[
            bool, Field(description="Return each hit's vector too.")
        ] = False,
        scopes: Scopes = None,
        since: Annotated[
            str | None,
            Field(description="Stored or changed since: 2024-05-01, 7d."),
        ] = None,
        until: Annotated[str | None, Field(description="Only before it.")] = None,
        as_of: Annotated[str | None, Field(description="What was valid then; as since.")] = None,
        max_tokens: Annotated[
            int,
            Field(
                ge=MIN_QUERY_TOKENS,
                le=100_000,
                description="Answer size; left_out: hits that did not fit.",
            ),
        ] = DEFAULT_QUERY_TOKENS,
        ctx: Context | None = None,
    ) -> QueryOutput:
        """Recall memories, best first, before answering what may depend on earlier work.

        Gate by domain and tags; rank by text or vector.
        """
        seen = await visible_scopes(ctx, scopes)

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
                session=hit.record.session,
                vector=list(hit.record.vector)
                if include_vectors and hit.record.vector is not None
                else None,
                citations=[
                    CitationOutput(path=c.path, state=c.state, lines=c.lines, detail=c.detail)
                    for c in hit.citations
                ]
                or None,
            )

        def answer(ranked: list[Hit]) -> QueryOutput:
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
                    ranked,
                    room,
                    cost=lambda hit: count_tokens(shown(hit).model_dump_json(indent=2)),
                )
                out = [shown(hit) for hit in fitted]
                answered = QueryOutput(
                    count=len(out), hits=out, tokens_used=max_tokens, left_out=fitted.left_out
                )
                used = count_tokens(answered.model_dump_json(indent=2))
                if used <= max_tokens or room <= 1:
                    answered.tokens_used = used
                    return answered
                room -= used - max_tokens

        def ask(engine: MemoryEngine) -> QueryOutput:
            gates = Filters(
                domain=domain,
                subdomain=subdomain,
                tags=tags or (),
                any_tags=any_tags or (),
                exclude_tags=exclude_tags or (),
                min_strength=min_strength,
                scopes=seen,
                since=since,
                until=until,
            )
            # Writes nothing: what an agent used, prime_memory_reinforce counts.
            return answer(
                engine.query(text=text, filters=gates, vector=vector, limit=limit, as_of=as_of)
            )

        # The answer is fitted where the query ran (a worker thread over HTTP):
        # counting a large answer's tokens takes a while, and the event loop
        # serves every other caller meanwhile.
        return cast(QueryOutput, await call(ask))

    @tool(_annotations("Fold memories", read_only=False, destructive=True, idempotent=False))
    async def prime_memory_fold(
        ctx: Context,
        dry_run: Annotated[bool, Field(description="Only report what would change.")] = True,
        full: Annotated[
            bool,
            Field(description="Screen all, not only what changed since the last fold."),
        ] = False,
    ) -> FoldOutput:
        """Consolidate memory: decay strength, merge near-duplicates, archive what has faded."""
        grant = request_grant()
        if grant is not None:
            if scope_rules.ALL not in grant.token.scopes:
                raise ToolError(
                    f"token {grant.name!r} may not fold: a fold sees every scope, and the token "
                    "is limited to " + ", ".join(grant.token.scopes)
                )
            if not dry_run:
                allowed(lambda: grant.check_write(scope_rules.GLOBAL))

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
            stale=report.stale,
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
        """Count memories per domain, tag and scope; say where new ones go and why.

        Reuse its domain and tag names.
        """
        return await stats_of(ctx)

    async def stats_of(ctx: Context | None) -> StatsOutput:
        resolution = await resolution_of(ctx) or await call(lambda e: e.whoami())
        grant = request_grant()
        mine: list[str] | None = None  # the scopes counted, when the token limits them
        if grant is None or not tokens_scopes(grant):
            out = stats_output(await call(lambda e: e.stats()), resolution)
        else:
            # A token limited to some scopes counts what they hold, and only that:
            # their records, the labels used in them, their archive; not the store's size.
            held = await call(lambda e: e.scope_counts())
            mine = access.readable(grant.token, None, held)
            out = stats_output(await call(lambda e: e.stats(mine)), resolution, scoped=True)
        if grant is not None:
            out.visible_scopes = await visible_scopes(ctx) or []
        identity = REQUEST.get()
        named = None if identity is None else identity.project
        counted = mine is None or named in mine  # never a word on a scope the token cannot read
        new = named is not None and not out.scopes.get(named)
        if new and named == out.current_scope and counted:
            out.scope_reason += f"; {NEW_SCOPE}"
        return out

    @tool(_annotations("Forget memories", read_only=False, destructive=True, idempotent=False))
    async def prime_memory_forget(
        record_id: str | None = None,
        domain: Label | None = None,
        subdomain: Label | None = None,
        tags: Annotated[list[str] | None, Field(description="Every one of these tags.")] = None,
        scopes: SameScopes = None,
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

        They move to the archive (restorable).
        """
        has_filter = domain is not None or subdomain is not None or bool(tags)
        if (record_id is None) == (not has_filter):
            raise ToolError(
                "give either record_id or a filter (domain, subdomain, tags), not both or neither"
            )
        grant = request_grant()
        if grant is not None and grant.token.read_only:
            allowed(lambda: grant.check_write(grant.resolution.current))
        if record_id is not None:

            def forget_one(engine: MemoryEngine) -> Any:
                guard_record(engine, record_id, write=True)
                return engine.forget(record_id)

            record = await call(forget_one)
            return ForgetOutput(forgotten=1, record_ids=[record.record_id])
        seen = await visible_scopes(ctx, scopes)

        def forget_matching(engine: MemoryEngine) -> list[str]:
            gates = Filters(domain=domain, subdomain=subdomain, tags=tags or (), scopes=seen)
            ids = engine.match_ids(filters=gates)
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
        """Correct a memory in place; its id stays, and the old version is kept."""
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

        grant = request_grant()
        if grant is not None and scope is not None:
            allowed(lambda: grant.check_write(scope_rules.normalise_scope(scope)))

        def correct(engine: MemoryEngine) -> UpdateOutput:
            guard_record(engine, record_id, write=True)
            record = engine.update(record_id, **changes)
            return UpdateOutput(
                record=record_output(record), versions=len(engine.history(record.record_id))
            )

        result: UpdateOutput = await call(correct)
        return result

    @tool(_annotations("Reinforce memories", read_only=False, destructive=False, idempotent=False))
    async def prime_memory_reinforce(
        record_ids: Annotated[list[str], Field(min_length=1, max_length=100)],
    ) -> ReinforceOutput:
        """Count query hits you used as recalled, so they stay strong; queries change nothing."""
        grant = request_grant()
        if grant is not None and grant.token.read_only:
            allowed(lambda: grant.check_write(grant.resolution.current))

        def reinforce(engine: MemoryEngine) -> ReinforceOutput:
            ids = list(dict.fromkeys(parse_record_id(rid) for rid in record_ids))
            found = engine.storage.fetch(ids)
            kept = [
                rid
                for rid in ids
                if rid in found
                and (grant is None or access.allows(grant.token, found[rid].record.scope))
            ]
            engine.recalled(kept)
            return ReinforceOutput(reinforced=kept, unknown=[r for r in ids if r not in kept])

        result: ReinforceOutput = await call(reinforce)
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
            "prime_memory_reinforce",
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
        if request_grant() is not None:
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

        try:
            return record_output(await call(fetch)).model_dump_json()
        except ToolError as exc:
            if isinstance(exc.__cause__, InvalidRecordId):
                raise ResourceNotFoundError(
                    f"{record_id[:64]!r} is not a record id: memory://record/ takes the 32 hex "
                    "digits that prime_memory_store and prime_memory_query return as record_id"
                ) from None
            if isinstance(exc.__cause__, NotFound):
                # The engine's words, as the tools say them: a record outside a
                # token's scopes must answer exactly as a missing one.
                raise ResourceNotFoundError(
                    f"{exc}: it may have been forgotten, or folded into another; find current "
                    "ids with prime_memory_query"
                ) from None
            raise ResourceError(str(exc)) from exc

    @server.prompt(
        name="recall",
        title="Recall before answering",
        description="Ask the assistant to look up what memory holds on a topic before it answers.",
    )
    def recall(topic: str) -> str:
        return (
            f"Before answering, call prime_memory_stats to see which domains and tags exist, then "
            f"prime_memory_query for what is known about: {topic}. Answer from those memories, say "
            f"which ones you used and pass their ids to prime_memory_reinforce, and store any new "
            f"durable fact with prime_memory_store."
        )

    return server


#: What stats add to the reason for a scope the request's project header names and no
#: memory is in yet: a typo in the header starts a new scope too.
NEW_SCOPE = "a new scope: it holds no memories yet (if you expected some, check the header)"


def _version() -> str:
    from .. import __version__

    return __version__


# -- command line ------------------------------------------------------------------


def shown_store(store: str) -> str:
    """A store location as the server's log shows it: a URL without its password."""
    return redact(store) if is_postgres_url(store) else store


def store_problem(store: str, create: bool) -> str | None:
    """Why the server may not open ``store``, in one line; None if it may.

    A missing store file is created only at the default location, or with
    ``--create`` or ``PRIME_MEMORY_CREATE=1``, so that a mistyped ``--store``
    fails instead of serving an empty store. A database URL is left to the
    database.
    """
    if store == ":memory:" or is_postgres_url(store):
        return None
    path = Path(store).expanduser()
    asked = create or os.environ.get("PRIME_MEMORY_CREATE", "").strip().lower() in {
        "1",
        "true",
        "yes",
    }
    if path.exists() or asked or path.absolute() == default_store_path().absolute():
        return None
    return (
        f"no store at {path}; to create one there, add --create or set PRIME_MEMORY_CREATE=1, "
        "else check --store / PRIME_MEMORY_STORE"
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run the server until the client disconnects (stdio) or it is interrupted (HTTP)."""
    args = parser().parse_args(argv)
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="%(name)s: %(message)s")
    from . import transport as mcp_transport

    token = args.token if args.token is not None else os.environ.get("PRIME_MEMORY_TOKEN") or None
    http = args.transport == "streamable-http"
    try:
        resolution = scope_rules.resolve(args.scope, project=args.project)
    except PrimeMemoryError as exc:
        print(f"prime-memory-mcp: {exc}", file=sys.stderr)
        return 2
    logger.info("scope %s: %s", resolution.current, resolution.reason)
    store = args.store or default_store()
    problem = store_problem(store, args.create)
    if problem is not None:
        print(f"prime-memory-mcp: {problem}", file=sys.stderr)
        return 2
    args.store = store
    opened: list[MemoryEngine] = []

    def open_engine() -> MemoryEngine:
        from ..engine.facade import MemoryEngine

        opened.append(MemoryEngine(store, scope=resolution))
        return opened[-1]

    server = build_server(open_engine, resolution)
    try:
        if not http:
            # Standard output is the protocol's: which store is served goes to stderr.
            print(f"prime-memory-mcp: store {shown_store(store)}", file=sys.stderr, flush=True)
            mcp_transport.run_stdio(server)
        else:
            from . import http as mcp_http

            def scopes_held() -> dict[str, int] | None:
                return opened[-1].scope_counts() if opened else None

            return mcp_http.serve(server, args, token, scopes_held)
    except KeyboardInterrupt:
        pass
    finally:
        for engine in opened:
            engine.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
