"""The write path: validate, embed, assign primes and addresses, insert or reinforce.

:class:`~prime_memory_folding.engine.facade.MemoryEngine` exposes these as ``store``,
``store_many`` and ``update``; folding and imports build their rows with the
same helpers, so every record enters a store the same way. The functions that
take the engine's parts (:class:`~prime_memory_folding.engine.parts.EngineParts`) run
under its lock.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from ..core import citations
from ..core.address import Encoded, concept_bucket, instance_id, pack, parse_record_id, record_id
from ..core.labels import LabelRegistry
from ..core.primes import Kind, next_prime, normalise_label, normalise_tags, prime_product
from ..core.records import (
    MAX_TAGS,
    Record,
    StoreResult,
    Vector,
    check_content,
    check_metadata,
    check_session,
    check_unicode,
    check_unit_interval,
    check_vector,
    limit_tags,
)
from ..core.scopes import GLOBAL, git_root, normalise_scope
from ..errors import DimensionMismatch, InvalidInput, NotFound
from ..fold import folding
from ..recall import space
from ..storage import Storage, StoredRow, archive, fold_marks
from . import validity
from .tokens import CREATED_BY

if TYPE_CHECKING:
    from .parts import EngineParts

__all__ = [
    "CITES_KEY",
    "REINFORCE_RATE",
    "StoreItem",
    "allocate",
    "as_vector",
    "assign_primes",
    "encode",
    "new_row",
    "prepare",
    "reinforced",
    "require_all",
    "rescope",
    "update",
    "vector_blob",
    "write",
]

#: How far a repeated store moves strength towards 1.
REINFORCE_RATE = 0.5
#: The metadata key a record's citations are kept under (docs/citations.md);
#: reserved: a caller's metadata may not set it.
CITES_KEY = "cites"

STORE_FIELDS = frozenset(
    {
        "content",
        "domain",
        "subdomain",
        "tags",
        "importance",
        "vector",
        "metadata",
        "instance_key",
        "scope",
        "session",
        "cites",
        "repo",
        "supersedes",
    }
)
UPDATABLE = frozenset(
    {"content", "tags", "importance", "strength", "metadata", "vector", "scope", "cites", "repo"}
)


@dataclass(frozen=True, slots=True)
class StoreItem:
    """A validated store request."""

    content: str
    domain: str
    subdomain: str
    tags: tuple[str, ...]
    importance: float
    vector: npt.NDArray[np.float32] | None
    metadata: dict[str, Any]
    instance_key: str | None
    scope: str = GLOBAL
    #: The conversation the memory belongs to; not part of its identity
    #: (storing it again from another session reinforces the same record).
    session: str | None = None
    #: The record this memory replaces (:mod:`.validity`): closed when this one is stored.
    supersedes: str | None = None

    @property
    def dedupe_key(self) -> str:
        """Equal for requests with the same scope, labels and content (or instance key).

        The ``global`` scope adds nothing, so keys made before scopes existed
        still match; any other scope leads the text behind a NUL, which no
        scope name holds.
        """
        identity = (
            f"k:{self.instance_key}" if self.instance_key is not None else f"c:{self.content}"
        )
        text = "\x1f".join((self.domain, self.subdomain, *self.tags, identity))
        if self.scope != GLOBAL:
            text = f"{self.scope}\x00{text}"
        return hashlib.blake2b(text.encode("utf-8"), digest_size=16).hexdigest()


def vector_blob(vector: npt.NDArray[np.float32] | None) -> bytes | None:
    """A vector as the store keeps it: little-endian float32 bytes."""
    return None if vector is None else vector.astype("<f4").tobytes()


# -- validation -------------------------------------------------------------------


def prepare(
    raw: Mapping[str, Any],
    scope: str = GLOBAL,
    folder: str | os.PathLike[str] | None = None,
) -> StoreItem:
    """A store request checked and normalised; ``scope`` unless the request names one.

    A request's ``cites`` are checked against the git repository its ``repo``
    names, else the one that holds ``folder``, else the process's working
    directory's, and kept in the metadata under :data:`CITES_KEY`.

    Raises:
        InvalidInput: a field is unknown, missing or bad.
    """
    unknown = set(raw) - STORE_FIELDS
    if unknown:
        raise InvalidInput(
            f"unknown field(s) {sorted(unknown)}; a memory takes {sorted(STORE_FIELDS)}"
        )
    if "content" not in raw:
        raise InvalidInput("content is missing; give the text to remember")
    metadata, _ = check_metadata(raw.get("metadata"))
    if CITES_KEY in metadata:
        raise InvalidInput(
            f"metadata key {CITES_KEY!r} is reserved for citations; pass them as cites=[...]"
        )
    key = raw.get("instance_key")
    if key is not None and (not isinstance(key, str) or not key.strip()):
        raise InvalidInput("instance_key must be a non-empty string when given")
    if key is not None:
        check_unicode("instance_key", key)
    vector = raw.get("vector")
    content = check_content(raw["content"])
    cites = raw.get("cites")
    if cites is not None and not (isinstance(cites, (list, tuple)) and not cites):
        metadata[CITES_KEY] = citations.cite(_repository(raw.get("repo"), folder), cites)
    elif raw.get("repo") is not None:
        _repository(raw.get("repo"), folder)
    return StoreItem(
        content=content,
        domain=normalise_label(raw.get("domain", "memory"), Kind.DOMAIN),
        subdomain=normalise_label(raw.get("subdomain", "general"), Kind.SUBDOMAIN),
        tags=normalise_tags(limit_tags("tags", raw.get("tags", ()))),
        importance=check_unit_interval("importance", raw.get("importance", 0.5)),
        vector=None if vector is None else as_vector(vector),
        metadata=metadata,
        instance_key=key,
        scope=scope if raw.get("scope") is None else normalise_scope(raw["scope"]),
        session=check_session(raw.get("session")),
        supersedes=None if raw.get("supersedes") is None else parse_record_id(raw["supersedes"]),
    )


def _repository(repo: object, folder: str | os.PathLike[str] | None) -> Path:
    """The root of the git repository citations are relative to.

    Raises:
        InvalidInput: ``repo`` is not a folder in a git repository, or none was
            given and neither ``folder`` nor the working directory is in one.
    """
    if repo is not None:
        if not isinstance(repo, (str, os.PathLike)) or not Path(repo).is_dir():
            raise InvalidInput(
                f"repo {repo!r} is not a folder; give the git repository the citations are in"
            )
        root = git_root(repo)
        if root is None:
            raise InvalidInput(
                f"repo {str(repo)!r} is not in a git repository; give the repository's folder"
            )
        return root
    for start in ((folder,) if folder is not None else ()) + (os.getcwd(),):
        root = git_root(start)
        if root is not None:
            return root
    raise InvalidInput(
        "cites need a git repository, and neither the project nor the working directory is "
        "in one; pass repo= with the repository's folder"
    )


def as_vector(vector: object) -> npt.NDArray[np.float32]:
    """A caller's vector as float32, checked.

    Raises:
        InvalidInput: it is not a finite, non-zero vector that fits float32.
    """
    if (
        isinstance(vector, np.ndarray)
        and vector.ndim == 1
        and vector.dtype.kind == "f"
        and len(vector)
    ):
        # A float array is checked as a whole rather than value by value.
        values = vector.astype(np.float64)
        bad = np.flatnonzero(~np.isfinite(values))
        if len(bad):
            item = vector[int(bad[0])].item()
            raise InvalidInput(f"vector[{int(bad[0])}] is {item!r}; every value must be finite")
    else:
        values = np.asarray(check_vector(vector), dtype=np.float64)
    if np.abs(values).max() > np.finfo(np.float32).max:
        raise InvalidInput("vector has values too large for float32; scale it down")
    array = values.astype(np.float32)
    if not np.any(array):
        raise InvalidInput("vector is all zeros and has no direction; give a non-zero vector")
    return array


# -- store ------------------------------------------------------------------------


def write(engine: EngineParts, items: Sequence[StoreItem]) -> list[StoreResult]:
    """Store or reinforce ``items`` in one transaction; results in input order."""
    if not items:
        return []
    storage = engine.storage
    now = engine.now()
    dims = {len(item.vector) for item in items if item.vector is not None}
    text = engine.text
    # Load the embedder before taking the write lock.
    if (
        text.enabled
        and not text.loaded
        and any(item.vector is None for item in items)
        and not space.is_custom(space.store_space(storage))
    ):
        text.get()
    with storage.transaction():
        if len(dims) > 1:
            raise DimensionMismatch(
                f"vectors in one batch have different dimensions {sorted(dims)}"
            )
        if any(item.vector is None for item in items):
            items = _embedded(storage, engine, items, dims)
        for dim in dims:
            space.check_space(storage, dim, claim=True)
        primes = assign_primes(engine.registry, storage, items)
        keys = [item.dedupe_key for item in items]
        known = storage.find_dedupe(list(dict.fromkeys(keys)))
        first_new: dict[str, StoreItem] = {}
        for item, key in zip(items, keys):
            if key not in known and key not in first_new:
                first_new[key] = item
        addresses = allocate(storage, list(first_new.items()), primes)
        rows: dict[str, StoredRow] = {
            key: new_row(item, key, address, primes, now)
            for (key, item), address in zip(first_new.items(), addresses)
        }
        created: list[bool] = []
        inserted: set[str] = set()
        for item, key in zip(items, keys):
            if key in first_new and key not in inserted:
                inserted.add(key)
                created.append(True)
                continue
            rows[key] = reinforced(rows.get(key) or known[key], item, now)
            created.append(False)
        # Each record's prune moment, kept from the start: a full fold then
        # finds most of them in place instead of writing every one.
        marks, unmarked = folding.stored_prune_moments(engine.fold_policy, list(rows.values()))
        fold_marks.replace_marks(storage, marks, forget=unmarked)
        storage.insert(rows[key] for key in first_new)
        if len(rows) > len(first_new):
            storage.replace(row for key, row in rows.items() if key not in first_new)
        closing = [
            (item.supersedes, rows[key].record.record_id, item.scope)
            for item, key in zip(items, keys)
            if item.supersedes is not None
        ]
        closed = validity.close(storage, closing, now, engine.path)
    engine.registry.add(primes)
    engine.after_write(rows.values(), removed=closed)
    return [StoreResult(rows[key].record, flag) for key, flag in zip(keys, created)]


def _embedded(
    storage: Storage, engine: EngineParts, items: Sequence[StoreItem], dims: set[int]
) -> Sequence[StoreItem]:
    """``items`` with the contents that came without a vector embedded (see space.py)."""
    text = space.texts_to_embed(storage, engine.text, dims)
    if text is None:
        return items
    bare = [i for i, item in enumerate(items) if item.vector is None]
    vectors = text.embed([items[i].content for i in bare])
    embedded = list(items)
    for i, vec in zip(bare, vectors):
        embedded[i] = replace(items[i], vector=vec)
    return embedded


def assign_primes(
    registry: LabelRegistry, storage: Storage, items: Sequence[StoreItem]
) -> dict[Kind, dict[str, int]]:
    """Primes for every label in ``items``, assigning new ones (inside the transaction).

    The registry learns the new ones only after the commit: ``registry.add``.
    """
    wanted: dict[Kind, dict[str, None]] = {kind: {} for kind in Kind}
    for item in items:
        wanted[Kind.DOMAIN][item.domain] = None
        wanted[Kind.SUBDOMAIN][item.subdomain] = None
        for tag in item.tags:
            wanted[Kind.TAG][tag] = None
    assigned: dict[Kind, dict[str, int]] = {kind: {} for kind in Kind}
    for kind, labels in wanted.items():
        for label in labels:
            prime = registry.primes[kind].get(label)
            assigned[kind][label] = (
                prime if prime is not None else storage.assign_prime(kind, label)
            )
    return assigned


def allocate(
    storage: Storage,
    planned: Sequence[tuple[str, StoreItem]],
    primes: Mapping[Kind, Mapping[str, int]],
) -> list[int]:
    """Addresses for new records.

    An instance lane already taken by a different record moves to the next
    stable alternative, so a collision never overwrites anything.
    """
    firsts: list[tuple[tuple[int, int, int], str, int]] = []
    for _, item in planned:
        bucket = concept_bucket(item.domain, item.subdomain, item.tags, item.scope)
        base = (
            primes[Kind.DOMAIN][item.domain],
            primes[Kind.SUBDOMAIN][item.subdomain],
            bucket,
        )
        identity = item.instance_key if item.instance_key is not None else item.content
        firsts.append((base, identity, pack(*base, instance_id(identity))))
    taken = storage.existing_ids([record_id(address) for _, _, address in firsts])
    used: set[str] = set()
    chosen: list[int] = []
    for base, identity, address in firsts:
        attempt = 0
        while True:
            rid = record_id(address)
            if (
                rid not in used
                and rid not in taken
                and (attempt == 0 or not storage.existing_ids([rid]))
            ):
                break
            attempt += 1
            address = pack(*base, instance_id(identity, attempt))
        used.add(rid)
        chosen.append(address)
    return chosen


def encode(
    engine: EngineParts,
    scope: str,
    domain: str,
    subdomain: str,
    tags: Iterable[str],
    instance_key: str | None,
) -> Encoded:
    """The address a record with these labels would get in ``scope``; writes nothing.

    Labels not yet registered get the primes they would be assigned next, and
    ``provisional`` is then True (see :meth:`.MemoryEngine.encode`).
    """
    scope_name = normalise_scope(scope)
    domain_label = normalise_label(domain, Kind.DOMAIN)
    subdomain_label = normalise_label(subdomain, Kind.SUBDOMAIN)
    tag_labels = normalise_tags(limit_tags("tags", tags))
    if instance_key is not None and (not isinstance(instance_key, str) or not instance_key):
        raise InvalidInput("instance_key must be a non-empty string when given")
    with engine.lock:
        engine.registry.reload()
        predicted: dict[Kind, int] = {
            kind: max(table.values(), default=1) for kind, table in engine.registry.primes.items()
        }
        provisional = False

        def prime_for(kind: Kind, label: str) -> int:
            nonlocal provisional
            prime = engine.registry.primes[kind].get(label)
            if prime is None:
                provisional = True
                predicted[kind] = prime = next_prime(predicted[kind])
            return prime

        domain_prime = prime_for(Kind.DOMAIN, domain_label)
        subdomain_prime = prime_for(Kind.SUBDOMAIN, subdomain_label)
        for tag in tag_labels:
            prime_for(Kind.TAG, tag)
    bucket = concept_bucket(domain_label, subdomain_label, tag_labels, scope_name)
    instance = 0 if instance_key is None else instance_id(instance_key)
    address = pack(domain_prime, subdomain_prime, bucket, instance)
    return Encoded(
        address=address,
        record_id=record_id(address),
        domain_prime=domain_prime,
        subdomain_prime=subdomain_prime,
        concept_bucket=bucket,
        instance_id=instance,
        provisional=provisional,
    )


def new_row(
    item: StoreItem,
    key: str,
    address: int,
    primes: Mapping[Kind, Mapping[str, int]],
    now: float,
) -> StoredRow:
    """The row for a new record at ``address``, stored at ``now``."""
    record = Record(
        record_id=record_id(address),
        address=address,
        domain=item.domain,
        subdomain=item.subdomain,
        tags=item.tags,
        tag_product=prime_product(primes[Kind.TAG][t] for t in item.tags),
        content=item.content,
        importance=item.importance,
        strength=1.0,
        created_at=now,
        updated_at=now,
        accessed_at=now,
        access_count=0,
        metadata=item.metadata,
        vector=None if item.vector is None else Vector(item.vector),
        scope=item.scope,
        session=item.session,
    )
    return StoredRow(
        record=record,
        dedupe_key=key,
        vector_blob=vector_blob(item.vector),
        instance_key=item.instance_key,
    )


def reinforced(current: StoredRow, item: StoreItem, now: float) -> StoredRow:
    """``current`` stored again as ``item``: stronger, and with the newer content.

    It keeps its session: the conversation it was first stored in.
    """
    rec = current.record
    blob = current.vector_blob
    vector = rec.vector
    if item.vector is not None:
        blob = vector_blob(item.vector)
        vector = Vector(item.vector)
    record = replace(
        rec,
        content=item.content,
        importance=max(rec.importance, item.importance),
        strength=min(1.0, rec.strength + (1.0 - rec.strength) * REINFORCE_RATE),
        updated_at=now,
        accessed_at=now,
        access_count=rec.access_count + 1,
        metadata=_reinforced_metadata(rec.metadata, item.metadata),
        vector=vector,
    )
    return replace(current, record=record, vector_blob=blob)


def _reinforced_metadata(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """A reinforced record's metadata: the new keys over the old, but its creator stays."""
    merged = {**old, **new}
    if CREATED_BY in old:
        merged[CREATED_BY] = old[CREATED_BY]
    return merged


