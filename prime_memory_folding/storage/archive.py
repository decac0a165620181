"""The fold archive in SQLite: where pruned and folded records go, and come back from.

Records are copied column for column with ``INSERT ... SELECT``, so a restored
record is byte-for-byte the record that left.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from .base import StoredRow
from .sqlite import (
    _RECORD_COLUMNS,
    SQLiteStorage,
    _chunks,
    _parse_tags,
    _stored_row,
    _translate,
)

__all__ = [
    "REASONS",
    "ArchiveEntry",
    "SnapshotRow",
    "archive_records",
    "archived",
    "bulk_cache",
    "checkpoint",
    "count",
    "count_by_reason",
    "count_entries",
    "list_entries",
    "live_profile",
    "purge",
    "read_snapshot",
    "restore_entries",
    "set_strengths",
    "snapshot_rows",
    "vacuum",
]

#: Why a record is in the archive: decayed, merged into a folded record, or forgotten.
REASONS = ("pruned", "folded", "forgotten")

_SNAPSHOT_SQL = (
    "SELECT record_id, domain, subdomain, tags, content, importance, strength, created_at, "
    "accessed_at, access_count, strength_at, json_extract(metadata, '$.tier'), vector, "
    "scope FROM records"
)
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


@contextlib.contextmanager
def read_snapshot(storage: SQLiteStorage) -> Iterator[None]:
    """A read transaction: every read inside sees one consistent state."""
    db = storage.db
    if db.in_transaction:
        yield
        return
    db.execute("BEGIN")
    try:
        yield
    finally:
        if db.in_transaction:
            db.execute("COMMIT")


@contextlib.contextmanager
def bulk_cache(storage: SQLiteStorage, kib: int = _BULK_CACHE_KIB) -> Iterator[None]:
    """A larger page cache while a fold reads and rewrites much of the store."""
    db = storage.db
    before = db.execute("PRAGMA cache_size").fetchone()[0]
    db.execute(f"PRAGMA cache_size = {-int(kib)}")
    try:
        yield
    finally:
        db.execute(f"PRAGMA cache_size = {int(before)}")


def snapshot_rows(storage: SQLiteStorage) -> list[SnapshotRow]:
    """Every live record, as folding needs it."""
    rows: list[SnapshotRow] = []
    for r in storage.db.execute(_SNAPSHOT_SQL):
        blob = r[12]
        tags = _parse_tags(r[3])
        rows.append(
            SnapshotRow(
                record_id=r[0],
                domain=r[1],
                subdomain=r[2],
                tags=tags,
                content=r[4],
                importance=r[5],
                strength=r[6],
                created_at=r[7],
                accessed_at=r[8],
                access_count=r[9],
                strength_at=r[10],
                tier=r[11] if isinstance(r[11], str) else None,
                vector=None if blob is None else np.frombuffer(blob, dtype="<f4"),
                scope=r[13],
            )
        )
    return rows


def archive_records(
    storage: SQLiteStorage,
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
    entry_columns = "record_id, reason, detail, folded_into"
    for staged in storage.staged("staged_archive", entry_columns, ordered):
        storage.db.execute(
            f"INSERT INTO archive (reason, detail, folded_into, archived_at, {_RECORD_COLUMNS}) "
            f"SELECT s.reason, s.detail, s.folded_into, ?, {columns} "
            f"FROM {staged} AS s CROSS JOIN records AS r ON r.record_id = s.record_id "
            f"ORDER BY s.rowid",
            (now,),
        )
    storage.delete([rid for rid, _, _, _ in ordered])


def set_strengths(
    storage: SQLiteStorage, strengths: Sequence[tuple[str, float]], now: float
) -> None:
    """Persist decayed strengths as of ``now``. Call inside a transaction."""
    storage.db.executemany(
        "UPDATE records SET strength = ?, strength_at = ? WHERE record_id = ?",
        ((strength, now, rid) for rid, strength in sorted(strengths)),
    )


def _entries(storage: SQLiteStorage, where: str, params: Sequence[object]) -> list[ArchiveEntry]:
    sql = (
        f"SELECT seq, reason, detail, folded_into, archived_at, {_RECORD_COLUMNS} "
        f"FROM archive WHERE {where} ORDER BY seq"
    )
    return [
        ArchiveEntry(r[0], r[1], r[2], r[3], r[4], _stored_row(r[5:]))
        for r in storage.db.execute(sql, params)
    ]


def _filter(
    reason: str | None, contains: str | None, record_id: str | None
) -> tuple[str, list[object]]:
    clauses: list[str] = ["1"]
    params: list[object] = []
    if reason is not None:
        clauses.append("reason = ?")
        params.append(reason)
    if contains:
        clauses.append("instr(lower(content), lower(?)) > 0")
        params.append(contains)
    if record_id is not None:
        clauses.append("(record_id = ? OR folded_into = ?)")
        params.extend((record_id, record_id))
    return " AND ".join(clauses), params


def list_entries(
    storage: SQLiteStorage,
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
    where, params = _filter(reason, contains, record_id)
    sql = (
        f"SELECT seq, reason, detail, folded_into, archived_at, {_RECORD_COLUMNS} "
        f"FROM archive WHERE {where} ORDER BY seq DESC LIMIT ? OFFSET ?"
    )
    return [
        ArchiveEntry(r[0], r[1], r[2], r[3], r[4], _stored_row(r[5:]))
        for r in storage.db.execute(sql, [*params, limit, offset])
    ]


def count_entries(
    storage: SQLiteStorage, *, reason: str | None, contains: str | None, record_id: str | None
) -> int:
    """How many entries :func:`list_entries` filters from, before paging."""
    where, params = _filter(reason, contains, record_id)
    found = storage.db.execute(f"SELECT count(*) FROM archive WHERE {where}", params)
    return int(found.fetchone()[0])


def live_profile(
    storage: SQLiteStorage,
) -> list[tuple[str, float, float, int, float, float, float | None, object]]:
    """Per live record: id, created_at, accessed_at, access_count, importance,
    strength, strength_at and the tier label, for summaries of the whole store."""
    return list(
        storage.db.execute(
            "SELECT record_id, created_at, accessed_at, access_count, importance, strength, "
            "strength_at, json_extract(metadata, '$.tier') FROM records"
        )
    )


def archived(storage: SQLiteStorage, record_id: str) -> ArchiveEntry | None:
    """The newest archive entry of ``record_id``, if any."""
    found = _entries(storage, "record_id = ?", (record_id,))
    return found[-1] if found else None


def members_of(storage: SQLiteStorage, folded_id: str) -> list[ArchiveEntry]:
    """The archived members of a folded record, oldest entry first (by id within a fold)."""
    return _entries(storage, "reason = 'folded' AND folded_into = ?", (folded_id,))


def restore_entries(storage: SQLiteStorage, seqs: Sequence[int]) -> None:
    """Move archive entries back into ``records``. Call inside a transaction."""
    for chunk in _chunks(list(seqs)):
        marks = ",".join("?" * len(chunk))
        storage.db.execute(
            f"INSERT INTO records ({_RECORD_COLUMNS}) "
            f"SELECT {_RECORD_COLUMNS} FROM archive WHERE seq IN ({marks}) ORDER BY seq",
            chunk,
        )
        storage.db.execute(f"DELETE FROM archive WHERE seq IN ({marks})", chunk)


def purge(storage: SQLiteStorage, before: float | None, reason: str | None) -> int:
    """Delete archive entries archived before ``before`` with ``reason``. In a transaction."""
    clauses: list[str] = ["1"]
    params: list[object] = []
    if before is not None:
        clauses.append("archived_at < ?")
        params.append(before)
    if reason is not None:
        clauses.append("reason = ?")
        params.append(reason)
    cursor = storage.db.execute(f"DELETE FROM archive WHERE {' AND '.join(clauses)}", params)
    return int(cursor.rowcount)


def count(storage: SQLiteStorage) -> int:
    """Entries in the archive."""
    return int(storage.db.execute("SELECT count(*) FROM archive").fetchone()[0])


def count_by_reason(storage: SQLiteStorage) -> dict[str, int]:
    """Entries in the archive per reason (``folded``, ``pruned``), by reason name."""
    rows = storage.db.execute(
        "SELECT reason, count(*) FROM archive GROUP BY reason ORDER BY reason"
    )
    return {str(reason): int(n) for reason, n in rows}


def checkpoint(storage: SQLiteStorage) -> None:
    """Copy the write-ahead log into the database and truncate it (outside a transaction)."""
    try:
        storage.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    except sqlite3.Error as exc:
        raise _translate(exc, storage.path) from None


def vacuum(storage: SQLiteStorage) -> None:
    """Rebuild the database file to hand freed pages back (outside a transaction)."""
    try:
        storage.db.execute("VACUUM")
    except sqlite3.Error as exc:
        raise _translate(exc, storage.path) from None
    checkpoint(storage)
