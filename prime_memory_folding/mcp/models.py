"""The MCP server's output models: what each tool returns, as pydantic models.

Every tool returns one of these, which clients get as ``structuredContent``,
validated against the model. ``tools/list`` advertises no output schema (it
would more than double what every session pays for the list), so the field
names must speak for themselves; :func:`compact_schema` trims the input
schemas it does advertise.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field, SerializerFunctionWrapHandler, model_serializer

if TYPE_CHECKING:
    from ..core.records import Record, Restatement
    from ..core.scopes import ScopeResolution

__all__ = [
    "CitationOutput",
    "EncodeOutput",
    "FoldOutput",
    "ForgetOutput",
    "PossibleSupersession",
    "QueryHit",
    "QueryOutput",
    "RecordOutput",
    "ReinforceOutput",
    "ScopeOutput",
    "StatsOutput",
    "StoreOutput",
    "UpdateOutput",
    "compact_schema",
    "possible_supersessions",
    "record_output",
    "stats_output",
]


class EncodeOutput(BaseModel):
    """The 128-bit address a record with these labels would get."""

    address: str = Field(description="The address as a decimal string (too big for a JSON number).")
    address_hex: str = Field(description="The address as 32 hex digits.")
    record_id: str = Field(description="The record id derived from the address.")
    domain_prime: int = Field(description="Lane 1: the domain's prime.")
    subdomain_prime: int = Field(description="Lane 2: the subdomain's prime.")
    concept_bucket: int = Field(description="Lane 3: a bucket derived from the tags.")
    instance_id: int = Field(description="Lane 4: from instance_key, else 0.")
    provisional: bool = Field(
        description="True when a label is not registered yet, so its prime may still change."
    )


class RecordOutput(BaseModel):
    """One stored memory, without its vector."""

    record_id: str
    address: str = Field(description="The 128-bit address as a decimal string.")
    domain: str
    subdomain: str
    tags: list[str]
    content: str
    importance: float
    strength: float
    created_at: float = Field(description="Unix seconds.")
    updated_at: float = Field(description="Unix seconds.")
    accessed_at: float = Field(description="Unix seconds.")
    access_count: int
    metadata: dict[str, Any]
    vector_dims: int | None = Field(description="Length of the stored vector, if any.")
    scope: str = Field(description="The scope the memory belongs to.")
    session: str | None = Field(default=None, description="The conversation it belongs to.")


def _without_nulls(
    model: BaseModel, handler: SerializerFunctionWrapHandler, keys: tuple[str, ...]
) -> dict[str, Any]:
    """``model`` serialised without those of ``keys`` that hold null: said only when it is so."""
    out: dict[str, Any] = handler(model)
    for key in keys:
        if out.get(key) is None:
            out.pop(key, None)
    return out


class PossibleSupersession(BaseModel):
    """An older memory a new one seems to restate with a changed value (never applied)."""

    id: str = Field(description="The older memory's record id.")
    change: str = Field(default="", description="What changed, e.g. '15 -> 16'.")


class StoreOutput(BaseModel):
    """What a store did."""

    created: bool = Field(
        description="True for a new record, False when an identical one was reinforced."
    )
    record: RecordOutput
    superseded: str | None = Field(
        default=None, description="The id of the memory this one replaced, when asked to."
    )
    possibly_supersedes: list[PossibleSupersession] | None = Field(
        default=None,
        description="Older memories this one seems to update; confirm with supersedes=.",
    )

    @model_serializer(mode="wrap")
    def without_nulls(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return _without_nulls(self, handler, ("superseded", "possibly_supersedes"))


class CitationOutput(BaseModel):
    """How one cited piece of code compares with the working tree now."""

    path: str = Field(description="The file now, relative to the repository's root.")
    state: str = Field(description="verified, moved, stale or unchecked.")
    lines: str | None = Field(default=None, description="Where the cited text is now.")
    detail: str = Field(default="", description="One sentence on what was found.")

    @model_serializer(mode="wrap")
    def without_nulls(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return _without_nulls(self, handler, ("lines",))


class QueryHit(BaseModel):
    """A compact query result."""

    record_id: str
    content: str
    domain: str
    subdomain: str
    tags: list[str]
    score: float
    score_parts: dict[str, float]
    strength: float
    created_at: float
    updated_at: float
    scope: str = Field(description="The scope the memory belongs to.")
    session: str | None = Field(default=None, description="The conversation it belongs to.")
    vector: list[float] | None = Field(default=None, description="Only with include_vectors.")
    citations: list[CitationOutput] | None = Field(
        default=None, description="The code it cites, checked now; only when it cites some."
    )

    @model_serializer(mode="wrap")
    def without_nulls(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return _without_nulls(self, handler, ("citations",))


class QueryOutput(BaseModel):
    """Hits, best first, within the token budget."""

    count: int
    hits: list[QueryHit]
    tokens_used: int = Field(description="What this answer costs, estimated on the high side.")
    left_out: int = Field(description="Hits that ranked but did not fit the budget.")


class FoldOutput(BaseModel):
    """What folding did, or would do on a dry run. Folded and pruned records are archived."""

    dry_run: bool
    records_before: int
    records_after: int
    decayed: int = Field(description="Records whose strength was lowered to its decayed value.")
    pruned: int = Field(description="Faded records moved to the archive.")
    stale: int = Field(0, description="Unused memories whose cited code changed, archived.")
    clustered: int = Field(description="Clusters of near-duplicates found.")
    folded: int = Field(description="Records archived into a new folded record.")
    created: int = Field(description="Folded records created.")
    bytes_before: int
    bytes_after: int
    duration_s: float
    pruned_ids: list[str] = Field(description="Some of the pruned records.")
    created_ids: list[str] = Field(description="Some of the folded records created.")
    folded_from: dict[str, list[str]] = Field(
        description="Folded record id -> the ids it replaced."
    )


class StatsOutput(BaseModel):
    """A summary of the store, or of the scopes a token may see; never where the store is."""

    records: int
    domains: dict[str, int] = Field(description="Records per domain.")
    subdomains: dict[str, int] = Field(description="Records per subdomain.")
    tags: dict[str, int] = Field(description="Records per tag.")
    registries: dict[str, dict[str, int]] = Field(description="Kind -> label -> prime.")
    store_bytes: int | None = Field(
        None, description="The store's size; not shown to a token limited to some scopes."
    )
    embedding_space: str | None = Field(
        description="The vector space the store is bound to, if any."
    )
    schema_version: int
    archived: int = Field(
        0,
        description="Entries in the archive: records pruned, folded away or forgotten "
        "(restorable), and versions that updates replaced.",
    )
    archived_by_reason: dict[str, int] = Field(
        default_factory=dict,
        description="Archive entries per reason: pruned, folded, forgotten, replaced.",
    )
    scopes: dict[str, int] = Field(description="Records per scope.")
    current_scope: str = Field(description="Where memories go unless a store names a scope.")
    user_scope: str = Field(description="This user's scope, for personal preferences.")
    visible_scopes: list[str] = Field(description="What a query sees unless it names scopes.")
    scope_reason: str = Field(description="How the server found the current scope.")
    without_vector: int = Field(0, description="Records that text queries rank on words alone.")


class ReinforceOutput(BaseModel):
    """Which memories were counted as used."""

    reinforced: list[str] = Field(description="Their ids.")
    unknown: list[str] = Field(description="Ids that name no memory this request may change.")


class ForgetOutput(BaseModel):
    """What was forgotten: moved to the archive, where restore brings it back."""

    forgotten: int = Field(description="Memories moved to the archive.")
    record_ids: list[str] = Field(description="Their ids (at most 100 listed).")


class UpdateOutput(BaseModel):
    """The corrected memory; the version it replaced stays in the archive."""

    record: RecordOutput
    versions: int = Field(description="Earlier versions kept as this memory's history.")


class ScopeOutput(BaseModel):
    """The current scope, what queries see by default, and how the server found it."""

    current: str
    user: str
    visible: list[str]
    source: str = Field(
        description="Which rule chose it: argument, env, project, claude_project_dir, git, "
        "roots or default."
    )
    reason: str


#: Keys whose value maps names to schemas (a property may be called "title").
_SCHEMA_MAPS = ("properties", "$defs", "patternProperties")
#: Keys whose value is one schema, or a list of them.
_SCHEMA_KEYS = ("items", "additionalProperties", "not", "anyOf", "oneOf", "allOf", "prefixItems")
_NULL = {"type": "null"}


def compact_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """An input ``schema`` without what pydantic adds that tells a caller nothing.

    It drops every ``title`` (pydantic derives them from the names) and
    ``additionalProperties: true`` (the JSON Schema default), and spells an
    optional argument that defaults to null by its non-null schema alone: a
    caller leaves it out. The server still validates against the full schema,
    which accepts every value the compact one does, and null too.
    """
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "title" and isinstance(value, str):
            continue
        if key == "additionalProperties" and value is True:
            continue
        if key in _SCHEMA_MAPS and isinstance(value, dict):
            out[key] = {name: compact_schema(sub) for name, sub in value.items()}
        elif key in _SCHEMA_KEYS and isinstance(value, dict):
            out[key] = compact_schema(value)
        elif key in _SCHEMA_KEYS and isinstance(value, list):
            out[key] = [compact_schema(sub) if isinstance(sub, dict) else sub for sub in value]
        else:
            out[key] = value
    options = out.get("anyOf")
    if (
        "default" in out
        and out["default"] is None
        and isinstance(options, list)
        and len(options) == 2
        and _NULL in options
    ):
        [kept] = [option for option in options if option != _NULL]
        del out["anyOf"], out["default"]
        out = {**kept, **out}
    return out


def record_output(record: Record) -> RecordOutput:
    return RecordOutput(
        record_id=record.record_id,
        address=str(record.address),
        domain=record.domain,
        subdomain=record.subdomain,
        tags=list(record.tags),
        content=record.content,
        importance=record.importance,
        strength=record.strength,
        created_at=record.created_at,
        updated_at=record.updated_at,
        accessed_at=record.accessed_at,
        access_count=record.access_count,
        metadata=dict(record.metadata),
        vector_dims=None if record.vector is None else len(record.vector),
        scope=record.scope,
        session=record.session,
    )


def possible_supersessions(hints: Sequence[Restatement]) -> list[PossibleSupersession] | None:
    """The older memories a stored one seems to restate (:meth:`.possibly_supersedes`)."""
    out = [PossibleSupersession(id=hint.record.record_id, change=hint.change) for hint in hints]
    return out or None


def stats_output(stats: Any, resolution: ScopeResolution, *, scoped: bool = False) -> StatsOutput:
    """``stats`` as a client sees them: not the store's path; not its size when ``scoped``."""
    return StatsOutput(
        scopes=dict(stats.scopes),
        current_scope=resolution.current,
        visible_scopes=list(resolution.visible),
        scope_reason=resolution.reason,
        user_scope=resolution.user,
        records=stats.records,
        domains=dict(stats.domains),
        subdomains=dict(stats.subdomains),
        tags=dict(stats.tags),
        registries={kind: dict(table) for kind, table in stats.registries.items()},
        store_bytes=None if scoped else stats.store_bytes,
        embedding_space=stats.embedding_space,
        schema_version=stats.schema_version,
        archived=stats.archived,
        archived_by_reason=dict(stats.archived_by_reason),
        without_vector=stats.without_vector,
    )