# -- update -----------------------------------------------------------------------


def update(
    engine: EngineParts,
    record_id: str,
    changes: Mapping[str, Any],
    folder: str | os.PathLike[str] | None = None,
) -> Record:
    """See :meth:`.MemoryEngine.update`; ``folder`` is where new ``cites`` look for
    their repository when ``repo`` is not given (as :func:`prepare`'s)."""
    rid = parse_record_id(record_id)
    unknown = set(changes) - UPDATABLE
    if unknown:
        hint = ""
        if unknown & {"domain", "subdomain"}:
            hint = "; the domain and subdomain are part of the address, so store a new record"
        elif "session" in unknown:
            hint = "; a memory keeps the session it was first stored in"
        raise InvalidInput(
            f"cannot update {sorted(unknown)}; updatable fields are {sorted(UPDATABLE)}{hint}"
        )
    content = check_content(changes["content"]) if "content" in changes else None
    tags = normalise_tags(limit_tags("tags", changes["tags"])) if "tags" in changes else None
    importance = (
        check_unit_interval("importance", changes["importance"])
        if "importance" in changes
        else None
    )
    strength = (
        check_unit_interval("strength", changes["strength"]) if "strength" in changes else None
    )
    metadata = check_metadata(changes["metadata"])[0] if "metadata" in changes else None
    if metadata is not None and CITES_KEY in metadata:
        raise InvalidInput(
            f"metadata key {CITES_KEY!r} is reserved for citations; pass them as cites=[...]"
        )
    if "repo" in changes and "cites" not in changes:
        raise InvalidInput("repo names the repository of cites; give cites=[...] with it")
    given_cites = changes.get("cites")
    if given_cites is not None and not isinstance(given_cites, (list, tuple)):
        raise InvalidInput(
            "cites must be a list of citations such as [{'path': 'src/db.py'}], "
            "or [] (or None) to drop them"
        )
    new_cites = (
        citations.cite(_repository(changes.get("repo"), folder), given_cites)
        if given_cites
        else None
    )
    new_vector = None
    if changes.get("vector") is not None:
        new_vector = as_vector(changes["vector"])
    scope = normalise_scope(changes["scope"]) if changes.get("scope") is not None else None
    storage = engine.storage
    registry = engine.registry
    with engine.lock:
        with storage.transaction():
            current = storage.fetch([rid]).get(rid)
            if current is None:
                raise NotFound(f"no record {rid} in {engine.path}")
            rec = current.record
            if new_vector is not None:
                space.check_space(storage, len(new_vector), claim=True)
            new_tags = rec.tags if tags is None else tags
            item = StoreItem(
                content=rec.content if content is None else content,
                domain=rec.domain,
                subdomain=rec.subdomain,
                tags=new_tags,
                importance=rec.importance,
                vector=None,
                metadata={},
                instance_key=current.instance_key,
                scope=rec.scope if scope is None else scope,
            )
            assigned: dict[Kind, dict[str, int]] = (
                {kind: {} for kind in Kind}
                if tags is None
                else assign_primes(registry, storage, [item])
            )
            key = current.dedupe_key
            if content is not None or tags is not None or item.scope != rec.scope:
                key = item.dedupe_key
                clash = storage.find_dedupe([key]).get(key)
                if clash is not None and clash.record.record_id != rid:
                    raise InvalidInput(
                        f"record {clash.record.record_id} already holds this content with "
                        f"these labels in scope {item.scope}; forget one of them instead"
                    )
            tag_table = {**registry.primes[Kind.TAG], **assigned[Kind.TAG]}
            blob = current.vector_blob
            vector = rec.vector
            if "vector" in changes:
                blob = vector_blob(new_vector)
                vector = None if new_vector is None else Vector(new_vector)
            record = replace(
                rec,
                content=item.content,
                tags=new_tags,
                tag_product=prime_product(tag_table[t] for t in new_tags),
                importance=rec.importance if importance is None else importance,
                strength=rec.strength if strength is None else strength,
                metadata=_cited(rec.metadata, metadata, "cites" in changes, new_cites),
                updated_at=engine.now(),
                vector=vector,
                scope=item.scope,
            )
            row = replace(
                current,
                record=record,
                dedupe_key=key,
                vector_blob=blob,
                # A strength set now decays from now (folding).
                strength_at=current.strength_at if strength is None else record.updated_at,
            )
            corrected = (rec.content, rec.tags, rec.importance, rec.scope) != (
                record.content,
                record.tags,
                record.importance,
                record.scope,
            )
            if corrected:
                # The version this update corrects stays in the archive as history.
                archive.keep_versions(storage, [rid], record.updated_at)
            storage.replace([row])
        registry.add(assigned)
        engine.after_write([row])
    return record


