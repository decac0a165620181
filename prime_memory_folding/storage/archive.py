"""The fold archive: where pruned and folded records go, and come back from.

Records are copied column for column with ``INSERT ... SELECT``, so a restored
record is byte-for-byte the record that left. The SQL runs on both backends
(:class:`~.base.SqlStorage`): where SQLite and PostgreSQL differ, the
difference is spelled out here, next to the statement it changes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from ..errors import StoreError
from .base import SqlStorage, StoredRow
from .pg_decay import TIER_SQL
from .ranks import id_order
from .sqlite import (
    _RECORD_COLUMNS,
    STAGED_CHUNK,
    ColumnReader,
    SQLiteStorage,
    _chunks,
    _parse_tags,
    _translate,
    stored_row,
)

__all__ = [
    "REASONS",
    "ArchiveEntry",
    "Snapshot",
    "SnapshotRow",
    "archive_records",
    "archived",
    "bulk_cache",
    "checkpoint",
    "closed_into",
    "contents",
    "count",
    "count_by_reason",
    "count_entries",
    "empty_snapshot",
    "history",
    "keep_versions",
    "list_entries",
    "live_profile",
    "purge",
    "read_snapshot",
    "read_snapshot_columns",
    "read_snapshot_of",
    "restore_entries",
    "set_strengths",
    "vacuum",
]

#: Why a record is in the archive: decayed, merged into a folded record, forgotten,
#: an earlier version of a live record that an update replaced (its history), a
#: version a newer memory superseded, or a memory about code that went stale unused.
REASONS = ("pruned", "folded", "forgotten", "replaced", "superseded", "stale")

_SNAPSHOT_SQL = (
    "SELECT record_id, domain, subdomain, tags, content, importance, strength, created_at, "
    "accessed_at, access_count, strength_at, {tier}, {vector}, "
    "scope FROM records"
)
#: ``metadata["tier"]``, in each backend's words (a tier that is no string counts as none).
_SQLITE_TIER = "json_extract(metadata, '$.tier')"
_PG_TIER = TIER_SQL
_UPPER = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def _tier(storage: SqlStorage) -> str:
    return _SQLITE_TIER if isinstance(storage, SQLiteStorage) else _PG_TIER


def _snapshot_sql(storage: SqlStorage, *, vectors: bool = True) -> str:
    """The snapshot's columns; without ``vectors``, a NULL where the vector goes."""
    return _SNAPSHOT_SQL.format(tier=_tier(storage), vector="vector" if vectors else "NULL")


#: The page cache a fold uses (KiB); SQLite's default of 2 MiB makes archiving
#: many scattered rows re-read the same pages.
_BULK_CACHE_KIB = 262_144


@dataclass(frozen=True, slots=True)
class SnapshotRow:
    """One live record, as folding needs it."""

    record_id: str
    domain: str
    subdomain: str
    tags: tuple[str, ...]
    content: str
    importance: float
    strength: float
    created_at: float
    accessed_at: float
    access_count: int
    strength_at: float | None
    tier: str | None
    vector: npt.NDArray[np.float32] | None
    scope: str = "global"


@dataclass(frozen=True, slots=True)
class ArchiveEntry:
    """One archived record and why it left."""

    seq: int
    reason: str
    detail: str
    folded_into: str | None
    archived_at: float
    stored: StoredRow


def read_snapshot(storage: SqlStorage) -> contextlib.AbstractContextManager[None]:
    """A read transaction: every read inside sees one consistent state."""
    return storage.read_snapshot()


@contextlib.contextmanager
def bulk_cache(storage: SqlStorage, kib: int = _BULK_CACHE_KIB) -> Iterator[None]:
    """A larger page cache while a fold reads and rewrites much of the store (SQLite).

    PostgreSQL's shared buffers are the server's to size: nothing changes there.
    """
    if not isinstance(storage, SQLiteStorage):
        yield
        return
    db = storage.db
    before = db.execute("PRAGMA cache_size").fetchone()[0]
    db.execute(f"PRAGMA cache_size = {-int(kib)}")
    try:
        yield
    finally:
        db.execute(f"PRAGMA cache_size = {int(before)}")


