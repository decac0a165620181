"""Memory packs: a store's records as JSON Lines, and the verbatim writer behind every import.

A pack is UTF-8 JSON Lines. The first line is a header::

    {"format": "prime-memory-pack", "version": 1, "records": 2,
     "registries": {"domain": {"memory": 2, ...}, "subdomain": {...}, "tag": {...}},
     "embedding_space": "custom:3", "embedding_dim": 3, "vectors": false, ...}

and every further line is one record, with its id, address, labels, content,
scores, timestamps (Unix seconds), access count, metadata, instance key, scope,
its session when it has one and its vector (unless exported without vectors).
Addresses and tag products are written as decimal strings, so that every JSON
reader keeps them exact. A line without a session imports as a record without one.

Importing writes records verbatim: ids, addresses, timestamps, strength and
access counts are kept. A label whose prime differs between the pack and the
target store takes the store's prime; records whose address holds that prime
get a new address, and the report names them. A record already in the store
(the same labels and content, or the same instance key) is skipped, so
importing a pack twice adds nothing. Nothing is written unless every line
reads cleanly, or bad lines are skipped on request. Records that arrive
without a vector get one from the store's embedder (:func:`embed_missing`),
so that an imported pack ranks as it did where it came from.

Records keep their scope. A record that names none (from a pack written
before scopes existed, or from another format) goes to the engine's current
scope; an import can also put every record into one chosen scope, or take
only the records of some scopes.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import replace
from datetime import datetime, timezone
from typing import IO, TYPE_CHECKING, Any

from ..core.address import concept_bucket, instance_id, pack, record_id, unpack
from ..core.filters import Filters
from ..core.filters import resolve as resolve_filters
from ..core.portable import (
    BadLine,
    ExportReport,
    ImportReport,
    PortableRecord,
    Progress,
    Relabel,
    Source,
    open_text,
    parse_timestamp,
    portable_record,
    registries_from,
)
from ..core.portable import pack_vector as _pack_vector
from ..core.primes import Kind
from ..core.scopes import normalise_scope, normalise_scopes
from ..errors import DimensionMismatch, InvalidInput, NotAvailable
from ..recall.space import CUSTOM_PREFIX, DIM_KEY, SPACE_KEY, set_space
from ..storage.base import SqlStorage

if TYPE_CHECKING:
    from ..engine.facade import MemoryEngine
    from ..engine.writes import StoreItem
    from ..storage import StoredRow

__all__ = [
    "PACK_FORMAT",
    "PACK_VERSION",
    "BadLine",
    "ExportReport",
    "ImportReport",
    "PortableRecord",
    "Progress",
    "Relabel",
    "Source",
    "embed_missing",
    "export_pack",
    "import_pack",
    "numbered_lines",
    "open_text",
    "parse_timestamp",
    "portable_record",
    "read_pack",
    "registries_from",
    "write_source",
]

PACK_FORMAT = "prime-memory-pack"
PACK_VERSION = 1

_BATCH = 500
#: How many input lines a reader takes between progress reports.
_PROGRESS_EVERY = 1_000


# -- packs ------------------------------------------------------------------------------


def read_pack(path: str | os.PathLike[str], *, progress: Progress | None = None) -> Source:
    """Read a pack. Bad record lines are collected in ``Source.bad``, not raised.

    ``progress(bytes_read, file_size)`` is called as the file is read.

    Raises:
        InvalidInput: the file is missing or not a pack, its header is unreadable,
            or it is from a newer format version.
    """
    name = str(path)
    records: list[PortableRecord] = []
    bad: list[BadLine] = []
    with open_text(path) as handle:
        lines = numbered_lines(handle, name, progress)
        header_line = next(lines, None)
        if header_line is None:
            raise InvalidInput(f"{name} is empty; a pack starts with a header line")
        header_number, text = header_line
        header = _header(text, name, header_number)
        for number, text in lines:
            try:
                records.append(portable_record(json.loads(text), number))
            except json.JSONDecodeError as exc:
                bad.append(BadLine(name, number, f"not valid JSON ({exc.msg})"))
            except InvalidInput as exc:
                bad.append(BadLine(name, number, str(exc)))
    space = header.get("embedding_space")
    return Source(
        name=name,
        records=records,
        registries=registries_from(header.get("registries"), f"{name}:{header_number}"),
        embedding_space=space if isinstance(space, str) else None,
        bad=bad,
        lines=len(records) + len(bad),
    )


def numbered_lines(
    handle: IO[str], name: str, progress: Progress | None = None
) -> Iterator[tuple[int, str]]:
    """The non-blank lines of a file opened by :func:`open_text`, numbered from 1.

    ``progress(bytes_read, file_size)`` is called every so many lines and at the end.

    Raises:
        InvalidInput: the file is not UTF-8 text.
    """
    size = os.fstat(handle.fileno()).st_size if progress is not None else 0
    done = 0
    number = 0
    try:
        for number, text in enumerate(handle, start=1):
            if progress is not None:
                # Lines keep their own line endings (newline=""), so this counts the file's bytes.
                done += len(text.encode("utf-8"))
                if number % _PROGRESS_EVERY == 0:
                    progress(done, size)
            if text.strip():
                yield number, text
    except UnicodeDecodeError:
        raise InvalidInput(f"{name}:{number + 1}: not UTF-8 text") from None
    if progress is not None:
        progress(size, size)


def _header(text: str, name: str, number: int) -> dict[str, Any]:
    try:
        header = json.loads(text)
    except json.JSONDecodeError:
        header = None
    if not isinstance(header, dict) or header.get("format") != PACK_FORMAT:
        raise InvalidInput(
            f"{name}:{number}: not a memory pack (the first line must be a "
            f'{{"format": "{PACK_FORMAT}", ...}} header)'
        )
    version = header.get("version")
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise InvalidInput(f"{name}:{number}: the pack header has no valid version")
    if version > PACK_VERSION:
        raise InvalidInput(
            f"{name} is a version {version} pack, newer than this version of "
            f"prime-memory-folding reads (up to {PACK_VERSION}); upgrade the package"
        )
    return header


def import_pack(
    engine: MemoryEngine,
    path: str | os.PathLike[str],
    *,
    skip_bad: bool = False,
    dry_run: bool = False,
    vectors: bool = True,
    progress: Progress | None = None,
    scope: str | None = None,
    scopes: Iterable[str] | None = None,
    embed: bool = True,
) -> ImportReport:
    """Import a pack written by :func:`export_pack`.

    Records keep their scopes; ``scope`` puts every one into that scope
    instead, and ``scopes`` takes only the records of those scopes (see
    :func:`write_source`). With ``embed``, records that arrive without a
    vector (or all of them, with ``vectors=False``) are embedded afterwards
    (:func:`embed_missing`).

    Raises:
        InvalidInput: the file is not a readable pack, is from a newer version,
            or has a bad line and ``skip_bad`` is False; nothing was written.
        DimensionMismatch: the pack's vectors do not fit the store's embedding space.
        EmbeddingError: the embedder failed; the records were imported without vectors.
    """
    return write_source(
        engine,
        read_pack(path),
        skip_bad=skip_bad,
        dry_run=dry_run,
        vectors=vectors,
        progress=progress,
        scope=scope,
        scopes=scopes,
        embed=embed,
    )


def embed_missing(engine: MemoryEngine, *, progress: Progress | None = None) -> int:
    """Give the records that have no vector one, with the engine's embedder
    (:meth:`.MemoryEngine.reembed` with ``missing_only``); the others keep
    theirs. Returns how many had none.

    Nothing changes, and 0 is returned, when every record has a vector, when
    the store holds vectors its callers bring (a ``custom:`` space, where text
    is never embedded), or when embedding is off.

    Raises:
        EmbeddingError: the embedder failed; nothing was changed.
    """
    summary = engine.stats()
    space = summary.embedding_space
    if not summary.without_vector or (space is not None and space.startswith(CUSTOM_PREFIX)):
        return 0
    try:
        engine.reembed(progress=progress, missing_only=True)
    except NotAvailable:
        return 0
    return summary.without_vector


def export_pack(
    engine: MemoryEngine,
    out: IO[str],
    *,
    filters: Filters | None = None,
    vectors: bool = True,
    progress: Progress | None = None,
) -> ExportReport:
    """Write the records that pass ``filters`` to ``out`` as a pack, oldest first.

    Records keep their vectors unless ``vectors`` is False; an import embeds
    the records of a pack without them again, which takes longer.

    ``filters`` gates as in :meth:`.MemoryEngine.match_ids`; its ``since`` and
    ``until`` bound the records' ``updated_at``, so a pack "since" a date holds
    what was created or changed after it. Its ``scopes`` left at None export
    every scope, so that a pack of the whole store is a whole backup.

    Raises:
        InvalidInput: ``filters`` is not a :class:`.Filters`.
    """
    gates = resolve_filters(filters)
    if gates.scopes is None:
        gates = replace(gates, scopes=["*"])
    ids = engine.match_ids(filters=gates)
    rows: list[StoredRow] = []
    storage = engine.storage
    for start in range(0, len(ids), _BATCH):
        found = storage.fetch(ids[start : start + _BATCH])
        rows.extend(
            stored if vectors else replace(stored, vector_blob=None) for stored in found.values()
        )
    rows.sort(key=lambda row: (row.record.created_at, row.record.record_id))
    space = storage.get_meta(SPACE_KEY)
    dim = storage.get_meta(DIM_KEY)
    stats = engine.stats()
    header = {
        "format": PACK_FORMAT,
        "version": PACK_VERSION,
        "records": len(rows),
        "exported_at": datetime.fromtimestamp(engine.now(), tz=timezone.utc).isoformat(
            timespec="seconds"
        ),
        "registries": stats.registries,
        "embedding_space": space,
        "embedding_dim": int(dim) if dim else None,
        "vectors": vectors,
    }
    out.write(json.dumps(header, ensure_ascii=False) + "\n")
    for done, stored in enumerate(rows, start=1):
        out.write(json.dumps(_pack_line(stored, vectors), ensure_ascii=False) + "\n")
        if progress is not None and (done % _BATCH == 0 or done == len(rows)):
            progress(done, len(rows))
    return ExportReport(records=len(rows), vectors=vectors, embedding_space=space)


def _pack_line(stored: StoredRow, vectors: bool) -> dict[str, Any]:
    rec = stored.record
    line: dict[str, Any] = {
        "record_id": rec.record_id,
        "address": str(rec.address),
        "domain": rec.domain,
        "subdomain": rec.subdomain,
        "tags": list(rec.tags),
        "tag_product": str(rec.tag_product),
        "content": rec.content,
        "importance": rec.importance,
        "strength": rec.strength,
        "created_at": rec.created_at,
        "updated_at": rec.updated_at,
        "accessed_at": rec.accessed_at,
        "access_count": rec.access_count,
        "metadata": rec.metadata,
        "instance_key": stored.instance_key,
        "scope": rec.scope,
    }
    if rec.session is not None:
        line["session"] = rec.session
    strength_at = getattr(stored, "strength_at", None)
    if strength_at is not None:
        line["strength_at"] = strength_at
    if vectors and rec.vector is not None:
        line["vector"] = list(rec.vector)
    return line


# -- the verbatim writer -------------------------------------------------------------


def write_source(
    engine: MemoryEngine,
    source: Source,
    *,
    skip_bad: bool = False,
    dry_run: bool = False,
    vectors: bool = True,
    progress: Progress | None = None,
    scope: str | None = None,
    scopes: Iterable[str] | None = None,
    embed: bool = True,
) -> ImportReport:
    """Write a source's records into the store verbatim, in one transaction.

    With ``dry_run`` everything is worked out, including re-addressing, and
    then rolled back. With ``scopes``, only records whose scope is among them
    are written (``["*"]``: all): the scope a record names, else the engine's
    current scope. Each goes to ``scope`` when given, else to that scope.
    With ``embed``, records written without a vector are then embedded
    (:func:`embed_missing`, in a transaction of its own).

    Raises:
        InvalidInput: the source has bad lines and ``skip_bad`` is False.
        DimensionMismatch: vectors that do not fit the store's embedding space.
        EmbeddingError: the embedder failed; the records were written without vectors.
    """
    if source.bad and not skip_bad:
        more = f" (and {len(source.bad) - 1} more)" if len(source.bad) > 1 else ""
        raise InvalidInput(
            f"{source.bad[0]}{more}; nothing was imported. Fix the input, or skip bad "
            "lines (--skip-bad)"
        )
    target = None if scope is None else normalise_scope(scope)
    wanted = None if scopes is None else normalise_scopes(scopes)
    current = engine.whoami().current
    # Select by the scope each record names (or would get), then move.
    named = [replace(rec, scope=rec.scope or current) for rec in source.records]
    records = [rec for rec in named if wanted is None or rec.scope in wanted]
    not_selected = len(named) - len(records)
    if target is not None:
        records = [replace(rec, scope=target) for rec in records]
    if not vectors:
        records = [replace(rec, vector=None) for rec in records]
    writer = _Writer(engine, source, records, progress)
    # With no other writer at once (PostgreSQL's servers take turns), the
    # registries read at the start stay true, and a pack's own primes can be kept.
    engine.write_verbatim(lambda storage: writer.run(), dry_run=dry_run)
    if embed and writer.bare and not dry_run:
        embed_missing(engine)
    return ImportReport(
        source=source.name,
        lines=source.lines or len(source.records) + len(source.bad),
        unit=source.unit,
        read=len(records),
        added=sum(writer.per_domain.values()),
        already_present=writer.present,
        added_per_domain=dict(sorted(writer.per_domain.items())),
        readdressed=tuple(writer.readdressed),
        relabelled=tuple(writer.relabelled),
        skipped=tuple(source.bad),
        dry_run=dry_run,
        added_per_scope=dict(sorted(writer.per_scope.items())),
        not_selected=not_selected,
        left_out=tuple(source.left_out),
    )


class _Writer:
    """One import's work inside its transaction."""

    def __init__(
        self,
        engine: MemoryEngine,
        source: Source,
        records: Sequence[PortableRecord],
        progress: Progress | None,
    ) -> None:
        self.engine = engine
        self.storage: SqlStorage = engine.storage
        self.source = source
        self.records = records
        self.progress = progress
        self.now = engine.now()
        self.per_domain: dict[str, int] = {}
        self.per_scope: dict[str, int] = {}
        self.present = 0
        #: Records written without a vector.
        self.bare = 0
        self.readdressed: list[tuple[str, str]] = []
        self.relabelled: list[Relabel] = []

    def run(self) -> None:
        self._claim_space()
        primes = self._primes()
        keys = [_dedupe_key(rec) for rec in self.records]
        known = set(self.storage.find_dedupe(list(dict.fromkeys(keys))))
        planned = [self._address(rec, primes) for rec in self.records]
        taken = self.storage.existing_ids([record_id(a) for a in planned])
        used: set[str] = set()
        used_labels: set[tuple[str, str]] = set()
        batch: list[StoredRow] = []
        total = len(self.records)
        for done, (rec, key, address) in enumerate(zip(self.records, keys, planned), start=1):
            same_id = rec.address == address and record_id(address) in taken
            if key in known or same_id:
                self.present += 1
            else:
                known.add(key)
                final = self._free_address(rec, address, taken, used)
                if rec.address is not None and final != rec.address:
                    self.readdressed.append((record_id(rec.address), record_id(final)))
                batch.append(self._row(rec, key, final, primes))
                self.bare += rec.vector is None
                self.per_domain[rec.domain] = self.per_domain.get(rec.domain, 0) + 1
                scope = rec.scope or "global"
                self.per_scope[scope] = self.per_scope.get(scope, 0) + 1
                used_labels.update(
                    {(Kind.DOMAIN.value, rec.domain), (Kind.SUBDOMAIN.value, rec.subdomain)}
                )
                used_labels.update((Kind.TAG.value, tag) for tag in rec.tags)
            if len(batch) >= _BATCH:
                self.storage.insert(batch)
                batch = []
            if self.progress is not None and (done % _BATCH == 0 or done == total):
                self.progress(done, total)
        self.storage.insert(batch)
        # Only labels of records actually written were moved; the rest is old news.
        self.relabelled = [r for r in self.relabelled if (r.kind, r.label) in used_labels]

    def _claim_space(self) -> None:
        dims = {len(rec.vector) for rec in self.records if rec.vector is not None}
        if not dims:
            return
        if len(dims) > 1:
            raise DimensionMismatch(
                f"{self.source.name} holds vectors of different dimensions {sorted(dims)}; "
                "import without vectors (--no-vectors)"
            )
        dim = dims.pop()
        for rec in self.records:
            if rec.vector is not None:
                try:
                    _pack_vector(rec.vector)
                except InvalidInput as exc:
                    raise InvalidInput(f"{self.source.name}:{rec.line}: {exc}") from None
        space = self.storage.get_meta(SPACE_KEY)
        wanted = self.source.embedding_space or f"{CUSTOM_PREFIX}{dim}"
        if space is None:
            set_space(self.storage, wanted, dim)
            return
        have = int(self.storage.get_meta(DIM_KEY) or 0)
        named_apart = (
            self.source.embedding_space is not None and self.source.embedding_space != space
        )
        if have != dim or named_apart:
            raise DimensionMismatch(
                f"{self.source.name} holds vectors from embedding space {wanted}, but this "
                f"store uses {space} (dimension {have}); import without vectors (--no-vectors)"
            )

    def _primes(self) -> dict[Kind, dict[str, int]]:
        """Target primes for every label the records use, keeping the source's where free."""
        wanted: dict[Kind, dict[str, None]] = {kind: {} for kind in Kind}
        for rec in self.records:
            wanted[Kind.DOMAIN][rec.domain] = None
            wanted[Kind.SUBDOMAIN][rec.subdomain] = None
            for tag in rec.tags:
                wanted[Kind.TAG][tag] = None
        current = self.storage.load_primes()
        result: dict[Kind, dict[str, int]] = {kind: {} for kind in Kind}
        for kind, labels in wanted.items():
            table = current[kind]
            source_table = self.source.registries.get(kind, {})
            in_use = set(table.values())
            later: list[str] = []
            # Keep the source's primes first, so a fresh assignment cannot take one of them.
            for label in sorted(labels, key=lambda lb: (source_table.get(lb, 0), lb)):
                if label in table:
                    result[kind][label] = table[label]
                    continue
                wish = source_table.get(label)
                if wish is not None and wish not in in_use and self._register(kind, label, wish):
                    result[kind][label] = wish
                    in_use.add(wish)
                else:
                    later.append(label)
            for label in later:
                result[kind][label] = self.storage.assign_prime(kind, label)
            for label in labels:
                wish = source_table.get(label)
                if wish is not None and wish != result[kind][label]:
                    self.relabelled.append(Relabel(kind.value, label, wish, result[kind][label]))
        return result

    def _register(self, kind: Kind, label: str, prime: int) -> bool:
        self.storage.db.execute(
            "INSERT INTO primes (kind, label, prime) VALUES (?, ?, ?)", (kind.value, label, prime)
        )
        return True

    @staticmethod
    def _address(rec: PortableRecord, primes: dict[Kind, dict[str, int]]) -> int:
        domain_prime = primes[Kind.DOMAIN][rec.domain]
        subdomain_prime = primes[Kind.SUBDOMAIN][rec.subdomain]
        if rec.address is not None:
            _, _, bucket, instance = unpack(rec.address)
            return pack(domain_prime, subdomain_prime, bucket, instance)
        bucket = concept_bucket(rec.domain, rec.subdomain, rec.tags, rec.scope or "global")
        identity = rec.instance_key if rec.instance_key is not None else rec.content
        return pack(domain_prime, subdomain_prime, bucket, instance_id(identity))

    def _free_address(
        self, rec: PortableRecord, address: int, taken: set[str], used: set[str]
    ) -> int:
        """The planned address, or the next stable alternative when a different record has it."""
        domain_prime, subdomain_prime, bucket, _ = unpack(address)
        identity = rec.instance_key if rec.instance_key is not None else rec.content
        attempt = 0
        while True:
            rid = record_id(address)
            if (
                rid not in used
                and rid not in taken
                and (attempt == 0 or not self.storage.existing_ids([rid]))
            ):
                used.add(rid)
                return address
            attempt += 1
            address = pack(domain_prime, subdomain_prime, bucket, instance_id(identity, attempt))

    def _row(
        self,
        rec: PortableRecord,
        key: str,
        address: int,
        primes: dict[Kind, dict[str, int]],
    ) -> StoredRow:
        """The row for ``rec`` as the engine builds it, with the pack's history kept."""
        import numpy as np

        from ..engine.writes import new_row

        created = self.now if rec.created_at is None else rec.created_at
        updated = created if rec.updated_at is None else rec.updated_at
        accessed = updated if rec.accessed_at is None else rec.accessed_at
        array = None if rec.vector is None else np.asarray(rec.vector, dtype=np.float32)
        row = new_row(replace(_item(rec), vector=array), key, address, primes, created)
        record = replace(
            row.record,
            strength=rec.strength,
            updated_at=updated,
            accessed_at=accessed,
            access_count=rec.access_count,
        )
        return replace(row, record=record, strength_at=rec.strength_at)


def _item(rec: PortableRecord) -> StoreItem:
    """``rec`` as a store request, without its vector."""
    from ..engine.writes import StoreItem

    return StoreItem(
        rec.content, rec.domain, rec.subdomain, rec.tags, rec.importance, None, rec.metadata,
        rec.instance_key, rec.scope or "global", rec.session,
    )  # fmt: skip


def _dedupe_key(rec: PortableRecord) -> str:
    """The engine's dedupe key for ``rec``: the same labels and content are the same memory."""
    return _item(rec).dedupe_key