def _cited(
    old: dict[str, Any],
    given: dict[str, Any] | None,
    recited: bool,
    cites: list[dict[str, Any]] | None,
) -> dict[str, Any]:
    """An updated record's metadata: ``given`` (else ``old``), with the old citations
    kept unless the update gave new ones (``recited``; ``cites`` None or empty: none)."""
    base = {k: v for k, v in (old if given is None else given).items() if k != CITES_KEY}
    kept = cites if recited else old.get(CITES_KEY)
    return {**base, CITES_KEY: kept} if kept else base


def require_all(ids: Sequence[str], present: Collection[str], path: str, verb: str) -> None:
    """Raises NotFound, naming a few, unless every id in ``ids`` is ``present``.

    ``verb`` says what would have been done, as in "nothing was {verb}".
    """
    missing = [rid for rid in ids if rid not in present]
    if missing:
        shown = ", ".join(missing[:5]) + (" ..." if len(missing) > 5 else "")
        raise NotFound(
            f"{len(missing)} of the records given are not live in {path}: {shown}; "
            f"nothing was {verb}"
        )


def rescope(engine: EngineParts, record_ids: Sequence[str], scope: str) -> list[Record]:
    """Move records to ``scope`` in one transaction; ids stay (:meth:`.MemoryEngine.rescope`).

    Returns the records that moved (those already in ``scope`` are left as they are).
    """
    target = normalise_scope(scope)
    ids = list(dict.fromkeys(parse_record_id(rid) for rid in record_ids))
    storage = engine.storage
    with engine.lock:
        with storage.transaction():
            found = storage.fetch(ids)
            require_all(ids, found, engine.path, "moved")
            now = engine.now()
            rows: list[StoredRow] = []
            for rid in ids:
                current = found[rid]
                rec = current.record
                if rec.scope == target:
                    continue
                key = StoreItem(
                    rec.content, rec.domain, rec.subdomain, rec.tags, rec.importance, None, {},
                    current.instance_key, target,
                ).dedupe_key  # fmt: skip
                record = replace(rec, scope=target, updated_at=now)
                rows.append(replace(current, record=record, dedupe_key=key))
            keys = [row.dedupe_key for row in rows]
            taken = storage.find_dedupe(keys)
            clashes = [
                (row.record.record_id, taken[row.dedupe_key].record.record_id)
                for row in rows
                if row.dedupe_key in taken
            ]
            if len(set(keys)) < len(keys) or clashes:
                pair = clashes[0] if clashes else ("several records", "each other")
                raise InvalidInput(
                    f"{pair[0]} would hold the same content and labels as {pair[1]} in scope "
                    f"{target}; forget one of them first. Nothing was moved"
                )
            storage.replace(rows)
        engine.after_write(rows)
    return [row.record for row in rows]