@contextlib.contextmanager
def mapped_file(storage: SqlStorage) -> Iterator[None]:
    """The SQLite file mapped into memory meanwhile (up to SQLite's cap, 2 GiB by
    default): reading a page is then no system call, for an incremental fold's
    thousands of full-text look-ups. Where it cannot be mapped, nothing changes.
    """
    is_sqlite = isinstance(storage, SQLiteStorage)
    mapped = storage.db.execute("PRAGMA mmap_size").fetchone() if is_sqlite else None
    if mapped is None:
        yield
        return
    storage.db.execute(f"PRAGMA mmap_size = {1 << 34}")
    try:
        yield
    finally:
        storage.db.execute(f"PRAGMA mmap_size = {int(mapped[0])}")


@dataclass(frozen=True, eq=False)
class RowVectors:
    """Unit vectors held in another's matrix: row ``i``'s is ``matrix[rows[i]]``.

    A fold of a store whose vectors the engine's index already holds reads
    them there, so that they are held once. Indexing gathers, as it does
    from an array of the rows themselves.
    """

    matrix: npt.NDArray[np.float32]
    rows: npt.NDArray[np.int64]

    def __getitem__(self, at: Any) -> npt.NDArray[np.float32]:
        found: npt.NDArray[np.float32] = self.matrix[self.rows[at]]
        return found

    def __len__(self) -> int:
        return len(self.rows)

    @property
    def shape(self) -> tuple[int, int]:
        return len(self.rows), int(self.matrix.shape[1])


#: Unit vectors by row: an array of them, or a view of another's.
UnitVectors = npt.NDArray[np.float32] | RowVectors
#: ``source(record_ids)``: a matrix of unit vectors, each record's row in it, and
#: which records have one; None when it cannot tell for every record.
VectorSource = Callable[
    [Sequence[str]],
    tuple[npt.NDArray[np.float32], npt.NDArray[np.int64], npt.NDArray[np.bool_]] | None,
]


@dataclass(frozen=True, eq=False)
class Snapshot:
    """Live records as folding needs them, one column per field.

    Rows are in no particular order: whatever depends on order ranks records by
    id (see :meth:`id_ranks`). ``vectors`` holds every vector once, as unit
    rows in float32; a row without a usable vector (none, of another
    dimension, or all zero) is zero and ``has_vector`` is False there.
    """

    record_ids: list[str]
    domains: list[str]
    subdomains: list[str]
    tags: list[tuple[str, ...]]
    contents: list[str]
    importance: npt.NDArray[np.float64]
    strength: npt.NDArray[np.float64]
    created_at: npt.NDArray[np.float64]
    accessed_at: npt.NDArray[np.float64]
    access_count: npt.NDArray[np.int64]
    #: When each strength was last set (None, or NaN in an array: never since storing).
    strength_at: Sequence[float | None] | npt.NDArray[np.float64]
    tiers: list[str | None]
    vectors: UnitVectors
    has_vector: npt.NDArray[np.bool_]
    scopes: list[str]

    def __len__(self) -> int:
        return len(self.record_ids)

    def id_ranks(self) -> npt.NDArray[np.int64]:
        """Each row's position in record id order: what breaks every tie."""
        order = id_order(self.record_ids)
        ranks = np.empty(len(order), dtype=np.int64)
        ranks[order] = np.arange(len(order), dtype=np.int64)
        return ranks

    @classmethod
    def of(cls, rows: Sequence[SnapshotRow]) -> Snapshot:
        """The columns of ``rows``, sorted by id."""
        ordered = sorted(rows, key=lambda r: r.record_id)
        blobs = [None if r.vector is None else np.asarray(r.vector, dtype="<f4") for r in ordered]
        return _columns(
            [
                (
                    r.record_id, r.domain, r.subdomain, r.tags, r.content, r.importance,
                    r.strength, r.created_at, r.accessed_at, r.access_count, r.strength_at,
                    r.tier, None if b is None else b.tobytes(), r.scope,
                )
                for r, b in zip(ordered, blobs)
            ]
        )  # fmt: skip


def empty_snapshot() -> Snapshot:
    """A snapshot of no records."""
    return _columns([])