def retag(
    engine: EngineParts,
    record_ids: Sequence[str],
    add: Sequence[str],
    remove: Sequence[str],
) -> list[Record]:
    """Add and remove tags on many records in one transaction (:meth:`.MemoryEngine.retag`).

    Returns the records whose tags changed; the others are left as they are.
    """
    added = normalise_tags(limit_tags("add", add))
    dropped = set(normalise_tags(limit_tags("remove", remove)))
    if not added and not dropped:
        raise InvalidInput("name at least one tag to add or remove")
    both = dropped.intersection(added)
    if both:
        raise InvalidInput(f"tag(s) {sorted(both)} cannot be both added and removed")
    ids = list(dict.fromkeys(parse_record_id(rid) for rid in record_ids))
    storage = engine.storage
    registry = engine.registry
    with engine.lock:
        with storage.transaction():
            found = storage.fetch(ids)
            require_all(ids, found, engine.path, "changed")
            items: list[tuple[StoredRow, StoreItem]] = []
            for rid in ids:
                current = found[rid]
                rec = current.record
                tags = normalise_tags([*(t for t in rec.tags if t not in dropped), *added])
                if tags == rec.tags:
                    continue
                if len(tags) > MAX_TAGS:
                    raise InvalidInput(
                        f"record {rid} would hold {len(tags)} tags, over the limit of "
                        f"{MAX_TAGS}; nothing was changed. Remove some of its tags first"
                    )
                item = StoreItem(
                    rec.content, rec.domain, rec.subdomain, tags, rec.importance, None, {},
                    current.instance_key, rec.scope,
                )  # fmt: skip
                items.append((current, item))
            assigned = assign_primes(registry, storage, [item for _, item in items])
            tag_table = {**registry.primes[Kind.TAG], **assigned[Kind.TAG]}
            keys = [item.dedupe_key for _, item in items]
            taken = storage.find_dedupe(keys)
            clashes = [
                (current.record.record_id, taken[key].record.record_id)
                for (current, _), key in zip(items, keys)
                if key in taken and taken[key].record.record_id != current.record.record_id
            ]
            if len(set(keys)) < len(keys) or clashes:
                pair = clashes[0] if clashes else ("several records", "each other")
                raise InvalidInput(
                    f"{pair[0]} would hold the same content and labels as {pair[1]}; "
                    "forget one of them first. Nothing was changed"
                )
            now = engine.now()
            rows: list[StoredRow] = []
            for (current, item), key in zip(items, keys):
                record = replace(
                    current.record,
                    tags=item.tags,
                    tag_product=prime_product(tag_table[t] for t in item.tags),
                    updated_at=now,
                )
                rows.append(replace(current, record=record, dedupe_key=key))
            storage.replace(rows)
        registry.add(assigned)
        engine.after_write(rows)
    return [row.record for row in rows]