def _columns(rows: Sequence[Sequence[Any]]) -> Snapshot:
    """A :class:`Snapshot` of rows in ``_SNAPSHOT_SQL``'s column order."""
    n = len(rows)
    lengths: dict[int, int] = {}
    for r in rows:
        if r[12] is not None and len(r[12]):
            lengths[len(r[12])] = lengths.get(len(r[12]), 0) + 1
    # One embedding space per store; strays of another length are left out.
    size = min(lengths, key=lambda k: (-lengths[k], k)) if lengths else 4
    vectors = np.zeros((n, size // 4), dtype=np.float32)
    has_vector = np.zeros(n, dtype=bool)
    _fill_vectors(vectors, has_vector, 0, [r[12] for r in rows], size)
    _normalise(vectors, has_vector)
    return Snapshot(
        record_ids=[r[0] for r in rows],
        domains=[r[1] for r in rows],
        subdomains=[r[2] for r in rows],
        tags=[r[3] if isinstance(r[3], tuple) else _parse_tags(r[3]) for r in rows],
        contents=[r[4] for r in rows],
        importance=np.array([r[5] for r in rows], dtype=np.float64),
        strength=np.array([r[6] for r in rows], dtype=np.float64),
        created_at=np.array([r[7] for r in rows], dtype=np.float64),
        accessed_at=np.array([r[8] for r in rows], dtype=np.float64),
        access_count=np.array([r[9] for r in rows], dtype=np.int64),
        strength_at=[r[10] for r in rows],
        tiers=[r[11] if isinstance(r[11], str) else None for r in rows],
        vectors=vectors,
        has_vector=has_vector,
        scopes=[r[13] for r in rows],
    )


def _fill_vectors(
    vectors: npt.NDArray[np.float32],
    has_vector: npt.NDArray[np.bool_],
    start: int,
    blobs: Sequence[bytes | None],
    size: int,
) -> None:
    """Copy ``blobs`` of ``size`` bytes into ``vectors`` from row ``start``; others stay zero."""
    fits = [i for i, blob in enumerate(blobs) if blob is not None and len(blob) == size]
    if not fits:
        return
    if len(fits) == len(blobs):
        joined = b"".join(blobs)  # type: ignore[arg-type]
        vectors[start : start + len(blobs)] = np.frombuffer(joined, dtype="<f4").reshape(
            len(blobs), size // 4
        )
        has_vector[start : start + len(blobs)] = True
        return
    at = np.asarray(fits, dtype=np.int64) + start
    joined = b"".join(blobs[i] for i in fits)  # type: ignore[misc]
    vectors[at] = np.frombuffer(joined, dtype="<f4").reshape(len(fits), size // 4)
    has_vector[at] = True


def _normalise(vectors: npt.NDArray[np.float32], has_vector: npt.NDArray[np.bool_]) -> None:
    """Scale rows to unit length in place, blockwise; all-zero rows have no vector."""
    step = 65_536
    for start in range(0, len(vectors), step):
        block = vectors[start : start + step]
        norms = np.linalg.norm(block, axis=1)
        present = has_vector[start : start + step] & (norms > 0)
        has_vector[start : start + step] = present
        block /= np.where(present, norms, 1.0).astype(np.float32)[:, None]


def read_snapshot_columns(
    storage: SqlStorage, vectors_from: VectorSource | None = None
) -> Snapshot:
    """Every live record, as folding needs it, in one pass over the table.

    Rows come in batches (:meth:`~.base.SqlStorage.batches`), and vectors go
    straight into one float32 matrix as they are read, so the store's vectors
    are held once; or, given ``vectors_from`` (the engine's index), they are
    not read at all but taken from there. Call inside :func:`read_snapshot`.
    """
    if vectors_from is not None:
        snapshot = _read_columns(storage, with_vectors=False)
        found = vectors_from(snapshot.record_ids)
        if found is not None:
            matrix, rows, present = found
            return dataclasses.replace(
                snapshot, vectors=RowVectors(matrix, rows), has_vector=present
            )
    return _read_columns(storage, with_vectors=True)


def _read_columns(storage: SqlStorage, *, with_vectors: bool) -> Snapshot:
    """See :func:`read_snapshot_columns`; without vectors, every row has none."""
    db = storage.db
    found = (
        with_vectors
        and db.execute(
            "SELECT length(vector) AS size, count(*) AS n FROM records "
            "WHERE vector IS NOT NULL AND length(vector) > 0 GROUP BY size "
            "ORDER BY n DESC, size LIMIT 1"
        ).fetchone()
    )
    size = int(found[0]) if found else 4
    n = int(db.execute("SELECT count(*) FROM records").fetchone()[0])
    vectors = np.zeros((n, size // 4), dtype=np.float32)
    has_vector = np.zeros(n, dtype=bool)
    columns = ColumnReader(14, shared=(1, 2, 3, 11, 13), numbers=(5, 6, 7, 8, 9, 10))
    at = 0
    for chunk in storage.batches(_snapshot_sql(storage, vectors=with_vectors)):
        if at + len(chunk) > n:
            raise StoreError(f"store {storage.path} changed while a fold read it")
        values = columns.add(chunk, skip=(12,))
        _fill_vectors(vectors, has_vector, at, values[12], size)
        at += len(chunk)
        del chunk, values
    if at != n:
        raise StoreError(f"store {storage.path} changed while a fold read it")
    _normalise(vectors, has_vector)
    tag_texts = columns.texts(3)
    parsed = {text: _parse_tags(text) for text in dict.fromkeys(tag_texts)}
    return Snapshot(
        record_ids=columns.texts(0),
        domains=columns.texts(1),
        subdomains=columns.texts(2),
        tags=[parsed[text] for text in tag_texts],
        contents=columns.texts(4),
        importance=columns.numbers(5),
        strength=columns.numbers(6),
        created_at=columns.numbers(7),
        accessed_at=columns.numbers(8),
        access_count=columns.numbers(9).astype(np.int64),
        strength_at=columns.numbers(10),
        tiers=[t if isinstance(t, str) else None for t in columns.texts(11)],
        vectors=vectors,
        has_vector=has_vector,
        scopes=columns.texts(13),
    )


def read_snapshot_of(
    storage: SqlStorage, *, record_ids: Sequence[str] = (), rowids: Sequence[int] = ()
) -> Snapshot:
    """The live records among ``record_ids`` and ``rowids`` (each read once)."""
    rows: dict[str, Sequence[Any]] = {}
    sql = _snapshot_sql(storage)
    for column, keys in (("record_id", list(record_ids)), ("id", list(rowids))):
        for chunk in _chunks(keys):
            marks = ",".join("?" * len(chunk))
            for r in storage.db.execute(f"{sql} WHERE {column} IN ({marks})", chunk):
                rows[r[0]] = r
    return _columns([rows[rid] for rid in sorted(rows)])


def contents(storage: SqlStorage, record_ids: Sequence[str]) -> dict[str, str]:
    """The content of each live record among ``record_ids``, by id."""
    found: dict[str, str] = {}
    for chunk in _chunks(list(record_ids)):
        marks = ",".join("?" * len(chunk))
        sql = f"SELECT record_id, content FROM records WHERE record_id IN ({marks})"
        found.update((rid, text) for rid, text in storage.db.execute(sql, chunk))
    return found


def archive_records(
    storage: SqlStorage,
    entries: Sequence[tuple[str, str, str, str | None]],
    now: float,
) -> None:
    """Move records ``(record_id, reason, detail, folded_into)`` to the archive.

    Call inside a transaction. Entries are moved in record id order, so that
    a large fold walks the id indexes of both tables in order instead of
    jumping around them at random.
    """
    ordered = sorted(entries)
    columns = ", ".join(f"r.{name.strip()}" for name in _RECORD_COLUMNS.split(","))
    insert = f"INSERT INTO archive (reason, detail, folded_into, archived_at, {_RECORD_COLUMNS}) "
    if isinstance(storage, SQLiteStorage):
        entry_columns = "record_id, reason, detail, folded_into"
        for staged in storage.staged("staged_archive", entry_columns, ordered):
            storage.db.execute(
                f"{insert}SELECT s.reason, s.detail, s.folded_into, ?, {columns} "
                f"FROM {staged} AS s CROSS JOIN records AS r ON r.record_id = s.record_id "
                f"ORDER BY s.rowid",
                (now,),
            )
    else:
        # PostgreSQL: the entries travel as arrays, in order, one statement per chunk.
        for chunk in _chunks(ordered, STAGED_CHUNK):
            ids, reasons, details, into = (list(column) for column in zip(*chunk))
            storage.db.execute(
                f"{insert}SELECT s.reason, s.detail, s.folded_into, ?, {columns} "
                "FROM unnest(?::text[], ?::text[], ?::text[], ?::text[]) WITH ORDINALITY "
                "AS s(record_id, reason, detail, folded_into, n) "
                "JOIN records AS r ON r.record_id = s.record_id ORDER BY s.n",
                (now, ids, reasons, details, into),
            )
    storage.delete([rid for rid, _, _, _ in ordered])


def set_strengths(storage: SqlStorage, strengths: Sequence[tuple[str, float]], now: float) -> None:
    """Persist decayed strengths as of ``now``. Call inside a transaction."""
    ordered = sorted(strengths)
    if isinstance(storage, SQLiteStorage):
        storage.db.executemany(
            "UPDATE records SET strength = ?, strength_at = ? WHERE record_id = ?",
            ((strength, now, rid) for rid, strength in ordered),
        )
        return
    # PostgreSQL: one statement per chunk rather than a round trip per record.
    for chunk in _chunks(ordered, STAGED_CHUNK):
        storage.db.execute(
            "UPDATE records AS r SET strength = u.strength, strength_at = ? "
            "FROM unnest(?::text[], ?::float8[]) AS u(record_id, strength) "
            "WHERE r.record_id = u.record_id",
            (now, [rid for rid, _ in chunk], [strength for _, strength in chunk]),
        )


def _entries(storage: SqlStorage, where: str, params: Sequence[object]) -> list[ArchiveEntry]:
    sql = (
        f"SELECT seq, reason, detail, folded_into, archived_at, {_RECORD_COLUMNS} "
        f"FROM archive WHERE {where} ORDER BY seq"
    )
    return [
        ArchiveEntry(r[0], r[1], r[2], r[3], r[4], stored_row(r[5:]))
        for r in storage.db.execute(sql, params)
    ]


def _filter(
    storage: SqlStorage, reason: str | None, contains: str | None, record_id: str | None
) -> tuple[str, list[object]]:
    clauses: list[str] = ["TRUE"]
    params: list[object] = []
    if reason is not None:
        clauses.append("reason = ?")
        params.append(reason)
    if contains:
        if isinstance(storage, SQLiteStorage):
            clauses.append("instr(lower(content), lower(?)) > 0")
        else:
            # SQLite's lower() folds ASCII letters only; so does this, for the same matches.
            clauses.append(
                f"strpos(translate(content, '{_UPPER}', '{_UPPER.lower()}'), "
                f"translate(?, '{_UPPER}', '{_UPPER.lower()}')) > 0"
            )
        params.append(contains)
    if record_id is not None:
        clauses.append("(record_id = ? OR folded_into = ?)")
        params.extend((record_id, record_id))
    return " AND ".join(clauses), params


def list_entries(
    storage: SqlStorage,
    *,
    reason: str | None,
    contains: str | None,
    record_id: str | None,
    limit: int,
    offset: int,
) -> list[ArchiveEntry]:
    """Archive entries, newest first, filtered by reason, content and record id.

    ``record_id`` matches the archived record itself and the members folded into it.
    """
    where, params = _filter(storage, reason, contains, record_id)
    sql = (
        f"SELECT seq, reason, detail, folded_into, archived_at, {_RECORD_COLUMNS} "
        f"FROM archive WHERE {where} ORDER BY seq DESC LIMIT ? OFFSET ?"
    )
    return [
        ArchiveEntry(r[0], r[1], r[2], r[3], r[4], stored_row(r[5:]))
        for r in storage.db.execute(sql, [*params, limit, offset])
    ]


def count_entries(
    storage: SqlStorage, *, reason: str | None, contains: str | None, record_id: str | None
) -> int:
    """How many entries :func:`list_entries` filters from, before paging."""
    where, params = _filter(storage, reason, contains, record_id)
    found = storage.db.execute(f"SELECT count(*) FROM archive WHERE {where}", params)
    return int(found.fetchone()[0])


def live_profile(
    storage: SqlStorage,
) -> list[tuple[str, float, float, int, float, float, float | None, object]]:
    """Per live record: id, created_at, accessed_at, access_count, importance,
    strength, strength_at and the tier label, for summaries of the whole store."""
    return list(
        storage.db.execute(
            "SELECT record_id, created_at, accessed_at, access_count, importance, strength, "
            f"strength_at, {_tier(storage)} FROM records"
        )
    )


def archived(storage: SqlStorage, record_id: str) -> ArchiveEntry | None:
    """The newest archive entry of ``record_id``, if any."""
    found = _entries(storage, "record_id = ?", (record_id,))
    return found[-1] if found else None


def keep_versions(storage: SqlStorage, record_ids: Sequence[str], now: float) -> None:
    """Copy live records into the archive as history (reason ``replaced``); they stay live.

    Call inside the transaction that then changes them.
    """
    columns = ", ".join(f"r.{name.strip()}" for name in _RECORD_COLUMNS.split(","))
    for chunk in _chunks(list(record_ids)):
        marks = ",".join("?" * len(chunk))
        storage.db.execute(
            f"INSERT INTO archive (reason, detail, folded_into, archived_at, {_RECORD_COLUMNS}) "
            f"SELECT 'replaced', 'replaced by an update', r.record_id, ?, {columns} "
            f"FROM records AS r WHERE r.record_id IN ({marks}) ORDER BY r.record_id",
            (now, *chunk),
        )


def history(storage: SqlStorage, record_id: str) -> list[ArchiveEntry]:
    """The versions of a live record that updates replaced, oldest first."""
    return _entries(storage, "reason = 'replaced' AND folded_into = ?", (record_id,))


def closed_into(storage: SqlStorage, record_id: str) -> list[ArchiveEntry]:
    """The versions newer memories superseded into ``record_id``, oldest entry first."""
    return _entries(storage, "reason = 'superseded' AND folded_into = ?", (record_id,))


def members_of(storage: SqlStorage, folded_id: str) -> list[ArchiveEntry]:
    """The archived members of a folded record, oldest entry first (by id within a fold)."""
    return _entries(storage, "reason = 'folded' AND folded_into = ?", (folded_id,))


def restore_entries(storage: SqlStorage, seqs: Sequence[int]) -> None:
    """Move archive entries back into ``records``. Call inside a transaction."""
    for chunk in _chunks(list(seqs)):
        marks = ",".join("?" * len(chunk))
        storage.db.execute(
            f"INSERT INTO records ({_RECORD_COLUMNS}) "
            f"SELECT {_RECORD_COLUMNS} FROM archive WHERE seq IN ({marks}) ORDER BY seq",
            chunk,
        )
        storage.db.execute(f"DELETE FROM archive WHERE seq IN ({marks})", chunk)


def purge(
    storage: SqlStorage,
    before: float | None,
    reason: str | None,
    record_ids: Sequence[str] = (),
) -> int:
    """Delete archive entries archived before ``before`` with ``reason`` (and, when
    given, of ``record_ids``). In a transaction."""
    clauses: list[str] = ["TRUE"]
    params: list[object] = []
    if record_ids:
        clauses.append(f"record_id IN ({', '.join('?' * len(record_ids))})")
        params.extend(record_ids)
    if before is not None:
        clauses.append("archived_at < ?")
        params.append(before)
    if reason is not None:
        clauses.append("reason = ?")
        params.append(reason)
    cursor = storage.db.execute(f"DELETE FROM archive WHERE {' AND '.join(clauses)}", params)
    return int(cursor.rowcount)


def count(storage: SqlStorage) -> int:
    """Entries in the archive."""
    return int(storage.db.execute("SELECT count(*) FROM archive").fetchone()[0])


def count_by_reason(storage: SqlStorage) -> dict[str, int]:
    """Entries in the archive per reason (``folded``, ``pruned``), by reason name."""
    rows = storage.db.execute(
        "SELECT reason, count(*) FROM archive GROUP BY reason ORDER BY reason"
    )
    return {str(reason): int(n) for reason, n in rows}


def checkpoint(storage: SqlStorage) -> None:
    """Copy the write-ahead log into the database and truncate it (outside a transaction).

    SQLite only: PostgreSQL checkpoints by itself.
    """
    if not isinstance(storage, SQLiteStorage):
        return
    try:
        storage.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    except sqlite3.Error as exc:
        raise _translate(exc, storage.path) from None


def vacuum(storage: SqlStorage) -> None:
    """Rebuild the database file to hand freed pages back (outside a transaction).

    SQLite only: PostgreSQL's autovacuum reuses the space of deleted rows.
    """
    if not isinstance(storage, SQLiteStorage):
        return
    try:
        storage.db.execute("VACUUM")
    except sqlite3.Error as exc:
        raise _translate(exc, storage.path) from None
    checkpoint(storage)
